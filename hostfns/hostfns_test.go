package hostfns_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

// harness runs runtime/testdata/hostcall.wasm, which forwards its input to one
// host function and outputs the raw result block.
type harness struct {
	t    *testing.T
	mod  *runtime.Module
	dir  string // the granted read/write directory
	logs *logSink
}

type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) add(skill string, level runtime.Level, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%s %s", level, msg))
}

func newHarness(t *testing.T, g hostfns.Grants, d hostfns.Deps) *harness {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join("..", "runtime", "testdata", "hostcall.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &logSink{}
	rt, err := runtime.New(t.Context(), runtime.Options{Log: logs.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	set, err := hostfns.Link(g, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close(context.Background()) })
	m := runtime.DefaultManifest("hostcall")
	m.Permission = runtime.Network
	m.Entrypoint = "log"
	mod, err := rt.Load(t.Context(), wasm, runtime.Spec{Manifest: m, Host: set})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, mod: mod, logs: logs}
}

// call runs fn and splits the result block.
func (h *harness) call(fn string, args ...string) (errs.Status, []byte) {
	h.t.Helper()
	res, err := h.mod.CallExport(h.t.Context(), fn, []byte(strings.Join(args, "\x00")))
	if err != nil {
		h.t.Fatalf("%s(%q): %v", fn, args, err)
	}
	if len(res.Output) == 0 {
		h.t.Fatalf("%s(%q): empty result block", fn, args)
	}
	return errs.Status(res.Output[0]), res.Output[1:]
}

// allGrants grants every host function: a directory, a loopback server, an
// environment variable and a memory namespace in a real store.
func allGrants(t *testing.T, domains ...string) (hostfns.Grants, hostfns.Deps, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "buddy.db"), store.Options{MaxValueBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	env := map[string]string{"BUDDY_TEST_VAR": "hello"}
	g := hostfns.Grants{
		Read: []string{dir}, Write: []string{dir}, Domains: allow.Intersect([]string{"*"}, domains),
		Env: []string{"BUDDY_TEST_VAR", "BUDDY_UNSET"}, Namespace: "skill:test",
		MaxReadBytes: 1 << 20,
	}
	d := hostfns.Deps{KV: st, Memories: st, Getenv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}}
	return g, d, dir
}

func TestFiles(t *testing.T) {
	g, d, dir := allGrants(t, "127.0.0.1")
	h := newHarness(t, g, d)
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), bytes.Repeat([]byte{1}, 1<<20+1), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		fn      string
		args    []string
		status  errs.Status
		payload string // exact on success, a substring of the message otherwise
	}{
		{"fs_read", []string{"a.txt"}, errs.StatusOK, "content"},
		{"fs_read", []string{filepath.Join(dir, "a.txt")}, errs.StatusOK, "content"},
		{"fs_read", []string{"../a.txt"}, errs.StatusForbidden, `"../a.txt"`},
		{"fs_read", []string{"/etc/passwd"}, errs.StatusForbidden, "/etc/passwd"},
		{"fs_read", []string{"missing.txt"}, errs.StatusNotFound, "missing.txt"},
		{"fs_read", []string{"big.bin"}, errs.StatusTooLarge, "big.bin"},
		{"fs_read", []string{""}, errs.StatusInvalidInput, ""},
		{"fs_write", []string{"sub/new.txt", "fresh"}, errs.StatusOK, string(binary.LittleEndian.AppendUint64(nil, 5))},
		{"fs_write", []string{"../escape.txt", "x"}, errs.StatusForbidden, "escape.txt"},
	}
	for _, c := range cases {
		t.Run(c.fn+"/"+strings.Join(c.args, ","), func(t *testing.T) {
			h.t = t
			st, payload := h.call(c.fn, c.args...)
			if st != c.status {
				t.Fatalf("status %d (%s), want %d", st, payload, c.status)
			}
			if c.status == errs.StatusOK && string(payload) != c.payload {
				t.Errorf("payload %q, want %q", payload, c.payload)
			}
			if c.status != errs.StatusOK && !strings.Contains(string(payload), c.payload) {
				t.Errorf("message %q does not name %q", payload, c.payload)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sub", "new.txt")); string(b) != "fresh" {
		t.Errorf("written file holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape.txt")); err == nil {
		t.Error("a refused write created a file outside the directory")
	}
}

func TestHTTPGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Set-Cookie", "secret=1")
		w.WriteHeader(203)
		io.WriteString(w, "hello from "+r.URL.Path)
	}))
	defer srv.Close()
	g, d, _ := allGrants(t, "127.0.0.1")
	h := newHarness(t, g, d)

	st, payload := h.call("http_get", srv.URL+"/x")
	if st != errs.StatusOK {
		t.Fatalf("status %d: %s", st, payload)
	}
	status := binary.LittleEndian.Uint16(payload)
	n := binary.LittleEndian.Uint32(payload[2:])
	var hdr map[string]string
	if err := json.Unmarshal(payload[6:6+n], &hdr); err != nil {
		t.Fatal(err)
	}
	body := string(payload[6+n:])
	if status != 203 || body != "hello from /x" || hdr["Content-Type"] != "text/plain" {
		t.Errorf("status %d, headers %v, body %q", status, hdr, body)
	}
	if _, ok := hdr["Set-Cookie"]; ok {
		t.Error("Set-Cookie reached the guest")
	}
	if st, msg := h.call("http_get", "https://example.com/"); st != errs.StatusForbidden || !strings.Contains(string(msg), "example.com") {
		t.Errorf("non-allowlisted: status %d %q", st, msg)
	}
	if st, _ := h.call("http_get", "http://127.0.0.1:1/"); st != errs.StatusUnavailable {
		t.Errorf("closed port: status %d, want unavailable", st)
	}
}

