// Package skillkit is the guest SDK for buddy skills written in Go (TinyGo or
// Go's wasip1). It hides the raw pointers of buddy's host ABI
// (docs/HOST_ABI.md) behind plain functions that return errors a skill can
// inspect:
//
//	//go:wasmexport run
//	func run() int32 {
//		return skillkit.Handle(func(in struct{ Path string `json:"path"` }) (any, error) {
//			data, err := skillkit.ReadFile(in.Path)
//			if errors.Is(err, skillkit.ErrNotFound) {
//				return map[string]any{"exists": false}, nil
//			}
//			if err != nil {
//				return nil, err // reported to buddy with its kind: "forbidden: ..."
//			}
//			return map[string]any{"exists": true, "size": len(data)}, nil
//		})
//	}
//
// Every function needs the matching capability in skill.toml and a grant in
// the operator's buddy.toml; without them buddy refuses to load the skill, so
// a call can only fail for the reason it names (a path outside the granted
// directories, a domain not allowed, a file too large...).
//
// skillkit compiles for the host too, so that a skill's logic can be unit
// tested with plain `go test`; there every host call fails with ErrUnavailable
// unless a test installs a fake with SetTestHost.
package skillkit

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Kind names what went wrong, as buddy's host functions report it.
type Kind string

// The kinds a host function can report. They are also the prefixes buddy reads
// from a skill's error message ("forbidden: ..."), so returning one of these
// errors from Handle keeps its kind in buddy's CLI and audit log.
const (
	KindForbidden    Kind = "forbidden"
	KindNotFound     Kind = "not_found"
	KindTooLarge     Kind = "too_large"
	KindInvalidInput Kind = "invalid_input"
	KindUnavailable  Kind = "unavailable"
	KindDenied       Kind = "denied"
	KindTimeout      Kind = "timeout"
	KindInternal     Kind = "internal"
)

// Sentinels for errors.Is.
var (
	ErrForbidden    = &Error{Kind: KindForbidden}
	ErrNotFound     = &Error{Kind: KindNotFound}
	ErrTooLarge     = &Error{Kind: KindTooLarge}
	ErrInvalidInput = &Error{Kind: KindInvalidInput}
	ErrUnavailable  = &Error{Kind: KindUnavailable}
	ErrDenied       = &Error{Kind: KindDenied}
	ErrTimeout      = &Error{Kind: KindTimeout}
	ErrInternal     = &Error{Kind: KindInternal}
)

// Error is an error reported by buddy (or made by a skill with Errorf).
type Error struct {
	Kind    Kind
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Kind)
	}
	return string(e.Kind) + ": " + e.Message
}

// Is matches errors of the same kind: errors.Is(err, skillkit.ErrForbidden).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind
}

// Errorf makes an error of a kind, for a skill's own failures:
// skillkit.Errorf(skillkit.KindInvalidInput, "path is required").
func Errorf(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// status bytes of the host ABI (docs/HOST_ABI.md), never renumbered.
var statusKinds = [...]Kind{1: KindForbidden, 2: KindNotFound, 3: KindTooLarge, 4: KindInvalidInput,
	5: KindUnavailable, 6: KindDenied, 7: KindTimeout, 8: KindInternal}

// decode splits a host function's result block into payload or error.
func decode(fn string, block []byte) ([]byte, error) {
	if len(block) == 0 {
		return nil, &Error{Kind: KindInternal, Message: fn + ": empty result from host"}
	}
	if block[0] == 0 {
		return block[1:], nil
	}
	kind := KindInternal
	if int(block[0]) < len(statusKinds) && statusKinds[block[0]] != "" {
		kind = statusKinds[block[0]]
	}
	return nil, &Error{Kind: kind, Message: string(block[1:])}
}

// Input returns the raw input of the call.
func Input() []byte { return hostInput() }

// InputJSON decodes the input into v; bad JSON is an ErrInvalidInput error.
// An empty input is {}. A v that implements Fielder is decoded without
// reflection when the input is plain enough, with the same result (v must
// then be a non-nil pointer: JSONFields takes its fields' addresses, and a
// field already holding a pointer gets a new one rather than being written
// through).
func InputJSON(v any) error { return decodeInput(hostInput(), v) }

func decodeInput(in []byte, v any) error {
	if len(in) == 0 {
		in = []byte("{}")
	}
	if f, ok := v.(Fielder); ok && decodeFields(in, f.JSONFields()) {
		return nil
	}
	if err := json.Unmarshal(in, v); err != nil {
		return &Error{Kind: KindInvalidInput, Message: "input is not valid JSON: " + err.Error()}
	}
	return nil
}

// Output sets the output of the call.
func Output(b []byte) { hostOutput(b) }

// OutputJSON encodes v as the output of the call.
func OutputJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return &Error{Kind: KindInternal, Message: "encoding output: " + err.Error()}
	}
	hostOutput(b)
	return nil
}

