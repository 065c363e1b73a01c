// Package catalog is the vocabulary of the one call path every front end
// uses: a Call names a skill and its arguments, an Invoker runs it, a Catalog
// knows which skills exist and prepares calls. It imports nothing of buddy's
// but the error kinds, so a front end (the WebSocket server, MCP, the CLI) can
// hold an Invoker without being able to reach the runtime, the host functions
// or the registry behind it.
//
//	var inv catalog.Invoker = gate // an *approval.Gate wrapping the registry
//	res, err := inv.Invoke(ctx, catalog.Call{
//		Conversation: "c_1", Skill: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`),
//	})
//
// The call path (docs/RATIONALE.md, "Project structure and call path"):
//
//	front/server (and its agent) | front/mcpserver | cmd skill run
//	  → approval.Gate → skills.Registry (a Catalog) → runtime → hostfns → OS
package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Permission is a skill's permission level (skill.toml's permission).
type Permission string

// The permission levels.
const (
	ReadOnly Permission = "read_only"
	Mutating Permission = "mutating"
	Network  Permission = "network"
)

// Policy is a skill's approval policy (buddy.toml's approval; docs/CONFIG.md,
// "Approval").
type Policy string

// The approval policies.
const (
	Always Policy = "always" // ask on every call
	Once   Policy = "once"   // ask on the first call of a skill in a conversation
	Trust  Policy = "trust"  // never ask
)

// ParsePolicy checks a policy written in buddy.toml or sent by a client.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case Always, Once, Trust:
		return p, nil
	}
	return "", fmt.Errorf("approval policy %q must be \"always\", \"once\" or \"trust\"", s)
}

// DefaultPolicy is the policy of a skill whose section sets none: trust for
// read_only skills, always otherwise.
func DefaultPolicy(p Permission) Policy {
	if p == ReadOnly {
		return Trust
	}
	return Always
}

// Call is one request to run a skill.
type Call struct {
	// ID is the front end's id for this call (a tool_call's call_id), carried
	// into the approval request and the audit log; "" when it has none.
	ID string
	// Conversation the call belongs to; "" for a one-shot call (the CLI),
	// which is its own conversation. "once" approvals are kept per
	// conversation.
	Conversation string
	// Scope is what the conversation's memory of private reads (taint) and
	// its SKILL.md bindings are kept under, when that is not Conversation:
	// every MCP session shares the scope "mcp", so that a reconnect does not
	// clear what the client's model has read. "" = Conversation.
	Scope string
	Skill string
	// Arguments are exactly the bytes handed to the skill: a JSON object for
	// skills with an input schema, any bytes for a raw module run.
	Arguments json.RawMessage
	// Raw says Arguments are plain bytes, not a JSON object: allowed only for
	// a skill that declares no input schema (Extism plugins take bytes).
	Raw bool
	// ArgumentsHash is ArgumentsHash(Arguments) when the front end has
	// computed it already (to log it beside the call); "" otherwise, and
	// the approval gate computes it. It is a canonical re-encoding of the
	// arguments, megabytes for a large write: computed once per call.
	ArgumentsHash string
}

// Result is what a call returned.
type Result struct {
	Skill    string
	Version  string
	SHA256   string // of the module that ran
	Output   []byte
	Fuel     uint64
	Duration time.Duration
	// Usage is what the call's host functions touched.
	Usage Usage
}

// Info describes a registered skill for a front end: what the LLM and the user
// see. It is a value: changing it changes nothing in the catalog.
type Info struct {
	Name        string
	Version     string
	Description string
	Author      string
	Builtin     bool
	Permission  Permission
	Policy      Policy
	InputSchema map[string]any
	// Touches says in plain words what the skill may touch ("read files in
	// /home/u/docs", "GET https://example.com").
	Touches []string
	// PrivateData says the skill is granted file reads or memory: a
	// conversation that ran it may hold private data.
	PrivateData bool
	// NetworkAccess says the skill is granted hosts it may fetch from.
	NetworkAccess bool
	// Status is StatusReady, or why the skill cannot run
	// (StatusVerificationFailed, StatusUnavailable), with Problem saying more.
	Status  string
	Problem string
	SHA256  string
	// Type is "" for a WebAssembly skill, or a SKILL.md skill's type
	// ("instruction", "template", "composite", "script"; internal/skills/skillmd).
	Type string
	// Grant is what the skill may touch, structured (Touches says it in
	// words); zero for a skill that touches nothing.
	Grant Grant

	fingerprint string // Fingerprint
}

