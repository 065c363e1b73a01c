package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/skills/skillmd"
	"github.com/buddy-run/buddy/internal/store"
)

// memHistory is an in-memory History.
type memHistory struct {
	mu   sync.Mutex
	rows []store.Message
}

func (h *memHistory) AppendMessage(_ context.Context, m store.Message) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rows = append(h.rows, m)
	return int64(len(h.rows)), nil
}

func (h *memHistory) Messages(_ context.Context, conv string) ([]store.Message, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []store.Message
	for _, m := range h.rows {
		if m.Conversation == conv {
			out = append(out, m)
		}
	}
	return out, nil
}

// readCatalog is a one-skill WebAssembly-like catalog: read_file.
type readCatalog struct{ runs int }

func (c *readCatalog) info() catalog.Info {
	return catalog.Info{Name: "read_file", Description: "Read a file.", Permission: catalog.ReadOnly, Policy: catalog.Trust, Status: "ready",
		InputSchema: map[string]any{"type": "object"}}
}
func (c *readCatalog) List(context.Context) ([]catalog.Info, error) {
	return []catalog.Info{c.info()}, nil
}
func (c *readCatalog) Lookup(_ context.Context, n string) (catalog.Info, error) {
	if n != "read_file" {
		return catalog.Info{}, errs.New(errs.ErrNotFound, n)
	}
	return c.info(), nil
}
func (c *readCatalog) Check(ctx context.Context, call catalog.Call) (catalog.Info, error) {
	return c.Lookup(ctx, call.Skill)
}
func (c *readCatalog) Prepare(ctx context.Context, call catalog.Call) (catalog.Prepared, error) {
	return catalog.PrepareChecked(ctx, c, call)
}
func (c *readCatalog) Invoke(context.Context, catalog.Call) (*catalog.Result, error) {
	c.runs++
	return &catalog.Result{Skill: "read_file", Output: []byte(`{"content":"x"}`)}, nil
}

