package server_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/front/server"
)

const serverToken = "ghp_TheServerShowsNoOneThis42"

// TestServerRedacts: a secret in a skill's result is replaced in the frames
// and in the API's answers, whatever reached the store.
func TestServerRedacts(t *testing.T) {
	s := newStack(t, stackOpts{server: func(o *server.Options) {
		o.Redact = func(b []byte) []byte { return bytes.ReplaceAll(b, []byte(serverToken), []byte("[secret:github]")) }
	}})
	if err := os.WriteFile(filepath.Join(s.docs, "token.txt"), []byte("token="+serverToken), 0o644); err != nil {
		t.Fatal(err)
	}
	c := s.dial(t)
	conv, _ := c.invokeNew("read_file", `{"path":"token.txt"}`)
	res := c.expect("tool_result")
	rawb, _ := json.Marshal(res)
	if raw := string(rawb); strings.Contains(raw, serverToken) || !strings.Contains(raw, "[secret:github]") {
		t.Errorf("tool_result frame %s", raw)
	}
	_, body := s.request(t, "GET", "/api/conversations/"+conv, nil, nil)
	if strings.Contains(string(body), serverToken) || !strings.Contains(string(body), "[secret:github]") {
		t.Errorf("GET /api/conversations/%s: %s", conv, body)
	}
}
