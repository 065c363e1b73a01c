// Package hostfns is buddy's host ABI: the functions a skill may import from
// "buddy:host/v1", each checked against the skill's grants. A skill gets a
// function only when its grant includes it (Link); everything a function does
// goes through a gate that knows the grant: hostfns/fs for files, hostfns/http
// for the network, the KV and Memories interfaces for the store.
//
//	set, err := hostfns.Link(hostfns.Grants{Read: []string{"/home/me/docs"}}, hostfns.Deps{})
//	if err != nil { ... }
//	defer set.Close()
//	// set.Functions() are linked by the runtime; set.Provides(ns, name)
//	// answers its import check.
//
// The runtime puts a Call into the context of every invocation (WithCall) so
// that host functions can charge fuel and write size-limited logs. Results and
// the status byte a guest reads are described in docs/HOST_ABI.md.
package hostfns

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"

	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/hostfns/fs"
	buddyhttp "github.com/buddy-run/buddy/hostfns/http"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/secrets"
)

// Grants is what one skill may touch: the intersection of its manifest and the
// operator's configuration, computed by the caller. The zero value grants
// nothing but logging.
type Grants struct {
	Read    []string      // directories the skill may read (absolute, existing)
	Write   []string      // directories the skill may write
	Domains []allow.Entry // network allowlist: allow.Intersect of manifest and operator (hostfns/http.Policy.Domains)
	Env     []string      // environment variable names the skill may read
	// Namespace is the skill's key-value and memory namespace; "" = no access.
	Namespace string
	// Schedule lets the skill create, list and remove scheduled jobs
	// (FnSchedule).
	Schedule bool

	// Credentials are the secrets the HTTP functions add to requests to
	// their hosts: the skill's [credentials.NAME] granted by the operator,
	// each host within Domains. They need Deps.Secrets.
	Credentials []buddyhttp.Credential

	MaxReadBytes  int64         // 0 = hostfns/fs default
	MaxWriteBytes int64         // 0 = hostfns/fs default
	MaxFetchBytes int64         // 0 = hostfns/http default
	FetchTimeout  time.Duration // 0 = hostfns/http default
}

// Empty reports whether g grants nothing but logging.
func (g Grants) Empty() bool {
	return len(g.Read) == 0 && len(g.Write) == 0 && len(g.Domains) == 0 && len(g.Env) == 0 && g.Namespace == "" && !g.Schedule
}

// Deps are the implementations host functions need, handed in by cmd/.
type Deps struct {
	KV       KV
	Memories Memories
	// Jobs serves FnSchedule (the scheduler, through cmd/).
	Jobs Jobs
	// Getenv reads the host environment; nil = os.LookupEnv.
	Getenv func(string) (string, bool)
	// HTTPOptions configure the fetcher (a resolver or TLS roots for tests).
	Resolver  buddyhttp.Resolver
	TLSConfig *tls.Config
	// Secrets is buddy's secret store: credential values for the HTTP
	// functions, and the secrets no host function lets through. With it,
	// every secret (raw or encoded) is replaced by "[secret:NAME]" in what
	// a guest reads (files, the environment, keys, memories, responses,
	// error messages) and in what it writes (files, keys and values,
	// memories, logs), and a request carrying one where it is not granted
	// is refused. nil = no secret store.
	Secrets Secrets
	// PrivateFiles are files no file host function reads or replaces,
	// whatever directory is granted: buddy's secret store and its key
	// (secrets.Store.Files), its configuration file.
	PrivateFiles []string
	// PrivateDirs are directories no file host function reads or writes
	// anything in, whatever directory is granted (buddy's data directory),
	// except in SharedDirs inside them (its workspace): hostfns/fs
	// Options.PrivateDirs.
	PrivateDirs, SharedDirs []string
}

// Secrets is what host functions need of buddy's secret store
// (*secrets.Store satisfies it).
type Secrets = buddyhttp.Secrets

