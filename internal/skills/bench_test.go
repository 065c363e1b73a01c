package skills_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/hostfns/allow"
	buddyhttp "github.com/buddy-run/buddy/hostfns/http"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

// benchRegistry registers the skills of a buddy.toml text on a fresh runtime.
func benchRegistry(b *testing.B, text string, st *store.Store) *skills.Registry {
	b.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Options{CacheDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close(ctx) })
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		b.Fatal(err)
	}
	opts := skills.Options{Runtime: rt, Config: cfg}
	if st != nil {
		opts.Store = st
		opts.Deps = hostfns.Deps{KV: st, Memories: st}
	}
	reg, err := skills.New(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { reg.Close(ctx) })
	return reg
}

// pluginCalls runs the plugin sub-benchmarks of a skill: "idle" is the
// latency of one call when the runtime has its fresh instances ready (the
// agent loop's case: calls are spaced by LLM turns), "serial" back-to-back
// calls, each still in a fresh instance.
func pluginCalls(b *testing.B, reg *skills.Registry, skill string, input []byte, check func([]byte)) {
	ctx := context.Background()
	if _, err := reg.Call(ctx, skill, input); err != nil { // compile and start preparing
		b.Fatal(err)
	}
	b.Run("plugin/idle", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			time.Sleep(5 * time.Millisecond) // instances prepared ahead
			b.StartTimer()
			res, err := reg.Call(ctx, skill, input)
			if err != nil {
				b.Fatal(err)
			}
			check(res.Output)
		}
	})
	b.Run("plugin/serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			res, err := reg.Call(ctx, skill, input)
			if err != nil {
				b.Fatal(err)
			}
			check(res.Output)
		}
	})
}

// BenchmarkReadFile4KiB: the read_file built-in (TinyGo plugin, fs_read_json
// host function, JSON in and out) vs a native os.Root read of the same file.
func BenchmarkReadFile4KiB(b *testing.B) {
	dir := b.TempDir()
	content := bytes.Repeat([]byte("0123456789abcdef"), 256) // 4 KiB
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), content, 0o644); err != nil {
		b.Fatal(err)
	}
	reg := benchRegistry(b, fmt.Sprintf("[skills.read_file]\nallowed_directories = [%q]\n", dir), nil)
	pluginCalls(b, reg, "read_file", []byte(`{"path":"f.txt"}`), func(out []byte) {
		if len(out) < 4096 {
			b.Fatalf("output %d bytes", len(out))
		}
	})
	b.Run("native", func(b *testing.B) {
		root, err := os.OpenRoot(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer root.Close()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			data, err := root.ReadFile("f.txt")
			if err != nil || len(data) != 4096 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFetchURL4KiB: the fetch_url built-in against a loopback server
// returning 4 KiB vs the same checked fetcher called natively, and vs a plain
// http.Get without any check.
func BenchmarkFetchURL4KiB(b *testing.B) {
	body := strings.Repeat("<p>hello</p>", 4096/12+1)[:4096]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, body)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	reg := benchRegistry(b, fmt.Sprintf("[skills.fetch_url]\nallowed_domains = [%q]\n", host), nil)
	input, _ := json.Marshal(map[string]string{"url": srv.URL + "/page"})
	pluginCalls(b, reg, "fetch_url", input, func(out []byte) {
		if !bytes.Contains(out, []byte(`"status":200`)) {
			b.Fatalf("output %.80s", out)
		}
	})
	b.Run("native-checked", func(b *testing.B) {
		f, err := buddyhttp.New(buddyhttp.Policy{Domains: allow.Intersect([]string{"*"}, []string{host})})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			r, err := f.Get(context.Background(), srv.URL+"/page")
			if err != nil || len(r.Body) != 4096 {
				b.Fatal(err)
			}
		}
	})
	b.Run("native-unchecked", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			r, err := http.Get(srv.URL + "/page")
			if err != nil {
				b.Fatal(err)
			}
			data, err := io.ReadAll(r.Body)
			r.Body.Close()
			if err != nil || len(data) != 4096 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSkillList500: what `buddy skill list` does with 500 installed
// skills: list them from the store and re-verify every module's sha256.
func BenchmarkSkillList500(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "buddy.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close(context.Background())
	wasm, err := os.ReadFile(filepath.Join("..", "..", "runtime", "testdata", "pdkplugin.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 500; i++ {
		name := fmt.Sprintf("skill_%03d", i)
		p := filepath.Join(dir, name+".wasm")
		// A custom section makes every module's bytes (and sha256) distinct.
		mod := append(bytes.Clone(wasm), customSection(fmt.Sprintf("n%d", i))...)
		if err := os.WriteFile(p, mod, 0o600); err != nil {
			b.Fatal(err)
		}
		manifest := fmt.Sprintf("[skill]\nname = %q\nversion = \"1.0.0\"\ndescription = \"bench\"\npermission = \"read_only\"\nentrypoint = \"greet\"\n", name)
		if err := st.InsertSkill(ctx, store.InstalledSkill{Name: name, Version: "1.0.0", Description: "bench",
			WasmPath: p, SHA256: sha(mod), Manifest: manifest, Capabilities: "{}", Status: store.StatusVerified}); err != nil {
			b.Fatal(err)
		}
	}
	rt, err := runtime.New(ctx, runtime.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	cfg := config.Default()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		reg, err := skills.New(ctx, skills.Options{Runtime: rt, Config: cfg, Store: st})
		if err != nil {
			b.Fatal(err)
		}
		if n := len(reg.Skills()); n != 500 {
			b.Fatalf("%d skills", n)
		}
		reg.Close(ctx)
	}
}

// customSection encodes a wasm custom section named name with no payload.
func customSection(name string) []byte {
	payload := append([]byte{byte(len(name))}, name...)
	return append([]byte{0, byte(len(payload))}, payload...)
}
