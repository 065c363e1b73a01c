package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/buddy-run/buddy/internal/catalog"
)

// ProtocolVersion is the version of docs/PROTOCOL.md this server speaks.
const ProtocolVersion = 1

// inFrame is any client → server frame. Fields absent from a frame's type are
// ignored; which are required is checked per type.
type inFrame struct {
	Type           string          `json:"type"`
	ConversationID *string         `json:"conversation_id"`
	Skill          *string         `json:"skill"`
	Arguments      json.RawMessage `json:"arguments"`
	ApprovalID     *string         `json:"approval_id"`
	Approved       *bool           `json:"approved"`
	// ArgumentsHash, when sent with approve, must be the hash of the
	// arguments the request showed: an answer given for other arguments is
	// refused.
	ArgumentsHash *string `json:"arguments_hash"`
	Text          *string `json:"text"`
}

// frameError is what was wrong with a client frame: an error frame's detail.
type frameError struct{ detail string }

func (e *frameError) Error() string { return e.detail }

func badFrame(format string, args ...any) *frameError {
	return &frameError{fmt.Sprintf(format, args...)}
}

// parseFrame decodes one client message and checks the fields its type
// needs. It never panics, whatever the bytes.
func parseFrame(data []byte) (*inFrame, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, badFrame("a frame must be one JSON object")
	}
	var f inFrame
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&f); err != nil {
		return nil, badFrame("a frame must be one JSON object: %s", jsonProblem(err))
	}
	if dec.More() {
		return nil, badFrame("a frame must be one JSON object: trailing data after it")
	}
	switch f.Type {
	case "":
		return nil, badFrame("frame has no \"type\"")
	case "invoke":
		if f.Skill == nil || *f.Skill == "" {
			return nil, badFrame("invoke: missing field \"skill\"")
		}
		if len(f.Arguments) == 0 || bytes.Equal(f.Arguments, []byte("null")) {
			return nil, badFrame("invoke: missing field \"arguments\"")
		}
		if f.Arguments[0] != '{' {
			return nil, badFrame("invoke: \"arguments\" must be a JSON object, not %s", jsonKind(f.Arguments))
		}
		if f.ConversationID != nil && *f.ConversationID == "" {
			f.ConversationID = nil
		}
	case "approve":
		if f.ApprovalID == nil || *f.ApprovalID == "" {
			return nil, badFrame("approve: missing field \"approval_id\"")
		}
		if f.Approved == nil {
			return nil, badFrame("approve: missing field \"approved\" (true or false)")
		}
	case "cancel", "subscribe":
		if f.ConversationID == nil || *f.ConversationID == "" {
			return nil, badFrame("%s: missing field \"conversation_id\"", f.Type)
		}
	case "send":
		if f.Text == nil || *f.Text == "" {
			return nil, badFrame("send: missing field \"text\"")
		}
		if f.ConversationID != nil && *f.ConversationID == "" {
			f.ConversationID = nil
		}
	default:
		return nil, badFrame("unknown frame type %q (known: invoke, approve, cancel, subscribe, send)", clip(f.Type, 64))
	}
	return &f, nil
}

// jsonProblem says what json reported, without echoing the input at length.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case asErr(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %s", se.Offset, se.Error())
	case asErr(err, &te):
		return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type.String(), te.Value)
	}
	return clip(err.Error(), 200)
}

func jsonKind(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// clip cuts s to n bytes for an error detail; frames are JSON-encoded, so
// control characters are escaped on the wire.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Server → client frames. Every frame is a flat object: "type" plus its
// fields at top level.

type conversationFrame struct {
	Type           string `json:"type"` // "conversation"
	ConversationID string `json:"conversation_id"`
}

type toolCallFrame struct {
	Type           string          `json:"type"` // "tool_call"
	ConversationID string          `json:"conversation_id"`
	CallID         string          `json:"call_id"`
	Skill          string          `json:"skill"`
	Arguments      json.RawMessage `json:"arguments"`
}

type approvalRequestFrame struct {
	Type            string          `json:"type"` // "approval_request"
	ID              string          `json:"id"`
	ConversationID  string          `json:"conversation_id"`
	CallID          string          `json:"call_id,omitempty"`
	SkillName       string          `json:"skill_name"`
	Arguments       json.RawMessage `json:"arguments"`
	PermissionLevel string          `json:"permission_level"`
	ExpiresAt       time.Time       `json:"expires_at"`
	ArgumentsHash   string          `json:"arguments_hash"`
	// Version and ModuleSHA256 name the module that runs if approved.
	Version      string   `json:"version,omitempty"`
	ModuleSHA256 string   `json:"module_sha256"`
	Touches      []string `json:"touches,omitempty"`
	// Targets are what the call would touch, resolved now (always a list).
	Targets []catalog.Target `json:"targets"`
	// Credentials are the secrets buddy sends for the skill, and where
	// (always a list): names only, never values.
	Credentials []catalog.CredentialGrant `json:"credentials"`
	// Reason says why the user is asked beyond the skill's policy, if so.
	Reason string `json:"reason,omitempty"`
}

type approvalResolvedFrame struct {
	Type           string `json:"type"` // "approval_resolved"
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	Approved       bool   `json:"approved"`
	Reason         string `json:"reason"` // user | timeout | policy | canceled
}

type errorBody struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

type toolResultFrame struct {
	Type           string          `json:"type"` // "tool_result"
	ConversationID string          `json:"conversation_id"`
	CallID         string          `json:"call_id"`
	Skill          string          `json:"skill"`
	OK             bool            `json:"ok"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *errorBody      `json:"error,omitempty"`
	Fuel           uint64          `json:"fuel"`
	DurationMS     float64         `json:"duration_ms"`
}

type errorFrame struct {
	Type           string `json:"type"` // "error"
	Kind           string `json:"kind"`
	Detail         string `json:"detail"`
	ConversationID string `json:"conversation_id,omitempty"`
}

// encode marshals a server frame. Frames are built by the server from
// values it owns, so an error is a bug.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(errorFrame{Type: "error", Kind: "internal", Detail: "encoding a frame: " + err.Error()})
	}
	return b
}

// resultJSON is a skill's output as a JSON value: the output itself when it is
// JSON, else a JSON string of it.
func resultJSON(out []byte) json.RawMessage {
	if len(bytes.TrimSpace(out)) > 0 && json.Valid(out) {
		return json.RawMessage(out)
	}
	s, _ := json.Marshal(string(out))
	return s
}
