package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"

	"github.com/buddy-run/buddy/runtime"
)

// The Extism kernel ABI, differentially: every guest below runs through plain
// go-sdk v1.7.1 (the reference, which every Extism PDK is written against) and
// through buddy's public API (runtime.New, Load, CallExport), and the two must
// agree on the return code, the output bytes, the error text and the log
// lines. Where buddy's contract differs on purpose, the case says so (why) and
// asserts buddy's own answer; the Extism kernel buddy serves must reproduce
// go-sdk everywhere else.
//
// go-sdk's answer is itself checked against an expectation written here, so
// that a change on either side fails the test rather than moving both.
//
// The transcripts of testdata/kernel_abi.wasm (see its .wat) hold values and
// relations, never absolute kernel offsets.

// abiCall is what go-sdk's Plugin.CallWithContext returns: the rc, the output
// (go-sdk returns it even with an error), the error's text, and the log lines
// the call sent ("info message").
type abiCall struct {
	rc     uint32
	out    []byte
	errMsg string
	logs   []string
}

// buddyWant is buddy's answer where it differs from go-sdk's.
type buddyWant struct {
	out  []byte // on success
	kind error  // nil: success; else errors.Is target
	code uint32 // *SkillError: its Code
	msg  string // *SkillError: exactly its Message; other errors: a substring
	logs []string
}

type abiCase struct {
	file, fn string
	label    string // names the input in the subtest name; "" = its length
	in       []byte
	sdk      abiCall
	// buddy, with why, is buddy's documented answer where it differs from
	// go-sdk's; nil: buddy must answer exactly sdk (which must then be a
	// success: rc 0, no error).
	buddy *buddyWant
	why   string
}

// tr builds a transcript: ints as little-endian u64, strings and []byte raw.
func tr(vals ...any) []byte {
	var b []byte
	for _, v := range vals {
		switch v := v.(type) {
		case int:
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		case string:
			b = append(b, v...)
		case []byte:
			b = append(b, v...)
		default:
			panic(fmt.Sprintf("tr: %T", v))
		}
	}
	return b
}

// patterned returns n deterministic bytes, every value 0-255 in use.
func patterned(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131 + 7 ^ i>>3)
	}
	return b
}

// inputTranscript is what the input export reports for in: input_length,
// length(input_offset()), the input through input_load_u8, input_load_u64 at
// every position a word fits, then the same through load_u8/load_u64 at
// input_offset() + position.
func inputTranscript(in []byte) []byte {
	n := len(in)
	words := func() []byte {
		var b []byte
		for i := 0; i+8 <= n; i++ {
			b = append(b, in[i:i+8]...)
		}
		return b
	}
	return tr(n, n, in, words(), in, words())
}

// blocksTranscript is what the blocks export reports: the bytes of every live
// block read back (block i holds byte (31i + 7j + 1) & 0xFF at j; 40 blocks,
// every 4th from 1 freed, 16 more), then mismatching words, overlapping pairs,
// wrong lengths and the number of live blocks.
func blocksTranscript() []byte {
	size := func(i int) int {
		if i%16 == 15 {
			return 4096 + i
		}
		return 1 + (i*i*7+i*13)%150
	}
	var dump []byte
	live := 0
	for i := range 56 {
		if i < 40 && i%4 == 1 {
			continue
		}
		live++
		for j := range size(i) {
			dump = append(dump, byte(i*31+j*7+1))
		}
	}
	return tr(dump, 0, 0, 0, live)
}

var allocSizes = []int{1, 7, 8, 9, 16, 100, 4096, 65536, 1 << 20}

func allocTranscript() []byte {
	vals := []any{1, 0} // alloc(0) == 0, length(0)
	for _, n := range allocSizes {
		// alloc(n) != 0, length, length_unsafe, length(p+1), length(p-1)
		vals = append(vals, 1, n, n, 0, 0)
	}
	return tr(append(vals, 1)...) // alloc(17 MiB) == 0
}