// TestInstructionSkills: the system prompt lists instruction skills by name
// and description only; skill_NAME loads one through the gate; once loaded,
// its declared permissions refuse a read outside **/*.md in that
// conversation, while another conversation is unrestricted.
func TestInstructionSkills(t *testing.T) {
	work := t.TempDir()
	md, err := skillmd.Parse(filepath.Join(t.TempDir(), "md-only", "SKILL.md"), []byte(
		"---\nname: md-only\ndescription: Works on Markdown notes.\npermissions:\n  fs:\n    read: [\"**/*.md\"]\n---\nRead only .md files.\n"))
	if err != nil {
		t.Fatal(err)
	}
	plain := skillmd.BuildInstructionSkill("plain-guide", "", "Be brief.", "")
	sess := skillmd.NewSessions(skillmd.Dirs{Work: work}, nil)
	wasm := &readCatalog{}
	all := catalog.NewUnion(wasm, skillmd.NewCatalog([]*skillmd.Skill{md, plain}, skillmd.CatalogOptions{Sessions: sess}))
	gate := approval.New(all, approval.Options{Guard: func(ctx context.Context, req approval.Request) error {
		var a struct{ Path string }
		if req.Skill != "read_file" || json.Unmarshal(req.Arguments, &a) != nil {
			return nil
		}
		return sess.Check(ctx, req.Conversation, req.Skill, []skillmd.Access{{Kind: skillmd.Read, Target: filepath.Join(work, a.Path)}})
	}})

	var mu sync.Mutex
	var seen []agent.Request
	script := map[string][]agent.ToolCall{
		"c1": {{Name: "skill_md-only", Arguments: "{}"}, {Name: "read_file", Arguments: `{"path":"secret.txt"}`}, {Name: "read_file", Arguments: `{"path":"notes/a.md"}`}},
		"c2": {{Name: "read_file", Arguments: `{"path":"secret.txt"}`}},
	}
	step := map[string]int{}
	p := agent.ProviderFunc(func(ctx context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, req)
		conv := "c2"
		if strings.Contains(req.Messages[0].Text, "one") {
			conv = "c1"
		}
		if step[conv] < len(script[conv]) {
			tc := script[conv][step[conv]]
			step[conv]++
			return &agent.Response{ToolCalls: []agent.ToolCall{tc}}, nil
		}
		return &agent.Response{Text: "done"}, nil
	})
	a := agent.New(agent.Options{Provider: p, Skills: gate, History: &memHistory{}})
	out := a.Turn(t.Context(), "c1", "conversation one", instrSink{})
	if out.Reason != agent.ReasonFinal || len(out.ToolCalls) != 3 {
		t.Fatalf("outcome = %+v", out)
	}
	sys := seen[0].System
	if !strings.Contains(sys, "- md-only: Works on Markdown notes.") || !strings.Contains(sys, "- plain-guide: Reference guide for plain-guide") || strings.Contains(sys, "Read only .md files.") {
		t.Errorf("system prompt:\n%s", sys)
	}
	names := map[string]bool{}
	for _, tl := range seen[0].Tools {
		names[tl.Name] = true
	}
	if !names["skill_md-only"] || !names["skill_plain-guide"] || names["md-only"] || !names["read_file"] {
		t.Errorf("tools = %v", names)
	}
	if !out.ToolCalls[0].OK {
		t.Errorf("loading the skill failed: %+v", out.ToolCalls[0])
	}
	loaded := seen[1].Messages[len(seen[1].Messages)-1]
	if !strings.Contains(loaded.Content, `"content":"Read only .md files.\n"`) || !strings.Contains(loaded.Content, `"type":"instruction"`) {
		t.Errorf("loaded = %q", loaded.Content)
	}
	if tc := out.ToolCalls[1]; tc.OK || tc.ErrorKind != string(errs.KindForbidden) {
		t.Errorf("read of secret.txt = %+v, want forbidden", tc)
	}
	if refusal := seen[2].Messages[len(seen[2].Messages)-1].Content; !strings.Contains(refusal, "md-only") {
		t.Errorf("refusal does not name the skill: %q", refusal)
	}
	if !out.ToolCalls[2].OK || wasm.runs != 1 {
		t.Errorf("read of notes/a.md = %+v (runs %d)", out.ToolCalls[2], wasm.runs)
	}
	// Another conversation never loaded it: unrestricted.
	out = a.Turn(t.Context(), "c2", "conversation two", instrSink{})
	if !out.ToolCalls[0].OK || wasm.runs != 2 {
		t.Errorf("other conversation = %+v", out)
	}
	if !errors.Is(sess.Check(t.Context(), "c1", "read_file", []skillmd.Access{{Kind: skillmd.Read, Target: filepath.Join(work, "x.txt")}}), errs.ErrForbidden) {
		t.Error("c1 is no longer bound")
	}
}

// TestSkillListBudget: the token budget caps the list, saying how many
// were left out.
func TestSkillListBudget(t *testing.T) {
	var skills []*skillmd.Skill
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		skills = append(skills, skillmd.BuildInstructionSkill("skill-"+n, strings.Repeat(n, 200), "x", ""))
	}
	gate := approval.New(catalog.NewUnion(&readCatalog{}, skillmd.NewCatalog(skills, skillmd.CatalogOptions{})), approval.Options{})
	var sys string
	p := agent.ProviderFunc(func(_ context.Context, req agent.Request, _ func(string)) (*agent.Response, error) {
		sys = req.System
		return &agent.Response{Text: "ok"}, nil
	})
	agent.New(agent.Options{Provider: p, Skills: gate, History: &memHistory{}, InstructionTokens: 150, SystemPrompt: "S."}).Turn(t.Context(), "c", "hi", instrSink{})
	if !strings.Contains(sys, "- skill-a: ") || !strings.Contains(sys, "- skill-b: ") || strings.Contains(sys, "- skill-c: ") || !strings.Contains(sys, "6 more skills are not listed") {
		t.Errorf("system prompt:\n%s", sys)
	}
	if len(sys) > 150*4+400 {
		t.Errorf("system prompt is %d bytes, over the budget", len(sys))
	}
}

type instrSink struct{}

func (instrSink) Delta(string)                                                   {}
func (instrSink) Message(string, string)                                         {}
func (instrSink) ToolCall(catalog.Call)                                          {}
func (instrSink) ToolResult(catalog.Call, *catalog.Result, error, time.Duration) {}