func TestEnvGet(t *testing.T) {
	g, d, _ := allGrants(t, "127.0.0.1")
	h := newHarness(t, g, d)
	if st, v := h.call("env_get", "BUDDY_TEST_VAR"); st != errs.StatusOK || string(v) != "hello" {
		t.Errorf("granted: %d %q", st, v)
	}
	if st, msg := h.call("env_get", "BUDDY_UNSET"); st != errs.StatusNotFound || !strings.Contains(string(msg), "BUDDY_UNSET") {
		t.Errorf("granted but unset: %d %q", st, msg)
	}
	if st, msg := h.call("env_get", "HOME"); st != errs.StatusForbidden || !strings.Contains(string(msg), "HOME") {
		t.Errorf("not granted: %d %q", st, msg)
	}
}

func TestKVAndMemories(t *testing.T) {
	g, d, _ := allGrants(t, "127.0.0.1")
	h := newHarness(t, g, d)
	if st, msg := h.call("kv_get", "k"); st != errs.StatusNotFound {
		t.Errorf("missing key: %d %q", st, msg)
	}
	if st, msg := h.call("kv_set", "k", "v1"); st != errs.StatusOK || len(msg) != 0 {
		t.Errorf("set: %d %q", st, msg)
	}
	if st, v := h.call("kv_get", "k"); st != errs.StatusOK || string(v) != "v1" {
		t.Errorf("get: %d %q", st, v)
	}
	if st, msg := h.call("kv_set", "k", strings.Repeat("x", 200)); st != errs.StatusTooLarge {
		t.Errorf("over the value quota: %d %q", st, msg)
	}
	if st, v := h.call("kv_get", "k"); string(v) != "v1" {
		t.Errorf("a refused set changed the value: %d %q", st, v)
	}
	if st, _ := h.call("kv_delete", "k"); st != errs.StatusOK {
		t.Errorf("delete: %d", st)
	}
	if st, _ := h.call("kv_get", "k"); st != errs.StatusNotFound {
		t.Errorf("after delete: %d", st)
	}
	st, out := h.call("memory_remember", `{"text":"the dentist is on tuesday","tags":["health"]}`)
	var id struct{ ID int64 }
	if st != errs.StatusOK || json.Unmarshal(out, &id) != nil || id.ID == 0 {
		t.Fatalf("remember: %d %q", st, out)
	}
	st, out = h.call("memory_recall", `{"query":"dentist","limit":5}`)
	var got struct{ Memories []hostfns.Memory }
	if st != errs.StatusOK || json.Unmarshal(out, &got) != nil || len(got.Memories) != 1 || got.Memories[0].ID != id.ID {
		t.Fatalf("recall: %d %q", st, out)
	}
	if st, _ := h.call("memory_remember", `not json`); st != errs.StatusInvalidInput {
		t.Errorf("bad request: %d", st)
	}
	if st, _ := h.call("memory_recall", `{"limit":1000}`); st != errs.StatusInvalidInput {
		t.Errorf("limit over 100: %d", st)
	}
}