// kernelABICases are the cases of testdata/kernel_abi.wasm.
func kernelABICases() []abiCase {
	const f = "kernel_abi.wasm"
	ok := func(fn string, in []byte, out []byte) abiCase {
		return abiCase{file: f, fn: fn, in: in, sdk: abiCall{out: out}}
	}
	partial := []byte("partial output")
	cases := []abiCase{
		// alloc(0) is 0; a block's length is what was asked; a pointer inside
		// or just before a block is no block; a request over the memory cap
		// gets 0 (go-sdk: the kernel's grow is refused; buddy: its cap, from
		// the size alone) and the call goes on.
		ok("alloc", nil, allocTranscript()),
		// free then length is 0; free(0), free(p+1) and a double free leave
		// live blocks alone; a block allocated after a dirty one was freed
		// reads as zeros.
		ok("free", nil, tr(0, 1, 16, 16, 16, 0, 24, 16, 1, 8, 24, 64, 0, 0)),
		ok("blocks", nil, blocksTranscript()),
		ok("output_sub", nil, []byte("34567")),
		ok("output_empty", nil, []byte{}),
		ok("output_none", nil, []byte{}),
		// The first set took effect (offset and length as given), the last
		// set wins, and the output is read when the call ends.
		ok("output_twice", nil, tr(1, 5, 1, 32)),
		// error_get is 0 before any error_set, the block after; error_set(0)
		// clears it (so the call succeeds).
		ok("error_get", nil, tr(1, 1, 15, 1)),
		// After reset: no input (input_length 0, input_load_u8(0) 0), the
		// block gone, no error, no output; a new block reads as zeros.
		ok("reset", []byte("abcdefgh"), tr(0, 0, 1, 0, 0, 1, 8, 0)),
		// memory_bytes != 0; a missing config key is 0 and the key block is
		// left alone; get_log_level is 2, Extism's "info": buddy's fixed
		// level, set for the reference in runABICases.
		ok("misc", nil, tr(1, 0, 11, 2)),
		// log_info reaches the logger (buddy: runtime.Options.Log); log_debug
		// is below the level and dropped; the log functions free both blocks.
		{file: f, fn: "log", sdk: abiCall{out: tr(0, 0), logs: []string{"info kernel_abi log line"}}},
		{file: f, fn: "vars",
			// var_get of an absent var: 0, and the key block is freed;
			// var_set frees the key and value blocks; the value comes back;
			// var_set(k, 0) deletes. (The reference has MaxVarBytes > 0.)
			sdk: abiCall{out: tr(0, 0, 0, 0, 7, "value-1", 0)}},
	}
	for _, n := range []int{0, 1, 7, 8, 9, 4097} {
		in := patterned(n)
		cases = append(cases, ok("input", in, inputTranscript(in)))
	}
	notUTF8 := []byte("\xff\xfe\x00\x80 abc \xc3\x28 \xed\xa0\x80")
	cases = append(cases, abiCase{file: f, fn: "input", label: "not-utf8", in: notUTF8, sdk: abiCall{out: inputTranscript(notUTF8)}})

	// Errors. go-sdk returns the output along with the error, and an error
	// with rc 0; buddy returns an error and no output whenever the guest set
	// an error or returned non-zero, and classifies a "<kind>: " prefix.
	const whyErr = "buddy's contract: a call succeeds (with output) or fails with a typed error and no output; " +
		"rc != 0 or error_set is a *SkillError carrying the rc and the message (RATIONALE \"Errors, never panics\")"
	errCase := func(fn string, in []byte, rc uint32, msg string, kind error, bmsg string) abiCase {
		return abiCase{file: f, fn: fn, in: in, label: strconv.Quote(string(in[:min(len(in), 16)])),
			sdk:   abiCall{rc: rc, out: partial, errMsg: msg},
			buddy: &buddyWant{kind: kind, code: rc, msg: bmsg}, why: whyErr}
	}
	long := bytes.Repeat([]byte("long error text "), 256)
	cases = append(cases,
		errCase("error_ret1", nil, 1, "something broke", runtime.ErrSkill, "something broke"),
		// "invalid_input: " is a kind buddy recognises: it becomes the error's
		// kind and is cut from the message.
		errCase("error_ret1", []byte("invalid_input: bad thing"), 1, "invalid_input: bad thing", runtime.ErrInvalidInput, "bad thing"),
		errCase("error_ret1", notUTF8, 1, string(notUTF8), runtime.ErrSkill, string(notUTF8)),
		errCase("error_ret1", long, 1, string(long), runtime.ErrSkill, string(long)),
		// error_set then return 0: go-sdk reports rc 0 AND the error (and the
		// output); buddy fails the call.
		errCase("error_ret0", nil, 0, "set but returned 0", runtime.ErrSkill, "set but returned 0"),
		// rc 2 without error_set: go-sdk returns rc 2, the output, no error.
		errCase("exit_code", nil, 2, "", runtime.ErrSkill, ""),
	)

	// Stores. go-sdk's store_u8/store_u64 write anywhere in kernel memory;
	// buddy's kernel (kernel.go) confines them to live blocks: its metadata
	// is out of the guest's reach, but a store outside every block is a guest
	// bug that would silently corrupt another block.
	stored := []byte("stored")
	trap := func(mode, why string) abiCase {
		return abiCase{file: f, fn: "store_outside", label: mode, in: []byte(mode), sdk: abiCall{out: stored},
			buddy: &buddyWant{kind: runtime.ErrTrap, msg: "store_u8 at"}, why: why}
	}
	cases = append(cases,
		abiCase{file: f, fn: "store_outside", label: "inside", in: []byte("inside"), sdk: abiCall{out: stored}},
		trap("past", "one byte past the block: it may be the next block's header"),
		trap("freed", "the block was freed: the kernel may reuse it, header included"),
		trap("reset", "reset freed every block"),
		// The input block is a live block: a PDK may edit its input in place.
		abiCase{file: f, fn: "store_outside", label: "input", in: []byte("input"), sdk: abiCall{out: stored}},
		// A block allocated before another stays writable to its last byte.
		abiCase{file: f, fn: "store_outside", label: "earlier", in: []byte("earlier"), sdk: abiCall{out: stored}},
	)
	return cases
}