// Fail reports err as the call's error and returns the code to return from the
// export. A *Error keeps its kind ("forbidden: ..."); other errors are plain.
func Fail(err error) int32 {
	hostSetError(err.Error())
	return 1
}

// Run runs fn on the raw input and sets its output or error; return its result
// from the exported function.
func Run(fn func(input []byte) ([]byte, error)) int32 {
	out, err := fn(hostInput())
	if err != nil {
		return Fail(err)
	}
	hostOutput(out)
	return 0
}

// Handle decodes the JSON input into In (as InputJSON does: see Fielder for
// decoding without reflection), runs fn, and encodes its result as the JSON
// output (a RawJSON result is written as it is); errors are reported with
// their kind.
func Handle[In any](fn func(In) (any, error)) int32 {
	var in In
	if err := InputJSON(&in); err != nil {
		return Fail(err)
	}
	out, err := fn(in)
	if err != nil {
		return Fail(err)
	}
	if raw, ok := out.(RawJSON); ok {
		hostOutput(raw)
		return 0
	}
	if err := OutputJSON(out); err != nil {
		return Fail(err)
	}
	return 0
}

// Log levels.
const (
	LogTrace int32 = 0
	LogDebug int32 = 1
	LogInfo  int32 = 2
	LogWarn  int32 = 3
	LogError int32 = 4
)

// Log writes a line to buddy's log (size and rate limited per call).
func Log(level int32, msg string) { hostLog(level, msg) }

// Logf formats and logs at info level.
func Logf(format string, args ...any) { hostLog(LogInfo, fmt.Sprintf(format, args...)) }

// ReadFile reads a file in a directory the skill was granted. Relative paths
// are resolved against the first granted directory.
func ReadFile(path string) ([]byte, error) {
	return decode("fs_read", hostFSRead([]byte(path)))
}

// WriteFile atomically writes a file in a directory the skill was granted,
// creating parent directories; it returns the number of bytes written.
func WriteFile(path string, data []byte) (int, error) {
	out, err := decode("fs_write", hostFSWrite([]byte(path), data))
	if err != nil {
		return 0, err
	}
	if len(out) != 8 {
		return 0, &Error{Kind: KindInternal, Message: "fs_write: malformed result"}
	}
	return int(binary.LittleEndian.Uint64(out)), nil
}

// Response is an HTTP response as buddy's fetcher returns it: the body already
// decompressed and capped, and only a safe subset of headers.
type Response struct {
	Status  int
	Headers map[string]string
	Body    []byte
}

// HTTPGet fetches a URL on a domain the skill was granted. Redirects are
// followed (each hop checked again); the body is capped.
func HTTPGet(url string) (*Response, error) {
	out, err := decode("http_get", hostHTTPGet([]byte(url)))
	if err != nil {
		return nil, err
	}
	// (Parsed here rather than by parseResponse, so that the built-ins'
	// committed fetch_url.wasm does not change with HTTPRequest.)
	if len(out) < 6 {
		return nil, &Error{Kind: KindInternal, Message: "http_get: malformed result"}
	}
	status := int(binary.LittleEndian.Uint16(out))
	n := int(binary.LittleEndian.Uint32(out[2:]))
	if 6+n > len(out) {
		return nil, &Error{Kind: KindInternal, Message: "http_get: malformed result"}
	}
	r := &Response{Status: status, Headers: map[string]string{}, Body: out[6+n:]}
	if n > 0 {
		// buddy's headers are a flat object of strings: decoded without
		// reflection unless something in them needs encoding/json.
		if h, ok := decodeStringMap(out[6 : 6+n]); ok {
			r.Headers = h
		} else if err := json.Unmarshal(out[6:6+n], &r.Headers); err != nil {
			return nil, &Error{Kind: KindInternal, Message: "http_get: malformed headers"}
		}
	}
	return r, nil
}

// Request is an HTTP request for HTTPRequest.
type Request struct {
	Method  string            // GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS; "" = GET
	URL     string            // on a domain the skill was granted
	Headers map[string]string // Host, Content-Length, Accept-Encoding and the like are buddy's
	Body    []byte
}

