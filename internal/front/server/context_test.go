package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/front/server"
)

// TestConversationCompactedOverTheWire: a conversation that outgrows a
// 2,048-token window over the WebSocket: a compaction frame says so in plain
// words, every done carries the turn's usage and the window, and GET
// /api/conversations/{id} keeps every message, the summary (with what it
// covers) and the conversation's usage.
func TestConversationCompactedOverTheWire(t *testing.T) {
	model := agent.ProviderFunc(func(_ context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
		n := len(req.System)
		for _, m := range req.Messages {
			n += len(m.Text) + len(m.Content)
		}
		u := agent.Usage{PromptTokens: int64(n), CompletionTokens: 1, Reported: true}
		if req.Tools == nil {
			return &agent.Response{Text: "the user sent long messages", StopReason: "stop", Usage: u}, nil
		}
		onText("OK")
		return &agent.Response{Text: "OK", StopReason: "stop", Usage: u}, nil
	})
	s := newStack(t, stackOpts{server: func(o *server.Options) {
		o.NewAgent = func(gate server.Gate) server.Agent {
			return agent.New(agent.Options{Provider: model, Skills: gate, History: o.Store, NewCallID: server.NewCallID,
				Window: 4096, Reserve: 256, Usage: o.Store.(agent.UsageRecorder)})
		}
	}})
	c := s.dial(t)
	conv := ""
	var compactions []frame
	for i := range 8 {
		conv = c.sendText(conv, strings.Repeat(fmt.Sprintf("turn %d ", i), 200))
		frames, done := c.turn(conv, nil)
		compactions = append(compactions, ofType(frames, "compaction")...)
		u, _ := done["usage"].(map[string]any)
		if done.str("reason") != "final" || u["window_tokens"] != float64(4096) || u["context_tokens"].(float64) <= 0 || u["requests"].(float64) < 1 {
			t.Fatalf("turn %d: done = %v", i, done)
		}
	}
	if len(compactions) == 0 {
		t.Fatal("eight turns of 1.4 KB in a 4,096-token window: no compaction frame")
	}
	cf := compactions[0]
	if cf.str("method") != "summary" || !strings.Contains(cf.str("text"), "summarised to fit the model's context window") ||
		cf["covers_from"].(float64) <= 0 || cf["covers_to"].(float64) < cf["covers_from"].(float64) {
		t.Fatalf("compaction frame %v", cf)
	}
	var got struct {
		Messages []struct {
			ID         int64          `json:"id"`
			Role       string         `json:"role"`
			Text       string         `json:"text"`
			CoversFrom int64          `json:"covers_from"`
			CoversTo   int64          `json:"covers_to"`
			Compaction map[string]any `json:"compaction"`
		} `json:"messages"`
		Usage struct {
			Requests      int64 `json:"requests"`
			PromptTokens  int64 `json:"prompt_tokens"`
			ContextTokens int64 `json:"context_tokens"`
			WindowTokens  int64 `json:"window_tokens"`
		} `json:"usage"`
	}
	s.getJSON(t, "/api/conversations/"+conv, &got)
	users, summaries := 0, 0
	for _, m := range got.Messages {
		switch m.Role {
		case "user":
			users++
		case "summary":
			summaries++
			if m.Text == "" || m.CoversFrom <= 0 || m.CoversTo < m.CoversFrom || m.Compaction["method"] != "summary" {
				t.Errorf("summary %+v", m)
			}
		}
	}
	if users != 8 || summaries != len(compactions) {
		t.Fatalf("%d user messages (want 8), %d summaries (want %d)", users, summaries, len(compactions))
	}
	if got.Usage.Requests < 8 || got.Usage.PromptTokens <= 0 || got.Usage.WindowTokens != 4096 || got.Usage.ContextTokens <= 0 {
		t.Fatalf("usage %+v", got.Usage)
	}
}
