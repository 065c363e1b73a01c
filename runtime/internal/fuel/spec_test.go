package fuel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// The WebAssembly spec test suite as wazero v1.12.0 ships it (wast2json
// output, in the module cache once wazero is downloaded), run with every
// module instrumented.
//
// For each file: every "module" is instrumented (start sections allowed, as
// the suite has them) and instantiated; assert_return, action, assert_trap and
// assert_exhaustion run against the instrumented module with unlimited fuel
// and compare exactly as the spec says (NaN classes included); every
// successful call of an export must settle; assert_invalid and binary
// assert_malformed modules must be refused by Instrument or by wazero's
// compile of the output; assert_unlinkable and assert_uninstantiable modules
// must fail to instantiate after instrumenting.

// specOptions: start sections allowed, every import costs 1 so that
// imported functions in tables go through thunks, and linked modules may call
// each other back.
var specOptions = Options{allowStart: true, ImportCost: func(string, string) int64 { return 1 }, ReentrantImports: true}

// refusedSpecFiles lists spec files that exercise features refused on
// purpose, with the reason. The v1 and v2 suites use none of them (the start
// sections of start.wast are accepted through Options.allowStart).
var refusedSpecFiles = map[string]string{}

var wazeroDirOnce = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/tetratelabs/wazero").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/tetratelabs/wazero: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New("wazero module not downloaded")
	}
	return dir, nil
})

// spectestDir returns wazero's spectest directory, or skips.
func spectestDir(t testing.TB) string {
	dir, err := wazeroDirOnce()
	if err != nil {
		t.Skipf("wazero source not found: %v", err)
	}
	d := filepath.Join(dir, "internal", "integration_test", "spectest")
	if _, err := os.Stat(d); err != nil {
		t.Skipf("wazero spectest data not found: %v", err)
	}
	return d
}

type specScript struct {
	SourceFilename string        `json:"source_filename"`
	Commands       []specCommand `json:"commands"`
}

type specCommand struct {
	Type       string      `json:"type"`
	Line       int         `json:"line"`
	Name       string      `json:"name"`
	Filename   string      `json:"filename"`
	As         string      `json:"as"`
	Action     specAction  `json:"action"`
	Expected   []specValue `json:"expected"`
	ModuleType string      `json:"module_type"`
	Text       string      `json:"text"`
}

type specAction struct {
	Type   string      `json:"type"`
	Module string      `json:"module"`
	Field  string      `json:"field"`
	Args   []specValue `json:"args"`
}

type specValue struct {
	Type     string `json:"type"`
	LaneType string `json:"lane_type"`
	Value    any    `json:"value"`
}

// specStats counts what the spec run checked.
var specStats struct {
	modules, calls, traps, refusedByUs, refusedByWazero, notInstantiable atomic.Int64
}

