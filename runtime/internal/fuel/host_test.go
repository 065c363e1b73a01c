package fuel

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// meter is the host side of buddy:fuel (docs/RATIONALE.md, "The host's side of the contract"):
// it keeps the total granted, computes consumed = granted - fuel at every
// refuel and settle, fails once consumed > budget, and otherwise grants
// min(chunk, budget-granted), or the deficit if that is more, so that refuel
// never returns a negative fuel.
type meter struct {
	budget, chunk int64

	granted  int64
	refuels  int
	settles  []int64 // consumed at each settle
	ooms     int
	maxSeen  int64 // highest consumed seen at a refuel
	lastFuel int64
}

// exhausted is the typed panic value of a refuel past the budget.
type exhausted struct{ consumed, budget int64 }

func (e *exhausted) Error() string {
	return fmt.Sprintf("fuel exhausted: consumed %d of %d", e.consumed, e.budget)
}

type meterKey struct{}

func withMeter(ctx context.Context, m *meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

func meterOf(ctx context.Context) *meter {
	m, _ := ctx.Value(meterKey{}).(*meter)
	return m
}

func (m *meter) refuel(fuel int64) int64 {
	m.refuels++
	m.lastFuel = fuel
	consumed := m.granted - fuel
	if consumed > m.maxSeen {
		m.maxSeen = consumed
	}
	if consumed > m.budget {
		panic(&exhausted{consumed: consumed, budget: m.budget})
	}
	// Grant a chunk, never past the budget, and at least the deficit: refuel
	// must return fuel >= 0 (consumed <= budget, so granted stays <= budget).
	g := min(m.chunk, m.budget-m.granted)
	if fuel+g < 0 {
		g = -fuel
	}
	m.granted += g
	return fuel + g
}

// consumed is what the last settle reported.
func (m *meter) consumed() int64 {
	if len(m.settles) == 0 {
		return -1
	}
	return m.settles[len(m.settles)-1]
}

// instantiateFuelHost links the buddy:fuel host module into r. Calls made
// without a meter in ctx get unlimited fuel.
func instantiateFuelHost(ctx context.Context, r wazero.Runtime) error {
	_, err := r.NewHostModuleBuilder(Module).
		NewFunctionBuilder().WithFunc(func(ctx context.Context, fuel int64) int64 {
		if m := meterOf(ctx); m != nil {
			return m.refuel(fuel)
		}
		return fuel + 1<<50
	}).Export(RefuelName).
		NewFunctionBuilder().WithFunc(func(ctx context.Context, fuel int64) {
		if m := meterOf(ctx); m != nil {
			m.settles = append(m.settles, m.granted-fuel)
		}
	}).Export(SettleName).
		NewFunctionBuilder().WithFunc(func(ctx context.Context) {
		if m := meterOf(ctx); m != nil {
			m.ooms++
		}
	}).Export(OOMName).
		Instantiate(ctx)
	return err
}

// engines are the wazero engines tests run on.
var engines = []struct {
	name string
	cfg  func() wazero.RuntimeConfig
}{
	{"compiler", wazero.NewRuntimeConfigCompiler},
	{"interpreter", wazero.NewRuntimeConfigInterpreter},
}

// newRuntime returns a wazero runtime with the fuel host linked.
func newRuntime(t testing.TB, cfg wazero.RuntimeConfig) (context.Context, wazero.Runtime) {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, cfg.WithCoreFeatures(api.CoreFeaturesV2))
	t.Cleanup(func() { r.Close(ctx) })
	if err := instantiateFuelHost(ctx, r); err != nil {
		t.Fatal(err)
	}
	return ctx, r
}

// mustInstrument instruments wasm and fails the test on error.
func mustInstrument(t testing.TB, wasm []byte, opts Options) []byte {
	t.Helper()
	out, _, err := Instrument(wasm, opts)
	if err != nil {
		t.Fatalf("Instrument: %v", err)
	}
	return out
}

// fixture is an instrumented module compiled once; run gives every call a
// fresh instance (the fuel global persists across calls of one instance, so a
// fresh meter needs a fresh instance).
type fixture struct {
	ctx context.Context
	r   wazero.Runtime
	cm  wazero.CompiledModule
}

func newFixture(t testing.TB, cfg wazero.RuntimeConfig, wasm []byte, opts Options) *fixture {
	t.Helper()
	ctx, r := newRuntime(t, cfg)
	cm, err := r.CompileModule(ctx, mustInstrument(t, wasm, opts))
	if err != nil {
		t.Fatalf("compiling instrumented module: %v", err)
	}
	return &fixture{ctx: ctx, r: r, cm: cm}
}

// run calls export name on a fresh instance with a fresh meter.
func (f *fixture) run(name string, budget, chunk int64, args ...uint64) (*meter, []uint64, error) {
	m := &meter{budget: budget, chunk: chunk}
	ctx := withMeter(f.ctx, m)
	mod, err := f.r.InstantiateModule(ctx, f.cm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		return m, nil, err
	}
	defer mod.Close(ctx)
	fn := mod.ExportedFunction(name)
	if fn == nil {
		return m, nil, fmt.Errorf("no export %q", name)
	}
	res, err := fn.Call(ctx, args...)
	maskResults(fn.Definition().ResultTypes(), res)
	return m, res, err
}

// maskResults clears the undefined upper bits of 32-bit results.
func maskResults(types []api.ValueType, res []uint64) {
	for i, t := range types {
		if i < len(res) && (t == api.ValueTypeI32 || t == api.ValueTypeF32) {
			res[i] = uint64(uint32(res[i]))
		}
	}
}

// exhaustedIn returns the exhausted panic value in err, if any.
func exhaustedIn(err error) *exhausted {
	var e *exhausted
	if errors.As(err, &e) {
		return e
	}
	return nil
}