// HTTPRequest sends a request to a domain the skill was granted, checked as
// HTTPGet's is (every redirect hop, every address dialled, the body capped).
// The credentials skill.toml declares ([credentials.NAME]) and the operator
// grants are added by buddy to requests to their hosts: the skill never
// sees them, and what comes back has them replaced by "[secret:NAME]". A
// request carrying a secret to a host it is not granted for is refused
// (ErrForbidden).
//
//	r, err := skillkit.HTTPRequest(skillkit.Request{Method: "POST",
//		URL: "https://api.github.com/repos/o/r/issues",
//		Headers: map[string]string{"Content-Type": "application/json"},
//		Body: []byte(`{"title":"hi"}`)})
func HTTPRequest(r Request) (*Response, error) {
	req, err := json.Marshal(struct {
		Method  string            `json:"method,omitempty"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers,omitempty"`
	}{r.Method, r.URL, r.Headers})
	if err != nil {
		return nil, &Error{Kind: KindInvalidInput, Message: "http_request: " + err.Error()}
	}
	out, err := decode("http_request", hostHTTPRequest(req, r.Body))
	if err != nil {
		return nil, err
	}
	return parseResponse("http_request", out)
}

// parseResponse reads an HTTP function's payload: u16 LE status, u32 LE n,
// n bytes of header JSON, the body.
func parseResponse(fn string, out []byte) (*Response, error) {
	if len(out) < 6 {
		return nil, &Error{Kind: KindInternal, Message: fn + ": malformed result"}
	}
	status := int(binary.LittleEndian.Uint16(out))
	n := int(binary.LittleEndian.Uint32(out[2:]))
	if 6+n > len(out) {
		return nil, &Error{Kind: KindInternal, Message: fn + ": malformed result"}
	}
	r := &Response{Status: status, Headers: map[string]string{}, Body: out[6+n:]}
	if n > 0 {
		// buddy's headers are a flat object of strings: decoded without
		// reflection unless something in them needs encoding/json.
		if h, ok := decodeStringMap(out[6 : 6+n]); ok {
			r.Headers = h
		} else if err := json.Unmarshal(out[6:6+n], &r.Headers); err != nil {
			return nil, &Error{Kind: KindInternal, Message: fn + ": malformed headers"}
		}
	}
	return r, nil
}

// Getenv reads an environment variable the skill was granted.
func Getenv(name string) (string, error) {
	out, err := decode("env_get", hostEnvGet([]byte(name)))
	return string(out), err
}

// KVGet reads a key of the skill's own key-value namespace (ErrNotFound if absent).
func KVGet(key string) ([]byte, error) { return decode("kv_get", hostKVGet([]byte(key))) }

// KVSet writes a key (ErrTooLarge past the namespace's quotas).
func KVSet(key string, value []byte) error {
	_, err := decode("kv_set", hostKVSet([]byte(key), value))
	return err
}

// KVDelete deletes a key (ErrNotFound if absent).
func KVDelete(key string) error {
	_, err := decode("kv_delete", hostKVDelete([]byte(key)))
	return err
}

// Memory is a remembered text.
type Memory struct {
	ID        int64     `json:"id"`
	Text      string    `json:"text"`
	Tags      []string  `json:"tags"`
	CreatedAt time.Time `json:"created_at"`
}

// Remember stores a text with optional tags and returns its id.
func Remember(text string, tags []string) (int64, error) {
	req, _ := json.Marshal(struct {
		Text string   `json:"text"`
		Tags []string `json:"tags"`
	}{text, tags})
	out, err := decode("memory_remember", hostRemember(req))
	if err != nil {
		return 0, err
	}
	var resp struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return 0, &Error{Kind: KindInternal, Message: "memory_remember: malformed result"}
	}
	return resp.ID, nil
}

// Recall returns the memories most relevant to query (most recent first for an
// empty query); limit 0 means the host's default.
func Recall(query string, limit int) ([]Memory, error) {
	req, _ := json.Marshal(struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}{query, limit})
	out, err := decode("memory_recall", hostRecall(req))
	if err != nil {
		return nil, err
	}
	var resp struct {
		Memories []Memory `json:"memories"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, &Error{Kind: KindInternal, Message: "memory_recall: malformed result"}
	}
	return resp.Memories, nil
}

// Schedule sends a request to buddy's scheduler (the schedule host
// function, granted to the built-in schedule skill only) and returns its
// JSON answer: {"action":"add","kind":"reminder","at":"+10m","text":"…"},
// {"action":"list"}, {"action":"remove","id":"j_…"} (docs/HOST_ABI.md).
func Schedule(req any) (json.RawMessage, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, &Error{Kind: KindInvalidInput, Message: "schedule: " + err.Error()}
	}
	out, err := decode("schedule", hostSchedule(b))
	if err != nil {
		return nil, err
	}
	return json.RawMessage(out), nil
}

// KindOf returns the kind of err, KindInternal for errors skillkit did not make.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}