func TestSpec(t *testing.T) {
	dir := spectestDir(t)
	t.Cleanup(func() {
		s := &specStats
		t.Logf("instrumented %d modules; %d calls returned as expected, %d trapped as expected; "+
			"of the invalid/malformed binaries %d were refused by Instrument and %d by wazero after instrumenting; "+
			"%d unlinkable/uninstantiable",
			s.modules.Load(), s.calls.Load(), s.traps.Load(), s.refusedByUs.Load(), s.refusedByWazero.Load(),
			s.notInstantiable.Load())
		if s.modules.Load() < 2000 || s.calls.Load() < 50000 {
			t.Errorf("the spec run checked too little")
		}
	})
	cfg := wazero.NewRuntimeConfigCompiler
	if raceEnabled || testing.Short() {
		// The compiler engine under -race takes minutes; validation and
		// semantics are the same on the interpreter.
		cfg = wazero.NewRuntimeConfigInterpreter
	}
	spectestWasm, err := os.ReadFile(filepath.Join(dir, "testdata", "spectest.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name     string
		features api.CoreFeatures
	}{
		{"v1", api.CoreFeaturesV1},
		{"v2", api.CoreFeaturesV2},
	} {
		files, err := filepath.Glob(filepath.Join(dir, v.name, "testdata", "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no spec files in %s: %v", dir, err)
		}
		for _, f := range files {
			base := strings.TrimSuffix(filepath.Base(f), ".json")
			t.Run(v.name+"/"+base, func(t *testing.T) {
				if why, ok := refusedSpecFiles[base]; ok {
					t.Skipf("refused on purpose: %s", why)
				}
				t.Parallel()
				runSpecFile(t, f, cfg().WithCoreFeatures(v.features), spectestWasm)
			})
		}
	}
}

type specRunner struct {
	t        *testing.T
	dir      string
	ctx      context.Context
	r        wazero.Runtime
	mt       *meter
	modules  map[string]api.Module
	last     api.Module
	lastBad  bool // the last module failed; skip what uses it
	features api.CoreFeatures
}

func runSpecFile(t *testing.T, path string, cfg wazero.RuntimeConfig, spectestWasm []byte) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var script specScript
	if err := json.Unmarshal(raw, &script); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	defer r.Close(ctx)
	if err := instantiateFuelHost(ctx, r); err != nil {
		t.Fatal(err)
	}
	// Unlimited fuel; the meter counts settles.
	mt := &meter{budget: unlimited, chunk: 1 << 40}
	ctx = withMeter(ctx, mt)
	sr := &specRunner{t: t, dir: filepath.Dir(path), ctx: ctx, r: r, mt: mt, modules: map[string]api.Module{}}
	if _, err := r.InstantiateWithConfig(ctx, mustInstrument(t, spectestWasm, specOptions),
		wazero.NewModuleConfig().WithName("spectest")); err != nil {
		t.Fatal(err)
	}
	cmds := script.Commands
	for i := 0; i < len(cmds); i++ {
		c := &cmds[i]
		where := fmt.Sprintf("%s:%d %s", filepath.Base(script.SourceFilename), c.Line, c.Type)
		switch c.Type {
		case "module":
			name := ""
			if i+1 < len(cmds) && cmds[i+1].Type == "register" {
				name = cmds[i+1].As
				i++
			}
			sr.module(where, c, name)
		case "register":
			t.Errorf("%s: register not right after its module", where)
		case "assert_return", "action":
			sr.assertReturn(where, c)
		case "assert_trap", "assert_exhaustion":
			sr.assertTrap(where, c)
		case "assert_invalid", "assert_malformed":
			if c.ModuleType == "text" {
				continue // no text format parser
			}
			sr.assertRefused(where, c)
		case "assert_unlinkable", "assert_uninstantiable":
			sr.assertNotInstantiable(where, c)
		default:
			t.Errorf("%s: unknown command", where)
		}
	}
}

func (sr *specRunner) read(where, file string) []byte {
	b, err := os.ReadFile(filepath.Join(sr.dir, file))
	if err != nil {
		sr.t.Fatalf("%s: %v", where, err)
	}
	return b
}

func (sr *specRunner) module(where string, c *specCommand, name string) {
	sr.last, sr.lastBad = nil, true
	out, _, err := Instrument(sr.read(where, c.Filename), specOptions)
	if err != nil {
		sr.t.Errorf("%s: Instrument: %v", where, err)
		return
	}
	mod, err := sr.r.InstantiateWithConfig(sr.ctx, out, wazero.NewModuleConfig().WithName(name))
	if err != nil {
		sr.t.Errorf("%s: instantiating the instrumented module: %v", where, err)
		return
	}
	sr.last, sr.lastBad = mod, false
	specStats.modules.Add(1)
	if c.Name != "" {
		sr.modules[c.Name] = mod
	}
}

func (sr *specRunner) target(c *specCommand) api.Module {
	if c.Action.Module != "" {
		return sr.modules[c.Action.Module]
	}
	return sr.last
}

func (sr *specRunner) invoke(where string, c *specCommand) (api.Function, []uint64, error, bool) {
	m := sr.target(c)
	if m == nil {
		if !sr.lastBad {
			sr.t.Errorf("%s: no module", where)
		}
		return nil, nil, nil, false
	}
	fn := m.ExportedFunction(c.Action.Field)
	if fn == nil {
		sr.t.Errorf("%s: no exported function %q", where, c.Action.Field)
		return nil, nil, nil, false
	}
	var args []uint64
	for _, a := range c.Action.Args {
		v, err := a.uint64s()
		if err != nil {
			sr.t.Fatalf("%s: arg: %v", where, err)
		}
		args = append(args, v...)
	}
	before := len(sr.mt.settles)
	res, err := fn.Call(sr.ctx, args...)
	// Calls into other (instrumented) modules settle there too.
	if err == nil && len(sr.mt.settles) <= before {
		sr.t.Errorf("%s: %s returned but did not settle", where, c.Action.Field)
	}
	return fn, res, err, true
}

