package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
)

func assertShown(t *testing.T, what, s string) {
	t.Helper()
	for _, r := range s {
		if r == '\n' {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\uFFFD' {
			t.Fatalf("%s holds a raw %U: %q", what, r, s)
		}
	}
}

// TestApprovalPrompt: the terminal question shows the write's target first
// and whole, the content folded with its length, nothing raw.
func TestApprovalPrompt(t *testing.T) {
	content := strings.Repeat("\x1b[2J", 1<<20/4)
	args, _ := json.Marshal(map[string]string{"content": content, "path": "notes/\u202Etxt.exe"})
	var stderr bytes.Buffer
	a := &app{stdin: strings.NewReader("y\n"), stderr: &stderr, isTerminal: func() bool { return true }}
	ok, err := a.terminalAsker(false).Ask(t.Context(), approval.Request{Skill: "write_file", Permission: "mutating", Arguments: args})
	if err != nil || !ok {
		t.Fatalf("Ask = %v, %v; want approved", ok, err)
	}
	out := stderr.String()
	assertShown(t, "the prompt", out)
	lines := strings.Split(out, "\n")
	want := []string{
		"write_file (mutating) asks to run with:",
		`  path: "notes/\u202etxt.exe"`,
		`  content: 1,048,576 bytes, first 113: "` + strings.Repeat(`\x1b[2J`, 200/7) + `\x1b"…`,
		"Allow? [y/N] ",
	}
	if len(lines) != len(want) {
		t.Fatalf("prompt:\n%s", out)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], want[i])
		}
	}
}

// TestErrorDetail: the CLI's one error line escapes and caps what it quotes.
func TestErrorDetail(t *testing.T) {
	huge := "bad \x1b]0;pwned\x07\r\u009b\u202E" + strings.Repeat("x", 8<<20)
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"skill", huge}, strings.NewReader(""), &bytes.Buffer{}, &stderr)
	if code != errs.ExitCode(errs.KindInvalidInput) {
		t.Fatalf("exit %d", code)
	}
	out := stderr.String()
	assertShown(t, "the error", out)
	if strings.Count(out, "\n") != 1 || len(out) > maxErrorBytes+100 || !strings.HasSuffix(out, " more bytes]\n") {
		t.Errorf("error line of %d bytes: %q…", len(out), out[:min(200, len(out))])
	}
	if d := detail(errors.New("x\n\x1b[2Jy"), errs.KindSkill); d != `x \x1b[2Jy` {
		t.Errorf("detail = %q", d)
	}
}

// TestStdLogRouted: what net/http writes with the log package (here its
// "Unsolicited response received on idle HTTP channel", provoked by a server
// that sends a second response nobody asked for) does not reach buddy's
// stderr; at debug level it is routed through slog, quoted.
func TestStdLogRouted(t *testing.T) {
	prevLogger, prevOut, prevFlags := slog.Default(), log.Writer(), log.Flags()
	t.Cleanup(func() {
		slog.SetDefault(prevLogger)
		slog.SetLogLoggerLevel(slog.LevelInfo)
		log.SetOutput(prevOut)
		log.SetFlags(prevFlags)
	})
	unsolicited := func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			http.ReadRequest(bufio.NewReader(c))
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
			time.Sleep(50 * time.Millisecond)
			c.Write([]byte("HTTP/1.1 200 OK\r\n\x1b]0;pwned\x07\r\n\r\n"))
			time.Sleep(200 * time.Millisecond)
		}()
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		var b [8]byte
		resp.Body.Read(b[:])
		resp.Body.Close()
		time.Sleep(200 * time.Millisecond)
	}

	var quiet bytes.Buffer
	routeStdLog(&quiet, slog.LevelWarn)
	unsolicited(t)
	log.Printf("a direct log line")
	if quiet.Len() != 0 {
		t.Errorf("at the default level the standard logger wrote %q", quiet.String())
	}

	var debug bytes.Buffer
	routeStdLog(&debug, slog.LevelDebug)
	unsolicited(t)
	out := debug.String()
	if !strings.Contains(out, "Unsolicited response received on idle HTTP channel") {
		t.Fatalf("net/http's log line did not go through slog: %q", out)
	}
	assertShown(t, "the routed log", strings.TrimSuffix(out, "\n"))
}

// TestTerminalOutput: a skill's output, when stdout is a terminal, keeps its
// lines and loses its escapes.
func TestTerminalOutput(t *testing.T) {
	got := string(terminalOutput([]byte("{\"a\":\n\t\"\x1b]0;x\x07\u202e\"}\r")))
	if want := "{\"a\":\n\t\"\\x1b]0;x\\x07\\u202e\"}\\r"; got != want {
		t.Errorf("terminalOutput = %q, want %q", got, want)
	}
	big := terminalOutput(bytes.Repeat([]byte("\x9b"), 4<<20))
	assertShown(t, "the output", string(big))
	if len(big) > maxTerminalOutput+64 {
		t.Errorf("%d bytes shown", len(big))
	}
}
