package runtime_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/runtime"
)

// TestVarsRealPlugin: the Extism count_vowels demo, built with the real go-pdk
// and TinyGo, keeps a running total in a var. It runs unchanged, and the
// total starts over at every call.
func TestVarsRealPlugin(t *testing.T) {
	rt := newRuntime(t, runtime.Options{})
	for _, c := range []struct {
		entry, want string
	}{
		{"count_vowels", `{"count":3,"total":3}`},
		{"count_vowels_twice", `{"count":3,"total":6}`},
	} {
		mod := load(t, rt, "varsplugin/varsplugin.wasm", manifest(c.entry, nil), nil)
		for i := range 3 { // nothing survives a call: the same answer every time
			res, err := mod.Call(t.Context(), []byte("Hello, World"))
			if err != nil {
				t.Fatalf("%s call %d: %v", c.entry, i, err)
			}
			if string(res.Output) != c.want {
				t.Errorf("%s call %d: output %s, want %s", c.entry, i, res.Output, c.want)
			}
		}
	}
}

// TestVars: var_get/var_set per call, bounded, with clear errors.
func TestVars(t *testing.T) {
	rt := newRuntime(t, runtime.Options{})
	cases := []struct {
		name, entry string
		input       []byte
		want        string // output, when the call succeeds
		err         error
		msg         string
	}{
		{"roundtrip", "roundtrip", []byte("some value"), "some value", nil, ""},
		{"roundtrip at the cap", "roundtrip", make([]byte, 1<<20-1), strings.Repeat("\x00", 1<<20-1), nil, ""},
		{"value over the cap", "roundtrip", make([]byte, 1<<20), "", runtime.ErrTooLarge, "over the 1048576-byte cap"},
		{"value far over the cap", "roundtrip", make([]byte, 2<<20), "", runtime.ErrTooLarge, "cap of Extism vars"},
		{"per call", "count3", nil, string(binary.LittleEndian.AppendUint64(nil, 3)), nil, ""},
		{"delete", "delete", nil, "0", nil, ""},
		{"too many", "many", nil, "", runtime.ErrTooLarge, "at most 1024 Extism vars"},
		{"value alloc fails", "get_oom", nil, "", runtime.ErrMemoryLimit, "var_get: kernel memory cannot hold"},
		{"bad pointer", "bad_ptr", nil, "", runtime.ErrTrap, "var_set: name pointer"},
	}
	mods := map[string]*runtime.Module{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mod := mods[c.entry]
			if mod == nil {
				// The fixture copies its input a byte at a time (slow under -race).
				mod = load(t, rt, "hostcalls/vars.wasm", manifest(c.entry, func(r *runtime.Resources) { r.Timeout = time.Minute }), nil)
				mods[c.entry] = mod
			}
			calls := 1
			if c.entry == "count3" {
				calls = 3 // the count starts over at every call
			}
			for i := range calls {
				res, err := mod.Call(t.Context(), c.input)
				if c.err != nil {
					if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.msg) {
						t.Fatalf("err = %v (%T), want %v mentioning %q", err, err, c.err, c.msg)
					}
					continue
				}
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if string(res.Output) != c.want {
					t.Errorf("call %d: output %q, want %q", i, trunc(res.Output), trunc([]byte(c.want)))
				}
			}
		})
	}
}

// TestRedactVarsAndOutput: Options.Redact sees a var's value as the guest
// sets it, and the output as the guest hands it out.
func TestRedactVarsAndOutput(t *testing.T) {
	var seen []string
	rt := newRuntime(t, runtime.Options{Redact: func(b []byte) []byte {
		seen = append(seen, string(b))
		return []byte(strings.ReplaceAll(string(b), "hunter2-secret", "[secret:pw]"))
	}})
	mod := load(t, rt, "hostcalls/vars.wasm", manifest("roundtrip", nil), nil)
	res, err := mod.Call(t.Context(), []byte("pw=hunter2-secret"))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != "pw=[secret:pw]" {
		t.Errorf("output %q", res.Output)
	}
	if len(seen) != 2 || seen[0] != "pw=hunter2-secret" || seen[1] != "pw=[secret:pw]" {
		t.Errorf("Redact saw %q: want the var's value as set, then the output (the var already redacted)", seen)
	}
}