// Call is the per-invocation state the runtime puts in the context: host
// functions charge fuel for the work they do and log through it.
type Call interface {
	// Charge adds host work to the call's fuel; it panics with the runtime's
	// fuel error when the budget is gone.
	Charge(units int64)
	// Log records a guest log line (size and rate limited by the runtime).
	Log(level int32, msg string)
}

// Stasher is a Call that keeps one value for the rest of the call (the
// runtime's does): fs_read_json keeps the file it read for a buffer too
// small, so that the guest's next try, with the room the host asked for,
// does not read it again.
type Stasher interface {
	Stash() *any
}

// stashedRead is a file fs_read_json read for a buffer too small.
type stashedRead struct {
	set  *Set
	path string
	data []byte
}

// Jobs is what FnSchedule needs of the scheduler: a JSON request in, a
// JSON answer out (docs/HOST_ABI.md). Errors carry their kind (errs).
type Jobs interface {
	Schedule(ctx context.Context, req []byte) ([]byte, error)
}

// Kernel is the Extism kernel memory of the running call, as host functions
// see it: blocks addressed by the i64 offsets the guest passes (docs/HOST_ABI.md).
// The runtime serves it from host-side blocks, one set per call.
type Kernel interface {
	// Length is the length of the live block starting at off; 0 when off
	// starts none.
	Length(off uint64) uint64
	// Read returns the n bytes at off (a view into kernel memory, which
	// writes through it change; valid until the next allocation); false
	// when they are outside kernel memory.
	Read(off, n uint64) ([]byte, bool)
	// Alloc allocates a block of n bytes; 0 when the memory cap is reached.
	Alloc(n uint64) uint64
	// Write copies b to off; false when it does not fit in kernel memory.
	Write(off uint64, b []byte) bool
}

// Func is one host function: its import name, wasm signature and Go body.
// The runtime calls Fn with the call's context and kernel, or, for a
// function that reads and writes the guest's own memory, GuestFn with the
// calling module's memory as well (wazero's: every Read and Write is
// bounds-checked against it; the runtime traps a module without one).
// Exactly one of them is set.
type Func struct {
	Namespace, Name string
	Params, Results []api.ValueType
	Fn              func(ctx context.Context, k Kernel, stack []uint64)
	GuestFn         func(ctx context.Context, k Kernel, mem api.Memory, stack []uint64)
}

type callKey struct{}

// WithCall returns ctx carrying c for the host functions of one invocation.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

func callFrom(ctx context.Context) Call {
	if c, ok := ctx.Value(callKey{}).(Call); ok {
		return c
	}
	return nopCall{}
}

type nopCall struct{}

func (nopCall) Charge(int64)      {}
func (nopCall) Log(int32, string) {}

// Argument caps: what a host function reads from guest memory before it even
// looks at the value. Larger values get too_large without being copied.
const (
	maxPathBytes   = 4096
	maxURLBytes    = 8192
	maxNameBytes   = 256
	maxKeyBytes    = 1024
	maxValueBytes  = 1 << 20
	maxReqBytes    = 64 << 10
	maxLogBytes    = 4096
	hostCallCost   = 100 // fuel charged per host call on top of the guest's call
	hostByteShift  = 6   // and one unit per 64 bytes moved
	maxRecallLimit = 100

	defaultMaxWriteBytes = 10 << 20 // hostfns/fs's default
)

// Set is the linked host functions of one skill.
type Set struct {
	funcs   []Func
	read    *fs.Roots
	write   *fs.Roots
	fetch   *buddyhttp.Fetcher
	secrets Secrets
	// maxWrite caps the data argument of fs_write before it is copied.
	maxWrite int64
}

// redactor is the redactor of the secrets buddy holds now (nil: none).
func (s *Set) redactor() *secrets.Redactor {
	if s == nil || s.secrets == nil {
		return nil
	}
	return s.secrets.Redactor()
}

// redact replaces every secret in b (b itself when none).
func (s *Set) redact(b []byte) []byte { return s.redactor().RedactBytes(b) }

type setKey struct{}

