package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

// The agent loop's own overhead (docs/BENCHMARKS.md): a fake provider that
// answers at once, the real server, gate, registry, read_file and SQLite,
// a WebSocket client.

// benchStack is the real stack for a benchmark, with provider as the model.
func benchStack(b *testing.B, provider agent.Provider) (wsURL string) {
	b.Helper()
	docs := b.TempDir()
	if err := os.WriteFile(filepath.Join(docs, "notes.txt"), []byte("buy oat milk\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Parse(fmt.Appendf(nil, "[skills.read_file]\nallowed_directories = ['%s']\n", docs))
	if err != nil {
		b.Fatal(err)
	}
	rt, err := runtime.New(b.Context(), runtime.Options{CacheDir: cacheDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Close(context.Background()) })
	st, err := store.Open(b.Context(), filepath.Join(b.TempDir(), "buddy.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close(context.Background()) })
	reg, err := skills.New(b.Context(), skills.Options{Runtime: rt, Config: cfg, Store: st, Deps: hostfns.Deps{KV: st, Memories: st}})
	if err != nil {
		b.Fatal(err)
	}
	live := skills.NewLive(reg)
	b.Cleanup(func() { _ = live.Close(context.Background()) })
	srv, err := server.New(server.Options{
		Token: testToken, Store: st,
		NewGate: func(a approval.Asker) server.Gate { return approval.New(live, approval.Options{Asker: a}) },
		NewAgent: func(g server.Gate) server.Agent {
			return agent.New(agent.Options{Provider: provider, Skills: g, History: st, NewCallID: server.NewCallID, MaxIterations: 20})
		},
		MaxConnections: 4096,
	})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	return "ws" + strings.TrimPrefix(hs.URL, "http") + "/api/ws"
}

// benchConn is a bare WebSocket client.
type benchConn struct {
	b  *testing.B
	ws *websocket.Conn
}

func benchDial(b *testing.B, url string) *benchConn {
	ws, _, err := websocket.DefaultDialer.Dial(url, authHeader())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ws.Close() })
	return &benchConn{b: b, ws: ws}
}

func (c *benchConn) send(v any) error {
	data, _ := json.Marshal(v)
	return c.ws.WriteMessage(websocket.TextMessage, data)
}

// until reads frames up to one of type typ.
func (c *benchConn) until(typ string) (map[string]any, error) {
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return nil, err
		}
		var f map[string]any
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, err
		}
		if f["type"] == "error" && typ != "error" {
			return nil, fmt.Errorf("error frame: %v", f)
		}
		if f["type"] == typ {
			return f, nil
		}
	}
}

// newConv starts a conversation with a first turn and returns its id.
func (c *benchConn) newConv(text string) string {
	if err := c.send(map[string]any{"type": "send", "text": text}); err != nil {
		c.b.Fatal(err)
	}
	f, err := c.until("conversation")
	if err != nil {
		c.b.Fatal(err)
	}
	if _, err := c.until("done"); err != nil {
		c.b.Fatal(err)
	}
	return f["conversation_id"].(string)
}