// TestKernelABI runs testdata/kernel_abi.wasm through go-sdk and buddy.
func TestKernelABI(t *testing.T) {
	runABICases(t, kernelABICases())
}

// pdkCases run the real PDK guests in testdata that need no buddy host
// function with inputs of every shape.
func pdkCases() []abiCase {
	inputs := []struct {
		label string
		in    []byte
	}{
		{"empty", nil},
		{"1B", []byte("a")},
		{"4KiB", bytes.Repeat([]byte("The quick brown fox. "), 4096/21+1)[:4096]},
		{"100KiB", bytes.Repeat([]byte("Lorem ipsum dolor sit amet, "), 100*1024/28+1)[:100*1024]},
		{"not-utf8", []byte("\xff\xfe\x00\x80 A \xc3\x28 e \xed\xa0\x80")},
	}
	vowels := func(b []byte) int {
		n := 0
		for _, c := range b {
			if strings.IndexByte("aeiouAEIOU", c) >= 0 {
				n++
			}
		}
		return n
	}
	var cases []abiCase
	for _, in := range inputs {
		n := vowels(in.in)
		cases = append(cases,
			abiCase{file: "pdkplugin.wasm", fn: "greet", label: in.label, in: in.in,
				sdk: abiCall{out: []byte("Hello, " + string(in.in) + "!")}},
			abiCase{file: "pdkplugin.wasm", fn: "count_vowels", label: in.label, in: in.in,
				sdk: abiCall{out: []byte(strconv.Itoa(n))}},
			abiCase{file: "varsplugin/varsplugin.wasm", fn: "count_vowels", label: in.label, in: in.in,
				sdk: abiCall{out: fmt.Appendf(nil, `{"count":%d,"total":%d}`, n, n)}},
			abiCase{file: "varsplugin/varsplugin.wasm", fn: "count_vowels_twice", label: in.label, in: in.in,
				sdk: abiCall{out: fmt.Appendf(nil, `{"count":%d,"total":%d}`, n, 2*n)}},
		)
		// The AssemblyScript PDK reads its input as UTF-8 text and writes
		// UTF-8. Its decoder is lenient: invalid bytes come back as other
		// code points (and lone surrogates), not U+FFFD; this is as-pdk
		// 1.0.0's answer, as go-sdk gives it.
		text := string(in.in)
		if in.label == "not-utf8" {
			text = "\xed\xbe\xb8\xed\xb0\x80 A \xc3\xa8 e \xed\xa0\x80"
		}
		cases = append(cases,
			abiCase{file: "as_plugin.wasm", fn: "greet", label: in.label, in: in.in,
				sdk: abiCall{out: []byte("Hello, " + text + "!")}},
			abiCase{file: "as_plugin.wasm", fn: "count_vowels", label: in.label, in: in.in,
				sdk: abiCall{out: fmt.Appendf(nil, `{"count": %d}`, vowels([]byte(text)))}},
		)
	}
	const whyKind = "buddy's contract: error_set + rc 1 is a *SkillError whose \"<kind>: \" prefix becomes its kind; no output"
	cases = append(cases,
		abiCase{file: "as_plugin.wasm", fn: "greet", label: "json", in: []byte(`{"name": "Ada"}`), sdk: abiCall{out: []byte("Hello, Ada!")}},
		abiCase{file: "as_plugin.wasm", fn: "count_vowels", label: "json", in: []byte(`{"text": "Ada Lovelace"}`), sdk: abiCall{out: []byte(`{"count": 6}`)}},
		abiCase{file: "as_plugin.wasm", fn: "greet", label: "json-no-name", in: []byte(`{"name": 5}`),
			sdk:   abiCall{rc: 1, out: []byte{}, errMsg: "invalid_input: name is required"},
			buddy: &buddyWant{kind: runtime.ErrInvalidInput, code: 1, msg: "name is required"}, why: whyKind},
		abiCase{file: "pdkplugin.wasm", fn: "fail", in: nil,
			sdk:   abiCall{rc: 1, out: []byte{}, errMsg: "not_found: no such greeting"},
			buddy: &buddyWant{kind: runtime.ErrNotFound, code: 1, msg: "no such greeting"}, why: whyKind},
		// WASI as both hosts configure it: no file, no directory, no
		// environment, no arguments; stdout goes nowhere.
		abiCase{file: "pdkplugin.wasm", fn: "wasi_probe", in: nil,
			sdk: abiCall{out: []byte(`{"read_ok":false,"dir_entries":0,"dir_ok":false,"env":0,"home":"","args":0}`)}},
	)
	return cases
}