// withSet lets the shared helpers (succeed, fail) find the Set's redactor.
func withSet(ctx context.Context, s *Set) context.Context {
	return context.WithValue(ctx, setKey{}, s)
}

func setFrom(ctx context.Context) *Set {
	s, _ := ctx.Value(setKey{}).(*Set)
	return s
}

// Link builds the host functions the grants allow. Directories are opened here,
// once, as os.Roots; a missing directory or a bad domain is an errs.ErrConfig
// error. Close the Set when the skill is unloaded.
func Link(g Grants, d Deps) (_ *Set, err error) {
	s := &Set{secrets: d.Secrets}
	defer func() {
		if err != nil {
			s.Close(context.Background())
		}
	}()
	s.add(FnLog, hostLog, []api.ValueType{api.ValueTypeI32, api.ValueTypeI64}, nil)
	if len(g.Read) > 0 {
		if s.read, err = fs.Open(g.Read, fs.Options{MaxReadBytes: g.MaxReadBytes, Private: d.PrivateFiles, PrivateDirs: d.PrivateDirs, Shared: d.SharedDirs}); err != nil {
			return nil, fmt.Errorf("read grant: %w", err)
		}
		s.add(FnFSRead, s.fsRead, ptrs(1), ptrs(1))
		s.addGuest(FnFSReadJSON, s.fsReadJSON, i32s(4), ptrs(1))
	}
	if len(g.Write) > 0 {
		if s.write, err = fs.Open(g.Write, fs.Options{MaxWriteBytes: g.MaxWriteBytes, Private: d.PrivateFiles, PrivateDirs: d.PrivateDirs, Shared: d.SharedDirs}); err != nil {
			return nil, fmt.Errorf("write grant: %w", err)
		}
		s.maxWrite = g.MaxWriteBytes
		if s.maxWrite <= 0 {
			s.maxWrite = defaultMaxWriteBytes
		}
		s.add(FnFSWrite, s.fsWrite, ptrs(2), ptrs(1))
	}
	if len(g.Domains) > 0 {
		var opts []buddyhttp.Option
		if d.Resolver != nil {
			opts = append(opts, buddyhttp.WithResolver(d.Resolver))
		}
		if d.TLSConfig != nil {
			opts = append(opts, buddyhttp.WithTLSConfig(d.TLSConfig))
		}
		if d.Secrets != nil {
			opts = append(opts, buddyhttp.WithSecrets(d.Secrets))
		}
		s.fetch, err = buddyhttp.New(buddyhttp.Policy{
			Domains: g.Domains, MaxBodyBytes: g.MaxFetchBytes, Timeout: g.FetchTimeout,
			Credentials: g.Credentials,
		}, opts...)
		if err != nil {
			return nil, fmt.Errorf("network grant: %w", err)
		}
		s.add(FnHTTPGet, s.httpGet, ptrs(1), ptrs(1))
		s.add(FnHTTPRequest, s.httpRequest, ptrs(2), ptrs(1))
	} else if len(g.Credentials) > 0 {
		return nil, errs.New(errs.ErrConfig, "credentials granted without a network grant")
	}
	if len(g.Env) > 0 {
		getenv := d.Getenv
		if getenv == nil {
			getenv = os.LookupEnv
		}
		allowed := slices.Clone(g.Env)
		s.add(FnEnvGet, func(ctx context.Context, k Kernel, stack []uint64) {
			name, ok := readArg(ctx, k, FnEnvGet, stack[0], maxNameBytes, stack)
			if !ok {
				return
			}
			if !slices.Contains(allowed, string(name)) {
				fail(ctx, k, stack, errs.New(errs.ErrForbidden, fmt.Sprintf("environment variable %q is not granted", name)))
				return
			}
			v, found := getenv(string(name))
			if !found {
				fail(ctx, k, stack, errs.New(errs.ErrNotFound, fmt.Sprintf("environment variable %q is not set", name)))
				return
			}
			succeed(ctx, k, stack, []byte(v))
		}, ptrs(1), ptrs(1))
	}
	if g.Namespace != "" {
		if d.KV == nil || d.Memories == nil {
			return nil, errs.New(errs.ErrConfig, "memory grant without a store")
		}
		ns := g.Namespace
		kv := d.KV
		s.add(FnKVGet, func(ctx context.Context, k Kernel, stack []uint64) {
			key, ok := readArg(ctx, k, FnKVGet, stack[0], maxKeyBytes, stack)
			if !ok {
				return
			}
			v, err := kv.KVGet(ctx, ns, string(s.redact(key)))
			finish(ctx, k, stack, v, err)
		}, ptrs(1), ptrs(1))
		s.add(FnKVSet, func(ctx context.Context, k Kernel, stack []uint64) {
			key, ok := readArg(ctx, k, FnKVSet, stack[0], maxKeyBytes, stack)
			if !ok {
				return
			}
			val, ok := readArg(ctx, k, FnKVSet, stack[1], maxValueBytes, stack)
			if !ok {
				return
			}
			finish(ctx, k, stack, nil, kv.KVSet(ctx, ns, string(s.redact(key)), s.redact(val)))
		}, ptrs(2), ptrs(1))
		s.add(FnKVDelete, func(ctx context.Context, k Kernel, stack []uint64) {
			key, ok := readArg(ctx, k, FnKVDelete, stack[0], maxKeyBytes, stack)
			if !ok {
				return
			}
			finish(ctx, k, stack, nil, kv.KVDelete(ctx, ns, string(s.redact(key))))
		}, ptrs(1), ptrs(1))
		mem := d.Memories
		s.add(FnMemRemember, func(ctx context.Context, k Kernel, stack []uint64) {
			var req struct {
				Text string   `json:"text"`
				Tags []string `json:"tags"`
			}
			if !readJSON(ctx, k, FnMemRemember, stack, &req) {
				return
			}
			r := s.redactor()
			for i := range req.Tags {
				req.Tags[i] = r.Redact(req.Tags[i])
			}
			id, err := mem.Remember(ctx, ns, r.Redact(req.Text), req.Tags)
			if err != nil {
				finish(ctx, k, stack, nil, err)
				return
			}
			out, _ := json.Marshal(map[string]int64{"id": id})
			succeed(ctx, k, stack, out)
		}, ptrs(1), ptrs(1))
		s.add(FnMemRecall, func(ctx context.Context, k Kernel, stack []uint64) {
			var req struct {
				Query string `json:"query"`
				Limit int    `json:"limit"`
			}
			if !readJSON(ctx, k, FnMemRecall, stack, &req) {
				return
			}
			if req.Limit < 0 || req.Limit > maxRecallLimit {
				fail(ctx, k, stack, errs.New(errs.ErrInvalidInput, fmt.Sprintf("limit must be between 0 and %d", maxRecallLimit)))
				return
			}
			ms, err := mem.Recall(ctx, ns, req.Query, req.Limit)
			if err != nil {
				finish(ctx, k, stack, nil, err)
				return
			}
			if ms == nil {
				ms = []Memory{}
			}
			for i := range ms {
				if ms[i].Tags == nil {
					ms[i].Tags = []string{}
				}
			}
			out, err := json.Marshal(map[string][]Memory{"memories": ms})
			finish(ctx, k, stack, out, err)
		}, ptrs(1), ptrs(1))
	}
	if g.Schedule {
		if d.Jobs == nil {
			return nil, errs.New(errs.ErrConfig, "schedule grant without a scheduler")
		}
		jobs := d.Jobs
		s.add(FnSchedule, func(ctx context.Context, k Kernel, stack []uint64) {
			req, ok := readArg(ctx, k, FnSchedule, stack[0], maxReqBytes, stack)
			if !ok {
				return
			}
			out, err := jobs.Schedule(ctx, req)
			finish(ctx, k, stack, out, err)
		}, ptrs(1), ptrs(1))
	}
	return s, nil
}

