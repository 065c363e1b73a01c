//go:build unix

package main_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// BenchmarkFirstCall: the first call a user makes, through the built binary
// and the WebSocket (invoke → tool_result):
//   - start/cold: read_file right after `buddy serve` prints its address,
//     on a data directory it never used (empty compile cache);
//   - start/warm: the same with the caches an earlier serve left;
//   - install: a skill installed with `buddy skill install` while serve runs
//     (go-pdk's 53 KB TinyGo plugin), its first call.
//
// Each iteration starts its own server on a data directory of its own (warm:
// the one an earlier server left); first-ms is the median of the first
// calls, and install-ms the median time `buddy skill install` took (it
// compiles the module into the cache, so that the call does not). One
// iteration is a few servers started and stopped, about a second: `make
// test`'s -benchtime 3x runs it whole.
//
//	go test ./cmd/buddy -run '^$' -bench FirstCall -benchtime 10x -count 5
func BenchmarkFirstCall(b *testing.B) {
	for _, mode := range []string{"start/cold", "start/warm", "install"} {
		b.Run(mode, func(b *testing.B) {
			var first, install []time.Duration
			warmData := ""
			for b.Loop() {
				s := newSandbox(b)
				files := filepath.Join(s.dir, "files")
				path := write(b, filepath.Join(files, "f.txt"), strings.Repeat("0123456789abcdef", 256))
				cfg := write(b, filepath.Join(s.dir, "buddy.toml"), writeConfig(files, "always"))
				if mode == "start/cold" {
					// Nothing compiled yet (newSandbox's skill list
					// compiles nothing; this makes sure).
					if err := os.RemoveAll(filepath.Join(s.dataDir(), "cache")); err != nil {
						b.Fatal(err)
					}
				}
				if mode == "start/warm" {
					// The caches of an earlier server on the same data
					// directory: one is started, called and stopped first.
					if warmData == "" {
						sv := startFirstCallServe(b, s, cfg)
						sv.invoke(b, "read_file", map[string]any{"path": path})
						sv.stop(b)
						warmData = s.dataHome
					} else {
						s.dataHome = warmData
					}
				}
				sv := startFirstCallServe(b, s, cfg)
				skill, args := "read_file", map[string]any{"path": path}
				if mode == "install" {
					src := filepath.Join(s.dir, "pdk")
					copyFile(b, testdata(b, "pdkplugin.wasm"), filepath.Join(src, "pdk.wasm"))
					write(b, filepath.Join(src, "skill.toml"), "[skill]\nname = \"pdk\"\nversion = \"1.0.0\"\ndescription = \"go-pdk greeter\"\nauthor = \"tests\"\npermission = \"read_only\"\nentrypoint = \"greet\"\n")
					t0 := time.Now()
					s.run(b, "skill", "install", filepath.Join(src, "pdk.wasm"), "--config", cfg).ok(b)
					install = append(install, time.Since(t0))
					skill, args = "pdk", map[string]any{"name": "buddy"}
				}
				first = append(first, sv.invoke(b, skill, args))
				sv.stop(b)
			}
			slices.Sort(first)
			b.ReportMetric(float64(first[(len(first)-1)/2].Microseconds())/1e3, "first-ms")
			if len(install) > 0 {
				slices.Sort(install)
				b.ReportMetric(float64(install[(len(install)-1)/2].Microseconds())/1e3, "install-ms")
			}
		})
	}
}

// firstCallServe is a `buddy serve` and a WebSocket to it.
type firstCallServe struct {
	cmd  *exec.Cmd
	ws   *websocket.Conn
	conv string
}

// startFirstCallServe starts serve and dials it as soon as it prints its
// address.
func startFirstCallServe(b *testing.B, s *sandbox, cfg string) *firstCallServe {
	b.Helper()
	cmd := exec.Command(buddyBin, "serve", "--listen", "127.0.0.1:0", "--config", cfg)
	cmd.Env = s.env()
	cmd.Dir = s.work
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sv := &firstCallServe{cmd: cmd}
	b.Cleanup(func() { sv.stop(b) })
	var addr, token string
	sc := bufio.NewScanner(out)
	for token == "" && sc.Scan() {
		line := sc.Text()
		if a, ok := strings.CutPrefix(line, "buddy is serving on http://"); ok {
			addr = strings.TrimSuffix(a, "/")
		}
		if _, frag, ok := strings.Cut(line, "/#token="); ok {
			token = frag
		}
	}
	if token == "" {
		b.Fatal("buddy serve printed no token")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	sv.ws, _, err = websocket.DefaultDialer.Dial("ws://"+addr+"/api/ws", map[string][]string{"Authorization": {"Bearer " + token}})
	if err != nil {
		b.Fatal(err)
	}
	return sv
}

// invoke calls skill and returns how long the result took.
func (sv *firstCallServe) invoke(b *testing.B, skill string, args any) time.Duration {
	b.Helper()
	f := map[string]any{"type": "invoke", "skill": skill, "arguments": args}
	if sv.conv != "" {
		f["conversation_id"] = sv.conv
	}
	t0 := time.Now()
	if err := sv.ws.WriteJSON(f); err != nil {
		b.Fatal(err)
	}
	for {
		var got map[string]any
		if err := sv.ws.ReadJSON(&got); err != nil {
			b.Fatal(err)
		}
		switch got["type"] {
		case "conversation":
			sv.conv, _ = got["conversation_id"].(string)
		case "error":
			b.Fatalf("error frame %v", got)
		case "tool_result":
			took := time.Since(t0)
			if got["ok"] != true {
				s, _ := json.Marshal(got)
				b.Fatalf("tool_result %s", s)
			}
			return took
		}
	}
}

// stop ends the server (SIGINT, then SIGKILL after 10 s).
func (sv *firstCallServe) stop(b *testing.B) {
	if sv.cmd.ProcessState != nil || sv.cmd.Process == nil {
		return
	}
	if sv.ws != nil {
		sv.ws.Close()
	}
	_ = sv.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = sv.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = sv.cmd.Process.Kill()
		<-done
	}
}
