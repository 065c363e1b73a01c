package server_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/testkit/syncbuf"
)

// logBuffer collects a server's JSON log lines.
type logBuffer struct{ syncbuf.Buffer }

// invocations returns the "invocation" log lines, by call id.
func (l *logBuffer) invocations(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == "invocation" {
			call, _ := rec["call"].(string)
			out[call] = rec
		}
	}
	return out
}

// TestInvocationLogTimesTheAnswer: the invocation log line of a call whose
// question the user answered carries answer_to_result_ms, the server's share
// of the approval round trip, which cannot exceed what the client saw from
// sending its answer to receiving the result; a call asked nothing, or whose
// question expired, has none.
func TestInvocationLogTimesTheAnswer(t *testing.T) {
	cases := []struct {
		name    string
		skill   string
		answer  string // approve | deny | "" (not asked) | expire
		timeout time.Duration
		timed   bool
	}{
		{"approved", "write_file", "approve", 0, true},
		{"denied", "write_file", "deny", 0, true},
		{"not asked (read_only)", "read_file", "", 0, false},
		{"expired", "write_file", "expire", 300 * time.Millisecond, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logBuffer{}
			s := newStack(t, stackOpts{timeout: tc.timeout, server: func(o *server.Options) {
				o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
			}})
			c := s.dial(t)
			args := `{"path":"notes.txt"}`
			if tc.skill == "write_file" {
				args = `{"path":"a.txt","content":"hi"}`
			}
			_, call := c.invokeNew(tc.skill, args)
			var window time.Duration // answer sent → result received
			var sent time.Time
			if tc.answer != "" {
				req := c.expect("approval_request")
				if tc.answer != "expire" {
					sent = time.Now()
					c.send(map[string]any{"type": "approve", "approval_id": req.str("id"), "approved": tc.answer == "approve"})
				}
				c.expect("approval_resolved")
			}
			res := c.expect("tool_result")
			if !sent.IsZero() {
				window = time.Since(sent)
			}
			if got, want := res["ok"] == true, tc.answer == "approve" || tc.answer == ""; got != want {
				t.Fatalf("tool_result %v, want ok %v", res, want)
			}
			// The line is written before the result goes out.
			rec := logs.invocations(t)[call.str("call_id")]
			if rec == nil {
				t.Fatalf("no invocation log line for call %s", call.str("call_id"))
			}
			v, has := rec["answer_to_result_ms"]
			if has != tc.timed {
				t.Fatalf("answer_to_result_ms in the log line: %v, want %v (%v)", has, tc.timed, rec)
			}
			if !tc.timed {
				return
			}
			ms, ok := v.(float64)
			if !ok || ms < 0 || time.Duration(ms*float64(time.Millisecond)) > window {
				t.Fatalf("answer_to_result_ms = %v, want a number in [0, %v] (the client's answer → result)", v, window)
			}
		})
	}
}