// Functions returns the host functions to link.
func (s *Set) Functions() []Func { return s.funcs }

// Provides returns the signature of the linked function namespace.name.
func (s *Set) Provides(namespace, name string) (params, results []api.ValueType, ok bool) {
	for _, f := range s.funcs {
		if f.Namespace == namespace && f.Name == name {
			return f.Params, f.Results, true
		}
	}
	return nil, nil, false
}

// ReadDirs and WriteDirs are the canonical directories in force.
func (s *Set) ReadDirs() []string  { return s.read.Dirs() }
func (s *Set) WriteDirs() []string { return s.write.Dirs() }

// Close releases the opened directories and idle connections (nothing it
// does waits: ctx is for the interface's sake, like runtime.Module's).
func (s *Set) Close(ctx context.Context) error {
	var err error
	if s.read != nil {
		err = errors.Join(err, s.read.Close())
		s.read = nil
	}
	if s.write != nil {
		err = errors.Join(err, s.write.Close())
		s.write = nil
	}
	if s.fetch != nil {
		s.fetch.CloseIdleConnections()
	}
	return err
}

func (s *Set) add(name string, fn func(context.Context, Kernel, []uint64), params, results []api.ValueType) {
	if s.secrets != nil {
		inner := fn
		fn = func(ctx context.Context, k Kernel, stack []uint64) { inner(withSet(ctx, s), k, stack) }
	}
	s.funcs = append(s.funcs, Func{Namespace: Namespace, Name: name, Params: params, Results: results, Fn: fn})
}

