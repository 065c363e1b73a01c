package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	builtins "github.com/buddy-run/buddy/builtins-wasm"
	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

// idleGap is how long the server is left alone before each timed call: long
// enough for the previous call's clean-up, its prepared instances and the
// store's queued writes to finish and every goroutine to park.
const idleGap = 2 * time.Millisecond

// BenchmarkInvokeReadFileIdle is the call a user feels: one invoke of
// read_file (a 4 KiB file) over the WebSocket on an idle server — frame in,
// the gate, the registry, the sandbox, the audit and history rows, the
// result frame out — against the bare call of the same built-in by the
// runtime (runtime.Module.Call, same runtime, same input), the two
// alternated call by call, each after the server was idle for 2 ms. Reports
// the p50 and p99 of each and invoke/bare (ratio of the p50s).
func BenchmarkInvokeReadFileIdle(b *testing.B) {
	docs := b.TempDir()
	content := bytes.Repeat([]byte("0123456789abcdef"), 256)
	if err := os.WriteFile(filepath.Join(docs, "f.txt"), content, 0o644); err != nil {
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
	reg.Warm(b.Context()) // as buddy serve does at start
	live := skills.NewLive(reg)
	b.Cleanup(func() { _ = live.Close(context.Background()) })
	srv, err := server.New(server.Options{
		Token: testToken, Store: st,
		NewGate: func(a approval.Asker) server.Gate { return approval.New(live, approval.Options{Asker: a}) },
		NewAgent: func(g server.Gate) server.Agent {
			return agent.New(agent.Options{Provider: rounds(0, nil), Skills: g, History: st, NewCallID: server.NewCallID, MaxIterations: 20})
		},
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
	c := benchDial(b, "ws"+strings.TrimPrefix(hs.URL, "http")+"/api/ws")

	// The bare call: the same built-in, grant and input, on the same runtime.
	rf, ok := builtins.Get("read_file")
	if !ok {
		b.Fatal("no read_file built-in")
	}
	man, err := runtime.ParseManifest(rf.Manifest)
	if err != nil {
		b.Fatal(err)
	}
	host, err := hostfns.Link(hostfns.Grants{Read: []string{docs}}, hostfns.Deps{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { host.Close(context.Background()) })
	mod, err := rt.Load(b.Context(), rf.Wasm, runtime.Spec{Name: "read_file", Manifest: man, Host: host})
	if err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"path":"f.txt"}`)

	var invoke, bare []time.Duration
	conv := ""
	i := 0
	for b.Loop() {
		if i%convLength == 0 {
			conv = c.newConv("warm up")
		}
		i++
		time.Sleep(idleGap)
		t0 := time.Now()
		if err := c.send(map[string]any{"type": "invoke", "conversation_id": conv, "skill": "read_file", "arguments": args}); err != nil {
			b.Fatal(err)
		}
		f, err := c.until("tool_result")
		invoke = append(invoke, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		if s, _ := json.Marshal(f); !bytes.Contains(s, content[:64]) {
			b.Fatalf("tool_result without the file: %s", s)
		}
		time.Sleep(idleGap)
		t0 = time.Now()
		res, err := mod.Call(b.Context(), args)
		bare = append(bare, time.Since(t0))
		if err != nil || !bytes.Contains(res.Output, content[:64]) {
			b.Fatalf("bare call: %v", err)
		}
	}
	ip50, bp50 := percentile(invoke, 0.5), percentile(bare, 0.5)
	b.ReportMetric(float64(ip50.Microseconds()), "invoke-p50-µs")
	b.ReportMetric(float64(percentile(invoke, 0.99).Microseconds()), "invoke-p99-µs")
	b.ReportMetric(float64(bp50.Microseconds()), "bare-p50-µs")
	b.ReportMetric(float64(percentile(bare, 0.99).Microseconds()), "bare-p99-µs")
	b.ReportMetric(float64(ip50)/float64(bp50), "invoke/bare")
}