// rounds is a provider that calls read_file n times (counted in the turn's
// tool messages) and then answers in two pieces.
func rounds(n int, firstToken func()) agent.Provider {
	return agent.ProviderFunc(func(_ context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
		done := 0
		for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != agent.RoleUser; i-- {
			if req.Messages[i].Role == agent.RoleTool {
				done++
			}
		}
		if done < n {
			return &agent.Response{ToolCalls: []agent.ToolCall{{ID: "call_0", Name: "read_file", Arguments: `{"path":"notes.txt"}`}}, StopReason: "tool_calls"}, nil
		}
		if firstToken != nil {
			firstToken()
		}
		onText("It says ")
		onText("buy oat milk.")
		return &agent.Response{Text: "It says buy oat milk.", StopReason: "stop"}, nil
	})
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkFirstDelta: from the provider's first token to the client
// reading the delta frame.
func BenchmarkFirstDelta(b *testing.B) {
	base := time.Now()
	var token atomic.Int64
	url := benchStack(b, rounds(0, func() { token.Store(int64(time.Since(base))) }))
	c := benchDial(b, url)
	var lat []time.Duration
	conv := ""
	i := 0
	for b.Loop() {
		if i%convLength == 0 {
			conv = c.newConv("hi")
		}
		i++
		if err := c.send(map[string]any{"type": "send", "conversation_id": conv, "text": "hi"}); err != nil {
			b.Fatal(err)
		}
		if _, err := c.until("delta"); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(base)-time.Duration(token.Load()))
		if _, err := c.until("done"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
}

// convLength is how many measured turns or calls share a conversation
// before the benchmark starts a new one: each turn reloads its
// conversation, and a conversation thousands of messages long is not what
// is measured here.
const convLength = 10

// timed runs op b.N times, in conversations of convLength, and reports the
// p50 and p99 of op alone (a new conversation's first turn is not timed).
func timed(b *testing.B, c *benchConn, op func(conv string) error) {
	var lat []time.Duration
	conv := ""
	i := 0
	for b.Loop() {
		if i%convLength == 0 {
			b.StopTimer()
			conv = c.newConv("warm up")
			b.StartTimer()
		}
		i++
		t0 := time.Now()
		if err := op(conv); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
}

// BenchmarkTurnOneReadFile: send → done for a turn whose model calls
// read_file once then answers.
func BenchmarkTurnOneReadFile(b *testing.B) {
	c := benchDial(b, benchStack(b, rounds(1, nil)))
	timed(b, c, func(conv string) error {
		if err := c.send(map[string]any{"type": "send", "conversation_id": conv, "text": "read notes"}); err != nil {
			return err
		}
		_, err := c.until("done")
		return err
	})
}

// BenchmarkInvokeReadFile: the same skill call alone, invoke → tool_result.
func BenchmarkInvokeReadFile(b *testing.B) {
	c := benchDial(b, benchStack(b, rounds(1, nil)))
	timed(b, c, func(conv string) error {
		if err := c.send(map[string]any{"type": "invoke", "conversation_id": conv, "skill": "read_file", "arguments": json.RawMessage(`{"path":"notes.txt"}`)}); err != nil {
			return err
		}
		_, err := c.until("tool_result")
		return err
	})
}

// BenchmarkConcurrentConversations: BUDDY_BENCH_CONVS conversations (200
// by default) at once, each one turn of 5 read_file rounds; one iteration is
// the whole wave.
func BenchmarkConcurrentConversations(b *testing.B) {
	n := 200
	if v := os.Getenv("BUDDY_BENCH_CONVS"); v != "" {
		fmt.Sscan(v, &n)
	}
	const toolRounds = 5
	url := benchStack(b, rounds(toolRounds, nil))
	conns := make([]*benchConn, n)
	convs := make([]string, n)
	for i := range conns {
		conns[i] = benchDial(b, url)
	}
	// One warm-up turn each (conversations created, read_file compiled).
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() { convs[i] = conns[i].newConv("warm up") })
	}
	wg.Wait()
	var lat []time.Duration
	var mu sync.Mutex
	var failed atomic.Int64
	start := time.Now()
	b.ResetTimer()
	for b.Loop() {
		for i := range conns {
			wg.Go(func() {
				t0 := time.Now()
				if err := conns[i].send(map[string]any{"type": "send", "conversation_id": convs[i], "text": "read it five times"}); err != nil {
					failed.Add(1)
					return
				}
				f, err := conns[i].until("done")
				if err != nil || f["reason"] != "final" {
					failed.Add(1)
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d turns failed", f)
	}
	turns := float64(len(lat))
	b.ReportMetric(turns/elapsed.Seconds(), "turns/s")
	b.ReportMetric(turns*toolRounds/elapsed.Seconds(), "toolcalls/s")
	b.ReportMetric(float64(percentile(lat, 0.5).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Milliseconds()), "p99-ms")
	if rss, hwm := procMemKiB("VmRSS:"), procMemKiB("VmHWM:"); rss > 0 {
		b.ReportMetric(float64(rss)/1024, "RSS-MiB")
		b.ReportMetric(float64(hwm)/1024, "peakRSS-MiB")
	}
}

// procMemKiB reads a line of /proc/self/status (0 where there is none).
func procMemKiB(key string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			var kib int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kib)
			return kib
		}
	}
	return 0
}