// addGuest adds a function that works in the guest's own memory.
func (s *Set) addGuest(name string, fn func(context.Context, Kernel, api.Memory, []uint64), params, results []api.ValueType) {
	if s.secrets != nil {
		inner := fn
		fn = func(ctx context.Context, k Kernel, mem api.Memory, stack []uint64) {
			inner(withSet(ctx, s), k, mem, stack)
		}
	}
	s.funcs = append(s.funcs, Func{Namespace: Namespace, Name: name, Params: params, Results: results, GuestFn: fn})
}

func i32s(n int) []api.ValueType {
	out := make([]api.ValueType, n)
	for i := range out {
		out[i] = api.ValueTypeI32
	}
	return out
}

func ptrs(n int) []api.ValueType {
	out := make([]api.ValueType, n)
	for i := range out {
		out[i] = api.ValueTypeI64
	}
	return out
}

func (s *Set) fsRead(ctx context.Context, k Kernel, stack []uint64) {
	path, ok := readArg(ctx, k, FnFSRead, stack[0], maxPathBytes, stack)
	if !ok {
		return
	}
	data, err := s.read.Read(ctx, string(path))
	if err == nil {
		touched(ctx, s.read, string(path), len(data), 0)
	}
	finish(ctx, k, stack, data, err)
}

// Fuel of fs_read_json beyond hostCallCost and the path's bytes: the file
// is read, redacted, checked and escaped 8 bytes at a time (a unit per 8
// bytes read, as a wasm memory.copy is charged), and the JSON written into
// the guest is charged as every host result is (a unit per 64 bytes).
const jsonTextShift = 3