func TestLog(t *testing.T) {
	g, d, _ := allGrants(t, "127.0.0.1")
	h := newHarness(t, g, d)
	if _, err := h.mod.CallExport(t.Context(), "log", []byte("\x03watch out")); err != nil {
		t.Fatal(err)
	}
	h.logs.mu.Lock()
	defer h.logs.mu.Unlock()
	if len(h.logs.lines) != 1 || h.logs.lines[0] != "warn watch out" {
		t.Errorf("log lines %q", h.logs.lines)
	}
}

// Host work is charged to the call's fuel: reading a big file costs more than
// a small one, by about one unit per 64 bytes.
func TestHostWorkIsMetered(t *testing.T) {
	g, d, dir := allGrants(t, "127.0.0.1")
	h := newHarness(t, g, d)
	os.WriteFile(filepath.Join(dir, "small"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "large"), bytes.Repeat([]byte("x"), 640_000), 0o644)
	fuel := func(name string) uint64 {
		res, err := h.mod.CallExport(t.Context(), "fs_read", []byte(name))
		if err != nil {
			t.Fatal(err)
		}
		return res.Fuel
	}
	small, large := fuel("small"), fuel("large")
	if large-small < 640_000/64 {
		t.Errorf("fuel small %d, large %d: host work is not charged by size", small, large)
	}
}

// Only granted functions are linked.
func TestLinkOnlyWhatIsGranted(t *testing.T) {
	set, err := hostfns.Link(hostfns.Grants{}, hostfns.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close(context.Background())
	if _, _, ok := set.Provides(hostfns.Namespace, hostfns.FnLog); !ok {
		t.Error("log is not linked")
	}
	for _, fn := range []string{hostfns.FnFSRead, hostfns.FnFSWrite, hostfns.FnHTTPGet, hostfns.FnEnvGet, hostfns.FnKVGet, hostfns.FnMemRecall} {
		if _, _, ok := set.Provides(hostfns.Namespace, fn); ok {
			t.Errorf("%s linked without a grant", fn)
		}
	}
	read, err := hostfns.Link(hostfns.Grants{Read: []string{t.TempDir()}}, hostfns.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer read.Close(context.Background())
	if _, _, ok := read.Provides(hostfns.Namespace, hostfns.FnFSRead); !ok {
		t.Error("fs_read not linked with a read grant")
	}
	if _, _, ok := read.Provides(hostfns.Namespace, hostfns.FnFSWrite); ok {
		t.Error("fs_write linked with a read grant")
	}
}

func TestLinkRefusesBadGrants(t *testing.T) {
	cases := []struct {
		name string
		g    hostfns.Grants
		d    hostfns.Deps
	}{
		{"missing directory", hostfns.Grants{Read: []string{"/nonexistent/buddy/dir"}}, hostfns.Deps{}},
		{"relative directory", hostfns.Grants{Write: []string{"relative"}}, hostfns.Deps{}},
		{"unparsed domain entry", hostfns.Grants{Domains: []allow.Entry{{}}}, hostfns.Deps{}},
		{"memory without a store", hostfns.Grants{Namespace: "skill:x"}, hostfns.Deps{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := hostfns.Link(c.g, c.d)
			if !errors.Is(err, errs.ErrConfig) {
				t.Fatalf("err = %v, want a config error", err)
			}
		})
	}
}

// A module importing a host function its grant lacks does not load.
func TestUngrantedImportDoesNotLoad(t *testing.T) {
	wasm, err := os.ReadFile(filepath.Join("..", "runtime", "testdata", "hostcall.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(t.Context(), runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	set, _ := hostfns.Link(hostfns.Grants{Read: []string{t.TempDir()}}, hostfns.Deps{})
	defer set.Close(context.Background())
	m := runtime.DefaultManifest("hostcall")
	m.Permission = runtime.Network
	m.Entrypoint = "log"
	_, err = rt.Load(t.Context(), wasm, runtime.Spec{Manifest: m, Host: set})
	if !errors.Is(err, errs.ErrForbidden) || !strings.Contains(err.Error(), "imports buddy:host/v1.fs_write, not granted") {
		t.Fatalf("err = %v", err)
	}
}