func (sr *specRunner) assertReturn(where string, c *specCommand) {
	switch c.Action.Type {
	case "invoke":
		_, res, err, ok := sr.invoke(where, c)
		if !ok {
			return
		}
		if err != nil {
			sr.t.Errorf("%s: invoke %s: %v", where, c.Action.Field, err)
			return
		}
		if msg := compareResults(res, c.Expected); msg != "" {
			sr.t.Errorf("%s: invoke %s%v: %s", where, c.Action.Field, c.Action.Args, msg)
		} else {
			specStats.calls.Add(1)
		}
	case "get":
		m := sr.target(c)
		if m == nil {
			return
		}
		g := m.ExportedGlobal(c.Action.Field)
		if g == nil {
			sr.t.Errorf("%s: no exported global %q", where, c.Action.Field)
			return
		}
		if msg := compareResults([]uint64{g.Get()}, c.Expected); msg != "" {
			sr.t.Errorf("%s: get %s: %s", where, c.Action.Field, msg)
		}
	default:
		sr.t.Errorf("%s: unknown action %q", where, c.Action.Type)
	}
}

// trapText maps the spec's trap messages to wazero's.
func trapText(c *specCommand) string {
	if c.Type == "assert_exhaustion" {
		return "stack overflow"
	}
	switch t := c.Text; {
	case t == "indirect call type mismatch", t == "indirect call":
		return "indirect call type mismatch"
	case t == "undefined element", t == "undefined", t == "out of bounds table access",
		strings.HasPrefix(t, "uninitialized"):
		return "invalid table access"
	case t == "out of bounds memory access", t == "integer overflow", t == "integer divide by zero",
		t == "invalid conversion to integer", t == "unreachable":
		return t
	}
	return ""
}

func (sr *specRunner) assertTrap(where string, c *specCommand) {
	want := trapText(c)
	if want == "" {
		sr.t.Errorf("%s: unmapped trap text %q", where, c.Text)
		return
	}
	_, _, err, ok := sr.invoke(where, c)
	if !ok {
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		sr.t.Errorf("%s: invoke %s%v: got %v, want trap %q", where, c.Action.Field, c.Action.Args, err, want)
	} else {
		specStats.traps.Add(1)
	}
}

func (sr *specRunner) assertRefused(where string, c *specCommand) {
	orig := sr.read(where, c.Filename)
	out, _, err := Instrument(orig, specOptions)
	if err != nil {
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) &&
			!errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrMemoryLimit) {
			sr.t.Errorf("%s: Instrument error does not wrap a sentinel: %v", where, err)
		}
		specStats.refusedByUs.Add(1)
		return
	}
	cm, err := sr.r.CompileModule(sr.ctx, out)
	if err != nil {
		specStats.refusedByWazero.Add(1)
		return
	}
	cm.Close(sr.ctx)
	// The output compiles: only acceptable if wazero accepts the original too
	// (a wazero leniency, not something instrumenting made valid).
	if cm, err := sr.r.CompileModule(sr.ctx, orig); err == nil {
		cm.Close(sr.ctx)
		sr.t.Logf("%s: wazero accepts the original %s too (%s)", where, c.Filename, c.Text)
		return
	}
	sr.t.Errorf("%s: %s (%s) is refused by wazero but accepted after instrumenting", where, c.Filename, c.Text)
}

func (sr *specRunner) assertNotInstantiable(where string, c *specCommand) {
	out, _, err := Instrument(sr.read(where, c.Filename), specOptions)
	if err != nil {
		if c.Type == "assert_uninstantiable" {
			sr.t.Errorf("%s: Instrument: %v", where, err)
		}
		return
	}
	mod, err := sr.r.InstantiateWithConfig(sr.ctx, out, wazero.NewModuleConfig())
	if c.Type == "assert_uninstantiable" && c.Text == "out of bounds table access" {
		// wazero keeps such modules (element segment past the table after
		// instantiation), as its own spectest runner documents.
		if err != nil {
			sr.t.Errorf("%s: %v", where, err)
		}
		return
	}
	if err == nil {
		mod.Close(sr.ctx)
		sr.t.Errorf("%s: %s instantiated, want failure (%s)", where, c.Filename, c.Text)
		return
	}
	specStats.notInstantiable.Add(1)
}

// Values.

func (v specValue) str() (string, bool) {
	s, ok := v.Value.(string)
	return s, ok
}

func parseBits(s string, bits int) (uint64, error) {
	if strings.HasPrefix(s, "-") {
		x, err := strconv.ParseInt(s, 10, bits)
		return uint64(x) & (1<<bits - 1), err
	}
	if bits == 64 {
		return strconv.ParseUint(s, 10, 64)
	}
	return strconv.ParseUint(s, 10, bits)
}

// nan placeholders used for expected values only.
const (
	nanCanonical  = "nan:canonical"
	nanArithmetic = "nan:arithmetic"
)