// fsReadJSON is fs_read_json(path, path_len, buf, cap): fs_read's read,
// answered in the guest's own memory as a JSON string. Every guest range
// is bounds-checked by wazero (mem.Read) before anything else happens: one
// outside the guest's memory ends the call, as a bad kernel pointer does.
func (s *Set) fsReadJSON(ctx context.Context, _ Kernel, mem api.Memory, stack []uint64) {
	c := callFrom(ctx)
	c.Charge(hostCallCost)
	if err := ctx.Err(); err != nil {
		panic(err)
	}
	pathPtr, pathLen := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	bufPtr, bufCap := api.DecodeU32(stack[2]), api.DecodeU32(stack[3])
	buf, ok := mem.Read(bufPtr, bufCap)
	if !ok {
		panic(errs.New(errs.ErrTrap, fmt.Sprintf("%s: buffer %#x+%d is outside the guest's memory", FnFSReadJSON, bufPtr, bufCap)))
	}
	if pathLen > maxPathBytes {
		guestFail(ctx, buf, stack, errs.New(errs.ErrTooLarge, fmt.Sprintf("%s: argument of %d bytes is over the %d-byte cap", FnFSReadJSON, pathLen, maxPathBytes)))
		return
	}
	p, ok := mem.Read(pathPtr, pathLen)
	if !ok {
		panic(errs.New(errs.ErrTrap, fmt.Sprintf("%s: path %#x+%d is outside the guest's memory", FnFSReadJSON, pathPtr, pathLen)))
	}
	path := string(p) // a copy: buf may overlap it
	c.Charge(int64(pathLen >> hostByteShift))
	var stash *any
	var data []byte
	if st, ok := c.(Stasher); ok {
		stash = st.Stash()
		if prev, ok := (*stash).(stashedRead); ok && prev.set == s && prev.path == path {
			data = prev.data // the guest's retry with more room: the same file, not read twice
			*stash = nil
		}
	}
	if data == nil {
		var err error
		if data, err = s.read.Read(ctx, path); err != nil {
			guestFail(ctx, buf, stack, err)
			return
		}
		touched(ctx, s.read, path, len(data), 0)
		data = s.redact(data)
	}
	c.Charge(int64(len(data) >> jsonTextShift))
	n, valid := writeJSONText(buf, data)
	if !valid {
		guestFail(ctx, buf, stack, errs.New(errs.ErrInvalidInput, fmt.Sprintf("read %s: not UTF-8 text (%d bytes)", quote(path), len(data))))
		return
	}
	if uint64(n) > math.MaxUint32 {
		guestFail(ctx, buf, stack, errs.New(errs.ErrTooLarge, fmt.Sprintf("read %s: as a JSON string the file is %d bytes, more than a guest's memory holds", quote(path), n)))
		return
	}
	c.Charge(int64(n >> hostByteShift))
	if n > len(buf) && stash != nil {
		*stash = stashedRead{set: s, path: path, data: data}
	}
	stack[0] = uint64(n)
}

// quote quotes a guest path for a message, cut as hostfns/fs cuts it.
func quote(path string) string { return strconv.Quote(truncate(path, 256)) }

// guestFail is fail for a function answering in the guest's memory: the
// message (secrets redacted) goes into buf, cut to its room on a rune
// boundary, and the result is status << 32 | its length.
func guestFail(ctx context.Context, buf []byte, stack []uint64, err error) {
	if cerr := ctx.Err(); cerr != nil {
		panic(cerr)
	}
	if errors.Is(err, errs.ErrFuelExhausted) || errors.Is(err, errs.ErrTimeout) || errors.Is(err, errs.ErrCanceled) {
		panic(err)
	}
	msg := setFrom(ctx).redact([]byte(err.Error()))
	if len(msg) > len(buf) {
		n := len(buf)
		for n > 0 && !utf8.RuneStart(msg[n]) {
			n--
		}
		msg = msg[:n]
	}
	callFrom(ctx).Charge(int64(len(msg) >> hostByteShift))
	n := copy(buf, msg)
	stack[0] = uint64(errs.StatusOf(err))<<32 | uint64(n)
}

func (s *Set) fsWrite(ctx context.Context, k Kernel, stack []uint64) {
	if st, ok := callFrom(ctx).(Stasher); ok {
		*st.Stash() = nil // a file read before this write is read again after it
	}
	path, ok := readArg(ctx, k, FnFSWrite, stack[0], maxPathBytes, stack)
	if !ok {
		return
	}
	data, ok := readArg(ctx, k, fmt.Sprintf("write %q", truncate(string(path), 256)), stack[1], s.maxWrite, stack)
	if !ok {
		return
	}
	if names := s.redactor().Find(path); len(names) > 0 {
		fail(ctx, k, stack, errs.New(errs.ErrForbidden, fmt.Sprintf("the path of a write holds the secret %q", names[0])))
		return
	}
	data = s.redact(data)
	n, err := s.write.Write(ctx, string(path), data)
	if n > 0 {
		touched(ctx, s.write, string(path), 0, n)
	}
	if err != nil {
		finish(ctx, k, stack, nil, err)
		return
	}
	stack[0] = writeResult(ctx, k, errs.StatusOK, binary.LittleEndian.AppendUint64(nil, uint64(n)))
}

