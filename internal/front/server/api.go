package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/store"
)

// maxBodyBytes caps a request body of the HTTP API.
const maxBodyBytes = 1 << 20

type skillJSON struct {
	Name            string         `json:"name"`
	Version         string         `json:"version"`
	Description     string         `json:"description"`
	Author          string         `json:"author,omitempty"`
	Builtin         bool           `json:"builtin"`
	PermissionLevel string         `json:"permission_level"`
	Approval        string         `json:"approval"`
	Touches         []string       `json:"touches"`
	InputSchema     map[string]any `json:"input_schema"`
	Status          string         `json:"status"`
	Problem         string         `json:"problem,omitempty"`
	// Type is a SKILL.md skill's type ("instruction", "template",
	// "composite", "script"); absent for a WebAssembly skill.
	Type string `json:"type,omitempty"`
	// Credentials are the secrets buddy sends for the skill, and where
	// (always a list; names only).
	Credentials []catalog.CredentialGrant `json:"credentials"`
}

// listSkills is GET /api/skills.
func (s *Server) listSkills(w http.ResponseWriter, r *http.Request) {
	infos, err := s.gate.List(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	out := make([]skillJSON, 0, len(infos))
	for _, i := range infos {
		touches := i.Touches
		if touches == nil {
			touches = []string{}
		}
		out = append(out, skillJSON{
			Name: i.Name, Version: i.Version, Description: i.Description, Author: i.Author, Builtin: i.Builtin,
			PermissionLevel: string(i.Permission), Approval: string(i.Policy), Touches: touches,
			InputSchema: i.InputSchema, Status: i.Status, Problem: i.Problem, Type: i.Type,
			Credentials: credentialsOrEmpty(i.Grant.Credentials),
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"skills": out})
}

type conversationJSON struct {
	ID        string     `json:"id"`
	Title     string     `json:"title"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
}

func toConversationJSON(c store.Conversation) conversationJSON {
	out := conversationJSON{ID: c.ID, Title: c.Title, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
	if !c.EndedAt.IsZero() {
		t := c.EndedAt
		out.EndedAt = &t
	}
	return out
}

// listConversations is GET /api/conversations: open ones, newest first.
func (s *Server) listConversations(w http.ResponseWriter, r *http.Request) {
	list, err := s.opts.Store.ListConversations(r.Context(), r.URL.Query().Get("ended") == "true")
	if err != nil {
		writeErr(w, err)
		return
	}
	out := make([]conversationJSON, 0, len(list))
	for _, c := range list {
		out = append(out, toConversationJSON(c))
	}
	writeJSON(w, http.StatusOK, map[string]any{"conversations": out})
}

type messageJSON struct {
	ID         int64           `json:"id"`
	Role       string          `json:"role"`
	Text       string          `json:"text,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	CallID     string          `json:"call_id,omitempty"`
	Skill      string          `json:"skill,omitempty"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	OK         *bool           `json:"ok,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *errorBody      `json:"error,omitempty"`
	Fuel       uint64          `json:"fuel,omitempty"`
	DurationMS float64         `json:"duration_ms,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	// A summary (role "summary"): the ids of the messages it stands for,
	// which are all still in this list, and the compaction's record.
	CoversFrom int64           `json:"covers_from,omitempty"`
	CoversTo   int64           `json:"covers_to,omitempty"`
	Compaction json.RawMessage `json:"compaction,omitempty"`
}

// usageJSON is what a conversation's model requests cost, and how full the
// model's window was at the last one.
type usageJSON struct {
	Requests         int64   `json:"requests"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CachedTokens     int64   `json:"cached_tokens"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
	// ContextTokens is the last request's prompt, WindowTokens the window
	// it went into ("3.1k / 8k"); Estimated says the provider reported no
	// figures for it and buddy estimated them.
	ContextTokens int64 `json:"context_tokens"`
	WindowTokens  int64 `json:"window_tokens"`
	Estimated     bool  `json:"estimated,omitempty"`
}

type approvalJSON struct {
	ID              string          `json:"id"`
	CallID          string          `json:"call_id,omitempty"`
	SkillName       string          `json:"skill_name"`
	PermissionLevel string          `json:"permission_level"`
	Arguments       json.RawMessage `json:"arguments"`
	ArgumentsHash   string          `json:"arguments_hash"`
	ModuleSHA256    string          `json:"module_sha256,omitempty"`
	Status          string          `json:"status"`
	DecidedBy       string          `json:"decided_by,omitempty"`
	RequestedAt     time.Time       `json:"requested_at"`
	ExpiresAt       time.Time       `json:"expires_at"`
	DecidedAt       *time.Time      `json:"decided_at,omitempty"`
}

// getConversation is GET /api/conversations/{id}: the conversation with its
// messages (tool calls and results) and approvals.
func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, err := s.opts.Store.GetConversation(ctx, r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	msgs, err := s.opts.Store.Messages(ctx, c.ID)
	if err != nil {
		writeErr(w, err)
		return
	}
	aps, err := s.opts.Store.Approvals(ctx, c.ID)
	if err != nil {
		writeErr(w, err)
		return
	}
	mj := make([]messageJSON, 0, len(msgs))
	for _, m := range msgs {
		j := messageJSON{ID: m.ID, Role: m.Role, Text: m.Text, ToolCalls: m.ToolCalls, CallID: m.CallID, Skill: m.Skill,
			Arguments: m.Arguments, Fuel: m.Fuel, DurationMS: float64(m.DurationUS) / 1000, CreatedAt: m.CreatedAt,
			CoversFrom: m.CoversFrom, CoversTo: m.CoversTo, Compaction: m.Meta}
		switch {
		case m.Role == "tool":
			ok := m.OK
			j.OK = &ok
			switch {
			case m.OK && len(m.Result) > 0:
				j.Result = m.Result
			case m.OK:
				j.Result = resultJSON([]byte(m.ResultText))
			default:
				j.Error = &errorBody{Kind: m.ErrorKind, Detail: m.ErrorDetail}
			}
		case m.ErrorKind != "":
			// An answer cut short: what was streamed, and why it stopped.
			j.Error = &errorBody{Kind: m.ErrorKind, Detail: m.ErrorDetail}
		}
		mj = append(mj, j)
	}
	aj := make([]approvalJSON, 0, len(aps))
	for _, a := range aps {
		j := approvalJSON{ID: a.ID, CallID: a.CallID, SkillName: a.Skill, PermissionLevel: a.Permission, Arguments: a.Arguments,
			ArgumentsHash: a.ArgumentsHash, Status: a.Status, DecidedBy: a.DecidedBy, RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt,
			ModuleSHA256: a.ModuleSHA256}
		if !a.DecidedAt.IsZero() {
			t := a.DecidedAt
			j.DecidedAt = &t
		}
		aj = append(aj, j)
	}
	u, err := s.opts.Store.ConversationUsage(ctx, c.ID)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"conversation": toConversationJSON(c), "messages": mj, "approvals": aj,
		"usage": usageJSON{Requests: u.Requests, PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
			CachedTokens: u.CachedTokens, CostUSD: float64(u.CostMicroUSD) / 1e6,
			ContextTokens: u.Last.PromptTokens, WindowTokens: u.Last.WindowTokens, Estimated: u.Requests > 0 && !u.Last.Reported},
	})
}

// deleteConversation is DELETE /api/conversations/{id}: the conversation
// ends (its history stays for the audit log), its calls are canceled and the
// gate forgets its "once" approvals.
func (s *Server) deleteConversation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.opts.Store.GetConversation(r.Context(), id); err != nil {
		writeErr(w, err)
		return
	}
	if err := s.opts.Store.EndConversation(r.Context(), id, time.Now().UTC()); err != nil {
		writeErr(w, err)
		return
	}
	s.cancelConversation(id)
	s.gate.EndConversation(id)
	s.log.Info("conversation ended", "conversation", id)
	w.WriteHeader(http.StatusNoContent)
}

// approveHTTP is POST /api/chat/{conversation_id}/approve with
// {"approval_id": "...", "approved": bool}.
func (s *Server) approveHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ApprovalID    *string `json:"approval_id"`
		Approved      *bool   `json:"approved"`
		ArgumentsHash string  `json:"arguments_hash"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, http.StatusBadRequest, errs.KindInvalidInput, err.Error())
		return
	}
	if body.ApprovalID == nil || *body.ApprovalID == "" || body.Approved == nil {
		writeError(w, http.StatusBadRequest, errs.KindInvalidInput, `body must be {"approval_id": "...", "approved": true|false}`)
		return
	}
	status, err := s.answer(r.Context(), r.PathValue("conversation_id"), *body.ApprovalID, *body.Approved, body.ArgumentsHash)
	if err != nil {
		writeError(w, status, errs.KindOf(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"approval_id": *body.ApprovalID, "approved": *body.Approved})
}

// decodeBody reads one JSON object, capped, with no unknown fields.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errors.New("body over 1 MiB")
		}
		return errors.New("reading the body: " + err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New("body is not the JSON object expected: " + jsonProblem(err))
	}
	if dec.More() {
		return errors.New("body has trailing data after the JSON object")
	}
	return nil
}