// Grant is what a skill may touch: its effective grant.
type Grant struct {
	Read  []string    `json:"read,omitempty"`  // directories it may read
	Write []string    `json:"write,omitempty"` // directories it may write
	Hosts []HostGrant `json:"hosts,omitempty"` // hosts it may reach
	Env   []string    `json:"env,omitempty"`   // environment variables it may read
	// Memory is its memory namespace; "" = none.
	Memory string `json:"memory,omitempty"`
	// Credentials are the secrets buddy sends for it, and where.
	Credentials []CredentialGrant `json:"credentials,omitempty"`
}

// CredentialGrant is one credential a skill may use: the name of the secret
// (never its value) and the hosts buddy sends it to.
type CredentialGrant struct {
	Name  string   `json:"name"`
	Hosts []string `json:"hosts"`
}

// HostGrant is one allowlist entry of a grant.
type HostGrant struct {
	Host     string `json:"host"`               // lower case, without "*."
	Wildcard bool   `json:"wildcard,omitempty"` // "*.host": its subdomains
	Any      bool   `json:"any,omitempty"`      // "*": any host
	Port     int    `json:"port,omitempty"`     // 0 = the scheme's
}

// StateScope is the key a call's taint and SKILL.md bindings are kept under.
func (c Call) StateScope() string {
	if c.Scope != "" {
		return c.Scope
	}
	return c.Conversation
}

// TypeInstruction is the Type of an instruction skill: text the model loads
// on demand (the agent offers it as the tool "skill_" + Name).
const TypeInstruction = "instruction"

// Ready reports whether the skill can be called.
func (i Info) Ready() bool { return i.Status == StatusReady }

// Statuses of a skill (Info.Status; the API's and the CLI's "status").
const (
	StatusReady              = "ready"               // it can be called
	StatusVerificationFailed = "verification_failed" // its module on disk is not what was installed
	StatusUnavailable        = "unavailable"         // it cannot run: Info.Problem says why
)

// Invoker runs a skill. The approval gate is the Invoker front ends hold.
type Invoker interface {
	Invoke(ctx context.Context, c Call) (*Result, error)
}

// Lister lists skills for a front end.
type Lister interface {
	// List returns the registered skills, sorted by name.
	List(ctx context.Context) ([]Info, error)
	// Lookup returns one skill (errs.ErrNotFound when there is none).
	Lookup(ctx context.Context, name string) (Info, error)
}

// Skills is what a front end holds: the skills it may show, and the one
// gated way to run them (an *approval.Gate).
type Skills interface {
	Lister
	Invoker
}

// Catalog is the set of skills a gate serves: it lists them and prepares
// calls, which run without asking. Only the gate (and cmd/) holds one.
type Catalog interface {
	Lister
	// Prepare returns c ready to run when it could run now: the skill
	// exists, it is ready, and the arguments fit its input schema
	// (errs.ErrInvalidInput naming what is wrong). Nothing runs; the
	// caller must Run or Release the result.
	Prepare(ctx context.Context, c Call) (Prepared, error)
}

// ArgumentsHash is the hex SHA-256 of the canonical JSON of raw (keys sorted,
// no insignificant space, numbers as written), or of raw itself when it is
// not JSON. An approval is bound to the arguments with this hash.
func ArgumentsHash(raw []byte) string {
	if c, err := Canonical(raw); err == nil {
		raw = c
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// Canonical re-encodes a JSON value with object keys sorted and no
// insignificant space; numbers keep their literal text.
func Canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
