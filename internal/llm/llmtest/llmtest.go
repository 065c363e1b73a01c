// Package llmtest holds what the providers' tests share: a fake endpoint
// that answers each request with the next scripted handler and keeps every
// request, golden files of request bodies, and a conversation of the real
// agent loop and store over a provider (chat.go). Tests only.
//
//	f := llmtest.NewFake(t, "/v1/messages", sse(...), status(429, ...))
//	p := anthropic.New(anthropic.Options{BaseURL: f.URL(), ...})
//	llmtest.Golden(t, "request_full.golden", f.Body(0), *update)
package llmtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
)

// Fake is a provider endpoint: request n is answered by handler n; a request
// beyond the script, or with another method or path, fails the test.
type Fake struct {
	mu       sync.Mutex
	handlers []http.HandlerFunc
	bodies   [][]byte
	headers  []http.Header
	times    []time.Time
	srv      *httptest.Server
}

// NewFake starts a fake endpoint answering POST path, closed when the test ends.
func NewFake(t *testing.T, path string, handlers ...http.HandlerFunc) *Fake {
	f := &Fake{handlers: handlers}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.headers = append(f.headers, r.Header.Clone())
		f.times = append(f.times, time.Now())
		n := len(f.bodies)
		f.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != path {
			t.Errorf("request %s %s, want POST %s", r.Method, r.URL.Path, path)
		}
		if n > len(f.handlers) {
			t.Errorf("request %d was not expected", n)
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		f.handlers[n-1](w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the endpoint's base address.
func (f *Fake) URL() string { return f.srv.URL }

// Requests is how many requests arrived.
func (f *Fake) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

// Body is the body of request i (from 0).
func (f *Fake) Body(i int) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[i]
}

// Header is the header of request i.
func (f *Fake) Header(i int) http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.headers[i]
}

// Time is when request i arrived.
func (f *Fake) Time(i int) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.times[i]
}

// Golden compares the JSON body got, indented, with testdata/name; update
// rewrites the file first.
func Golden(t *testing.T, name string, got []byte, update bool) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, got)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("request body differs from %s (go test -update rewrites it):\n%s", path, buf.Bytes())
	}
}

// CheckMadeIDs fails unless the calls at the indexes made have a
// ProviderID buddy made up (agent.SynthesizeID: nine letters and digits)
// that no other call of the answer has; it then clears them, so that the
// calls can be compared with what a test expects.
func CheckMadeIDs(t *testing.T, calls []agent.ToolCall, made []int) {
	t.Helper()
	seen := map[string]int{}
	for i, c := range calls {
		if j, dup := seen[c.ProviderID]; dup {
			t.Errorf("calls %d and %d have the same ProviderID %q", j, i, c.ProviderID)
		}
		seen[c.ProviderID] = i
		if c.ID != "" {
			t.Errorf("call %d has ID %q: buddy's id is the agent loop's to give", i, c.ID)
		}
	}
	for _, i := range made {
		if i >= len(calls) {
			t.Errorf("no call %d", i)
			continue
		}
		id := calls[i].ProviderID
		if len(id) != 9 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
			t.Errorf("call %d: ProviderID %q is not one buddy made up", i, id)
		}
		calls[i].ProviderID = ""
	}
}