// TestKernelABIPDKGuests runs the real PDK guests through go-sdk and buddy.
func TestKernelABIPDKGuests(t *testing.T) {
	runABICases(t, pdkCases())
}

// sdkCompile compiles a module for plain go-sdk, the reference: buddy's
// default memory cap (16 MiB) and vars on (go-sdk's default is off, and
// var_set then panics "Vars are disabled by this host").
func sdkCompile(ctx context.Context, cache wazero.CompilationCache, wasm []byte) (*extism.CompiledPlugin, error) {
	return extism.NewCompiledPlugin(ctx, extism.Manifest{
		Wasm:   []extism.Wasm{extism.WasmData{Data: wasm}},
		Memory: &extism.ManifestMemory{MaxPages: 256, MaxVarBytes: 1 << 20},
	}, extism.PluginConfig{
		RuntimeConfig: wazero.NewRuntimeConfig().WithCompilationCache(cache).WithMemoryLimitPages(256),
		// As the Extism docs say for TinyGo plugins: without WASI, go-sdk
		// runs no reactor _initialize (varsplugin then traps). Harmless for
		// the others: no WASI import, nothing to initialize.
		EnableWasi: true,
	}, nil)
}

// sdkCall runs fn in a fresh go-sdk instance (as buddy runs every call).
func sdkCall(t *testing.T, cp *extism.CompiledPlugin, fn string, in []byte) abiCall {
	t.Helper()
	ctx := t.Context()
	p, err := cp.Instance(ctx, extism.PluginInstanceConfig{ModuleConfig: wazero.NewModuleConfig()})
	if err != nil {
		t.Fatalf("go-sdk: instantiating: %v", err)
	}
	defer p.Close(ctx)
	var res abiCall
	p.SetLogger(func(l extism.LogLevel, msg string) {
		res.logs = append(res.logs, strings.ToLower(l.String())+" "+msg)
	})
	rc, out, err := p.CallWithContext(ctx, fn, in)
	res.rc, res.out = rc, out
	if err != nil {
		res.errMsg = err.Error()
	}
	return res
}