func (s *Set) httpGet(ctx context.Context, k Kernel, stack []uint64) {
	url, ok := readArg(ctx, k, FnHTTPGet, stack[0], maxURLBytes, stack)
	if !ok {
		return
	}
	resp, err := s.fetch.Get(ctx, string(url))
	s.httpResult(ctx, k, stack, resp, err, 0)
}

// maxRequestBodyBytes caps the body argument of http_request (hostfns/http's
// own cap, checked before the body is copied).
const maxRequestBodyBytes = buddyhttp.DefaultMaxRequestBytes

// httpRequest is http_request(req, body): req is {"method","url","headers"}.
func (s *Set) httpRequest(ctx context.Context, k Kernel, stack []uint64) {
	var req struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	if !readJSON(ctx, k, FnHTTPRequest, stack, &req) {
		return
	}
	if len(req.URL) > maxURLBytes {
		fail(ctx, k, stack, errs.New(errs.ErrTooLarge, fmt.Sprintf("%s: URL of %d bytes is over the %d-byte cap", FnHTTPRequest, len(req.URL), maxURLBytes)))
		return
	}
	body, ok := readArg(ctx, k, FnHTTPRequest+" body", stack[1], maxRequestBodyBytes, stack)
	if !ok {
		return
	}
	resp, err := s.fetch.Do(ctx, buddyhttp.Request{Method: req.Method, URL: req.URL, Header: req.Headers, Body: body})
	s.httpResult(ctx, k, stack, resp, err, int64(len(body)))
}

// httpResult answers an HTTP function: u16 LE status, u32 LE n, n bytes of
// header JSON, the body. The fetcher has taken the secrets out of it.
func (s *Set) httpResult(ctx context.Context, k Kernel, stack []uint64, resp *buddyhttp.Response, err error, sent int64) {
	if u := usageFrom(ctx); u != nil && sent > 0 {
		u.mu.Lock()
		u.bytesWritten += sent
		u.mu.Unlock()
	}
	if err != nil {
		finish(ctx, k, stack, nil, err)
		return
	}
	if u := usageFrom(ctx); u != nil {
		u.mu.Lock()
		u.bytesRead += int64(len(resp.Body))
		u.mu.Unlock()
	}
	hdr, _ := json.Marshal(resp.Headers)
	out := make([]byte, 0, 6+len(hdr)+len(resp.Body))
	out = binary.LittleEndian.AppendUint16(out, uint16(resp.Status))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(hdr)))
	out = append(out, hdr...)
	out = append(out, resp.Body...)
	stack[0] = writeResult(ctx, k, errs.StatusOK, out)
}

func hostLog(ctx context.Context, k Kernel, stack []uint64) {
	level := int32(api.DecodeI32(stack[0]))
	c := callFrom(ctx)
	n := k.Length(stack[1])
	c.Charge(hostCallCost + int64(n>>hostByteShift))
	if n > maxLogBytes {
		n = maxLogBytes
	}
	msg, ok := k.Read(stack[1], n)
	if !ok {
		panic(errs.New(errs.ErrTrap, fmt.Sprintf("%s: pointer %#x is outside kernel memory", FnLog, stack[1])))
	}
	c.Log(level, string(setFrom(ctx).redact(msg)))
}