func (v specValue) uint64s() ([]uint64, error) {
	switch v.Type {
	case "i32", "f32":
		s, _ := v.str()
		x, err := parseBits(s, 32)
		return []uint64{x}, err
	case "i64", "f64":
		s, _ := v.str()
		x, err := parseBits(s, 64)
		return []uint64{x}, err
	case "externref":
		s, _ := v.str()
		if s == "null" {
			return []uint64{0}, nil
		}
		x, err := strconv.ParseUint(s, 10, 64)
		return []uint64{x + 1}, err // wazero's externref 0 is null
	case "funcref":
		return []uint64{0}, nil
	case "v128":
		lanes, ok := v.Value.([]any)
		if !ok {
			return nil, fmt.Errorf("v128 value %v", v.Value)
		}
		width := laneWidth(v.LaneType)
		if width == 0 || len(lanes)*width != 128 {
			return nil, fmt.Errorf("v128 lanes %s x %d", v.LaneType, len(lanes))
		}
		var lo, hi uint64
		for i, l := range lanes {
			s, _ := l.(string)
			x, err := parseBits(s, width)
			if err != nil {
				return nil, err
			}
			bit := i * width
			if bit < 64 {
				lo |= x << bit
			} else {
				hi |= x << (bit - 64)
			}
		}
		return []uint64{lo, hi}, nil
	}
	return nil, fmt.Errorf("unknown value type %q", v.Type)
}

func laneWidth(lt string) int {
	switch lt {
	case "i8":
		return 8
	case "i16":
		return 16
	case "i32", "f32":
		return 32
	case "i64", "f64":
		return 64
	}
	return 0
}

// floatMatches compares one float of width 32 or 64 bits against its
// expectation: an exact bit pattern, any NaN for a NaN literal, or a NaN class.
func floatMatches(want string, got uint64, width int) (bool, error) {
	var quiet, expMask uint64
	if width == 32 {
		got &= 0xffffffff
		quiet, expMask = 0x7fc00000, 0x7f800000
	} else {
		quiet, expMask = 0x7ff8000000000000, 0x7ff0000000000000
	}
	signMask := uint64(1) << (width - 1)
	switch want {
	case nanCanonical:
		return got&^signMask == quiet, nil
	case nanArithmetic:
		return got&quiet == quiet, nil
	}
	x, err := parseBits(want, width)
	if err != nil {
		return false, err
	}
	// NaN: all exponent bits set and a non-zero mantissa.
	mant := quiet<<1 - 1&^expMask&^signMask
	isNaN := func(b uint64) bool { return b&expMask == expMask && b&mant != 0 }
	if isNaN(x) {
		return isNaN(got), nil
	}
	return got == x, nil
}

// compareResults returns "" if res matches the expectations.
func compareResults(res []uint64, exps []specValue) string {
	pos := 0
	for i, e := range exps {
		n := 1
		if e.Type == "v128" {
			n = 2
		}
		if pos+n > len(res) {
			return fmt.Sprintf("got %d values, want %d expectations", len(res), len(exps))
		}
		got := res[pos : pos+n]
		pos += n
		if e.Value == nil { // any reference
			continue
		}
		ok, err := valueMatches(e, got)
		if err != nil {
			return err.Error()
		}
		if !ok {
			return fmt.Sprintf("result %d: got %#x, want %s %v", i, got, e.Type, e.Value)
		}
	}
	if pos != len(res) {
		return fmt.Sprintf("got %d values, want %d", len(res), pos)
	}
	return ""
}

func valueMatches(e specValue, got []uint64) (bool, error) {
	switch e.Type {
	case "f32", "f64":
		s, _ := e.str()
		w := 32
		if e.Type == "f64" {
			w = 64
		}
		return floatMatches(s, got[0], w)
	case "v128":
		lanes, ok := e.Value.([]any)
		if !ok {
			return false, fmt.Errorf("v128 expectation %v", e.Value)
		}
		w := laneWidth(e.LaneType)
		if w == 0 || len(lanes)*w != 128 {
			return false, fmt.Errorf("v128 lanes %s x %d", e.LaneType, len(lanes))
		}
		for i, l := range lanes {
			s, _ := l.(string)
			bit := i * w
			word := got[bit/64] >> (bit % 64)
			if w < 64 {
				word &= 1<<w - 1
			}
			if e.LaneType == "f32" || e.LaneType == "f64" {
				if ok, err := floatMatches(s, word, w); err != nil || !ok {
					return false, err
				}
				continue
			}
			x, err := parseBits(s, w)
			if err != nil {
				return false, err
			}
			if x != word {
				return false, nil
			}
		}
		return true, nil
	case "i32":
		want, err := e.uint64s()
		return err == nil && uint32(got[0]) == uint32(want[0]), err
	default:
		want, err := e.uint64s()
		return err == nil && got[0] == want[0], err
	}
}