func runABICases(t *testing.T, cases []abiCase) {
	ctx := t.Context()
	// buddy's guests see the log level "info" (get_log_level 2; debug and
	// trace lines dropped); go-sdk's is process-wide and off by default.
	extism.SetLogLevel(extism.LogLevelInfo)
	var mu sync.Mutex
	var logs []string
	rt := newRuntime(t, runtime.Options{Log: func(_ string, l runtime.Level, msg string) {
		mu.Lock()
		logs = append(logs, l.String()+" "+msg)
		mu.Unlock()
	}})

	// Compile every module for both hosts at once (TinyGo's take seconds
	// under -race).
	cache := wazero.NewCompilationCache()
	ref := map[string]*extism.CompiledPlugin{}
	mods := map[string]*runtime.Module{}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		for _, cp := range ref {
			cp.Close(ctx)
		}
		cache.Close(ctx)
	})
	var wg sync.WaitGroup
	var loadErr []error
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.file] {
			continue
		}
		seen[c.file] = true
		wasm := readFixture(t, c.file)
		wg.Go(func() {
			cp, err := sdkCompile(ctx, cache, wasm)
			mu.Lock()
			defer mu.Unlock()
			ref[c.file] = cp
			if err != nil {
				loadErr = append(loadErr, fmt.Errorf("go-sdk: compiling %s: %w", c.file, err))
			}
		})
		wg.Go(func() {
			mod, err := rt.Load(ctx, wasm, runtime.Spec{Name: c.file, Manifest: manifest(c.fn, nil)})
			mu.Lock()
			defer mu.Unlock()
			mods[c.file] = mod
			if err != nil {
				loadErr = append(loadErr, fmt.Errorf("buddy: loading %s: %w", c.file, err))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(loadErr...); err != nil {
		t.Fatal(err)
	}

	for _, c := range cases {
		label := c.label
		if label == "" {
			label = strconv.Itoa(len(c.in))
		}
		name := strings.TrimSuffix(filepath.Base(c.file), ".wasm") + "/" + c.fn + "/" + label
		t.Run(name, func(t *testing.T) {
			// The reference first: go-sdk must still give what is written here.
			got := sdkCall(t, ref[c.file], c.fn, c.in)
			if got.rc != c.sdk.rc || !bytes.Equal(got.out, c.sdk.out) || got.errMsg != c.sdk.errMsg ||
				!slices.Equal(got.logs, c.sdk.logs) {
				t.Fatalf("go-sdk (the reference) answered\n rc %d, error %q, logs %q, output %s\nwant\n rc %d, error %q, logs %q, output %s\n%s",
					got.rc, got.errMsg, got.logs, shorten(got.out), c.sdk.rc, c.sdk.errMsg, c.sdk.logs, shorten(c.sdk.out), firstDiff(got.out, c.sdk.out))
			}

			mu.Lock()
			logs = nil
			mu.Unlock()
			res, err := mods[c.file].CallExport(t.Context(), c.fn, c.in)
			mu.Lock()
			blogs := slices.Clone(logs)
			mu.Unlock()

			want := c.buddy
			if want == nil {
				if c.sdk.rc != 0 || c.sdk.errMsg != "" {
					t.Fatal("bad case: go-sdk fails, so buddy's answer must be written out (buddy, why)")
				}
				want = &buddyWant{out: c.sdk.out, logs: c.sdk.logs}
			} else if c.why == "" {
				t.Fatal("bad case: buddy differs from go-sdk without a why")
			}
			if !slices.Equal(blogs, want.logs) {
				t.Errorf("buddy logged %q, want %q", blogs, want.logs)
			}
			if want.kind == nil {
				if err != nil {
					t.Fatalf("buddy: %v (%T); want success with output %s", err, err, shorten(want.out))
				}
				if !bytes.Equal(res.Output, want.out) {
					t.Fatalf("buddy output %s\nwant %s\n%s", shorten(res.Output), shorten(want.out), firstDiff(res.Output, want.out))
				}
				return
			}
			if err == nil {
				t.Fatalf("buddy succeeded with output %s; want %v (%s)", shorten(res.Output), want.kind, c.why)
			}
			if !errors.Is(err, want.kind) {
				t.Fatalf("buddy: %v (%T); want kind %v", err, err, want.kind)
			}
			var se *runtime.SkillError
			if errors.As(err, &se) {
				if se.Code != want.code || se.Message != want.msg {
					t.Fatalf("buddy: SkillError code %d message %q; want code %d message %q", se.Code, se.Message, want.code, want.msg)
				}
			} else if !strings.Contains(err.Error(), want.msg) {
				t.Fatalf("buddy: %v; want it to mention %q", err, want.msg)
			}
		})
	}
}

// shorten shows up to 200 bytes of b.
func shorten(b []byte) string {
	if len(b) > 200 {
		return fmt.Sprintf("%q… (%d bytes)", b[:200], len(b))
	}
	return strconv.Quote(string(b))
}

// firstDiff locates where two outputs part: the byte offset, and for a
// transcript the u64 slot it falls in.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	if i == len(got) && i == len(want) {
		return "outputs equal"
	}
	return fmt.Sprintf("first difference at byte %d (u64 slot %d, if a transcript of words); lengths %d and %d", i, i/8, len(got), len(want))
}