// readArg reads the kernel block at off, at most max bytes. A bad pointer ends
// the call (the guest broke the memory contract); an oversized block gets a
// too_large result the guest can handle, and false.
func readArg(ctx context.Context, k Kernel, fn string, off uint64, max int64, stack []uint64) ([]byte, bool) {
	c := callFrom(ctx)
	c.Charge(hostCallCost)
	if err := ctx.Err(); err != nil {
		panic(err)
	}
	if off == 0 {
		return []byte{}, true // the kernel's answer to alloc(0): an empty argument
	}
	n := k.Length(off)
	if _, inside := k.Read(off, 1); n == 0 && !inside {
		panic(errs.New(errs.ErrTrap, fmt.Sprintf("%s: pointer %#x is not a kernel memory block", fn, off)))
	}
	if n == 0 {
		// The kernel answers 0 for offsets that do not start a block; a real empty
		// argument reads as empty too, which every function refuses as invalid.
		return []byte{}, true
	}
	if int64(n) > max {
		fail(ctx, k, stack, errs.New(errs.ErrTooLarge, fmt.Sprintf("%s: argument of %d bytes is over the %d-byte cap", fn, n, max)))
		return nil, false
	}
	b, ok := k.Read(off, n)
	if !ok {
		panic(errs.New(errs.ErrTrap, fmt.Sprintf("%s: block %#x+%d is outside kernel memory", fn, off, n)))
	}
	c.Charge(int64(n >> hostByteShift))
	return slices.Clone(b), true
}

// truncate cuts s to at most n bytes for a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func readJSON(ctx context.Context, k Kernel, fn string, stack []uint64, v any) bool {
	raw, ok := readArg(ctx, k, fn, stack[0], maxReqBytes, stack)
	if !ok {
		return false
	}
	if err := json.Unmarshal(raw, v); err != nil {
		fail(ctx, k, stack, errs.New(errs.ErrInvalidInput, fmt.Sprintf("%s: request is not valid JSON: %v", fn, err)))
		return false
	}
	return true
}

// finish answers with data on success and with the error's status otherwise.
func finish(ctx context.Context, k Kernel, stack []uint64, data []byte, err error) {
	if err != nil {
		fail(ctx, k, stack, err)
		return
	}
	succeed(ctx, k, stack, data)
}

// succeed answers with data, every secret in it replaced by
// "[secret:NAME]" (a file, a variable, a value may hold one).
func succeed(ctx context.Context, k Kernel, stack []uint64, data []byte) {
	stack[0] = writeResult(ctx, k, errs.StatusOK, setFrom(ctx).redact(data))
}

// fail hands the guest an error status and message. If the call's deadline has
// passed meanwhile, the call ends with it instead: a guest must not be able to
// keep running past its deadline by retrying.
func fail(ctx context.Context, k Kernel, stack []uint64, err error) {
	if cerr := ctx.Err(); cerr != nil {
		panic(cerr)
	}
	if errors.Is(err, errs.ErrFuelExhausted) || errors.Is(err, errs.ErrTimeout) || errors.Is(err, errs.ErrCanceled) {
		panic(err)
	}
	stack[0] = writeResult(ctx, k, errs.StatusOf(err), setFrom(ctx).redact([]byte(err.Error())))
}

// writeResult allocates a kernel block for status+payload. An allocation the
// kernel refuses ends the call with a memory-limit error (go-sdk's WriteBytes
// would write at offset 0 and corrupt the kernel).
func writeResult(ctx context.Context, k Kernel, st errs.Status, payload []byte) uint64 {
	c := callFrom(ctx)
	c.Charge(int64(len(payload) >> hostByteShift))
	n := uint64(len(payload)) + 1
	ptr := k.Alloc(n)
	if ptr == 0 {
		panic(errs.New(errs.ErrMemoryLimit, fmt.Sprintf("kernel memory cannot hold a %d-byte result", n)))
	}
	// The block is written through Read's view of kernel memory: one
	// bounds check, no status slice to allocate.
	buf, ok := k.Read(ptr, n)
	if !ok {
		panic(errs.New(errs.ErrMemoryLimit, fmt.Sprintf("kernel block %#x+%d is outside memory", ptr, n)))
	}
	buf[0] = byte(st)
	copy(buf[1:], payload)
	return ptr
}
