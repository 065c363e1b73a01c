package llmtest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/llm"
	"github.com/buddy-run/buddy/internal/store"
)

// Chat is one conversation of a real agent loop over a provider, stored in
// a real store, with no skills: what a provider's answers do to a
// conversation across turns.
//
//	c := llmtest.NewChat(t, provider)
//	out, deltas := c.Turn("hello")
//	rows := c.Messages()
type Chat struct {
	t     *testing.T
	agent *agent.Agent
	st    *store.Store
	id    string
}

// NewChat opens a store in a temporary directory and starts a conversation.
func NewChat(t *testing.T, p agent.Provider) *Chat {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "buddy.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	now := time.Now().UTC()
	c := &Chat{t: t, st: st, id: "c_chat"}
	if err := st.CreateConversation(t.Context(), store.Conversation{ID: c.id, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	c.agent = agent.New(agent.Options{Provider: p, Skills: noSkills{}, History: st})
	return c
}

// Turn runs one user message and returns how it ended and the deltas
// streamed, joined.
func (c *Chat) Turn(text string) (agent.Outcome, string) {
	var s sink
	out := c.agent.Turn(c.t.Context(), c.id, text, &s)
	return out, s.deltas.String()
}

// Messages are the conversation's stored rows.
func (c *Chat) Messages() []store.Message {
	c.t.Helper()
	ms, err := c.st.Messages(c.t.Context(), c.id)
	if err != nil {
		c.t.Fatal(err)
	}
	return ms
}

// sink keeps the deltas.
type sink struct {
	mu     sync.Mutex
	deltas strings.Builder
}

func (s *sink) Delta(text string) {
	s.mu.Lock()
	s.deltas.WriteString(text)
	s.mu.Unlock()
}
func (*sink) Message(string, string)                                         {}
func (*sink) ToolCall(catalog.Call)                                          {}
func (*sink) ToolResult(catalog.Call, *catalog.Result, error, time.Duration) {}

// noSkills is a catalog without skills: a call the model makes fails as
// not_found.
type noSkills struct{}

func (noSkills) List(context.Context) ([]catalog.Info, error) { return nil, nil }
func (noSkills) Lookup(_ context.Context, name string) (catalog.Info, error) {
	return catalog.Info{}, errs.New(errs.ErrNotFound, "no skill "+name)
}
func (n noSkills) Check(ctx context.Context, c catalog.Call) (catalog.Info, error) {
	return n.Lookup(ctx, c.Skill)
}
func (n noSkills) Invoke(ctx context.Context, c catalog.Call) (*catalog.Result, error) {
	_, err := n.Lookup(ctx, c.Skill)
	return nil, err
}

// CheckCapped fails unless out ended with the cap what (none: a final
// answer) and says each of says.
func CheckCapped(t *testing.T, out agent.Outcome, what string, says []string) {
	t.Helper()
	if what == "" {
		if out.Reason != agent.ReasonFinal {
			t.Fatalf("outcome %+v, want final", out)
		}
		return
	}
	var tl *llm.TooLargeError
	if out.Reason != agent.ReasonError || errs.KindOf(out.Err) != errs.KindTooLarge || !errors.As(out.Err, &tl) || tl.What != what {
		t.Fatalf("outcome %+v (kind %s), want too_large: %s", out, errs.KindOf(out.Err), what)
	}
	for _, s := range says {
		if !strings.Contains(out.Err.Error(), s) {
			t.Errorf("error %q does not say %q", out.Err, s)
		}
	}
}

// CheckRows fails unless a conversation of two turns ("first", then
// "second" answered "Fine.") holds the two user messages, the text the
// client was shown of the first answer (marked as cut when the cap what
// ended it) and the second answer, and nothing else.
func CheckRows(t *testing.T, rows []store.Message, what, shown string) {
	t.Helper()
	type row struct{ role, text, kind string }
	want := []row{{"user", "first", ""}}
	if shown != "" {
		kind := ""
		if what != "" {
			kind = string(errs.KindTooLarge)
		}
		want = append(want, row{"assistant", shown, kind})
	}
	want = append(want, row{"user", "second", ""}, row{"assistant", "Fine.", ""})
	var got []row
	for _, m := range rows {
		got = append(got, row{m.Role, m.Text, m.ErrorKind})
		if len(m.ToolCalls) > 0 {
			t.Errorf("stored tool calls %s", m.ToolCalls)
		}
	}
	if fmt.Sprintf("%.200q", got) != fmt.Sprintf("%.200q", want) {
		t.Errorf("stored %.300q\nwant %.300q", got, want)
	}
}
