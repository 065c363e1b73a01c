package fuel

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// corpus returns small modules that exercise most of the rewrite: loops,
// calls, imports, tables and every element form, memory and bulk ops, globals,
// multi-value, SIMD, names.
func corpus() [][]byte {
	var out [][]byte
	m := &wmod{}
	h := m.importFunc("env", "h", ft(vt(I32), vt(I32)))
	m.importGlobal("env", "g", I32, false)
	m.memory(1, 2)
	m.table(4)
	m.exportFunc("loop", countingLoop(m))
	m.exportFunc("fib", fib(m))
	m.exportFunc("tree", callTree(m, 3))
	retT := ft(nil, vt(I32))
	a := m.fn(retT, nil, i32c(1))
	b := m.fn(retT, nil, i32c(2), call(h))
	m.elemFuncs(0, a, b)
	m.elems = append(m.elems, asm(5, FuncRef, 1, refFunc(a), opEnd), asm(3, 0, 1, appendU32(nil, b)))
	m.global(FuncRef, false, refFunc(a))
	m.global(I64, true, i64c(-1))
	m.exportFunc("bulk", m.fn(ft(vt(I32), vt(I32)), nil,
		i32c(0), i32c(1), lget(0), memoryFill,
		i32c(0), i32c(0), lget(0), memoryCopy,
		lget(0), opMemoryGrow, 0,
		i32c(0), 0xd0, FuncRef, lget(0), misc(17, 0),
		i32c(0), i32c(0), i32c(1), misc(12, 0, 0), misc(13, 0),
		i32c(0), callIndirect(m.typ(retT)), opI32Add,
		refFunc(b), opDrop, gget(0), opI32Add))
	m.exportFunc("simd", m.fn(ft(nil, vt(I32)), nil,
		0xfd, 12, make([]byte, 16), // v128.const 0
		i32c(1), 0xfd, 17, // i32x4.splat
		0xfd, 0xae, 1, // i32x4.add
		0xfd, 27, 2, // i32x4.extract_lane 2
		i32c(0), 0xfd, 0, 4, 0, 0xfd, 0x63, opDrop)) // v128.load; i8x16.all_true
	mv := m.typ(ft(vt(I32), vt(I32, I32)))
	m.exportFunc("mv", m.fn(ft(vt(I32), vt(I32)), nil,
		lget(0), opBlock, byte(mv), opLoop, byte(mv), lget(0), opEnd, opEnd,
		opI32Add, opBlock, I32, lget(0), lget(0), brIf(1), opEnd, opI32Add, i32c(2), opI32Mul))
	m.exportFunc("h", h)
	m.data(0, []byte("hello"))
	m.dataCount = true
	m.customs = []wcustom{{"name", nameSectionPayload(map[uint32]string{0: "h", 2: "loop"}, nil, true)}}
	out = append(out, m.bytes())

	m = &wmod{}
	m.exportFunc("f", m.fn(ft(nil, nil), nil))
	out = append(out, m.bytes(), (&wmod{}).bytes())
	return out
}

// specSeeds returns up to n small modules from wazero's spec suite, if it is
// in the module cache.
func specSeeds(t testing.TB, n int) [][]byte {
	dir, err := wazeroDirOnce()
	if err != nil {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(dir, "internal", "integration_test", "spectest", "v2", "testdata", "*.wasm"))
	var out [][]byte
	for i := 0; i < len(files) && len(out) < n; i += max(1, len(files)/n) {
		b, err := os.ReadFile(files[i])
		if err == nil && len(b) < 4096 {
			out = append(out, b)
		}
	}
	return out
}

// fuzzRuntime compiles without DWARF: with it, wazero v1.12.0 refuses a valid
// module whose last section is a custom section with an empty payload
// (bytes.Reader.Read of zero bytes at EOF returns io.EOF in
// decodeCustomSection), and accepts the same section anywhere else.
var fuzzRuntime = sync.OnceValue(func() wazero.Runtime {
	return wazero.NewRuntimeWithConfig(context.Background(),
		wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(api.CoreFeaturesV2).WithDebugInfoEnabled(false))
})

func compiles(wasm []byte) error {
	ctx := context.Background()
	cm, err := fuzzRuntime().CompileModule(ctx, wasm)
	if err == nil {
		cm.Close(ctx)
	}
	return err
}

// checkInstrument is the fuzz property: Instrument and Inspect never panic;
// errors wrap a sentinel; what Instrument accepts Inspect accepts; a module
// wazero accepts stays accepted after instrumenting and one it refuses stays
// refused (the rewrite never makes an invalid module valid); the output
// cannot be instrumented again (it imports buddy:fuel).
func checkInstrument(t *testing.T, wasm []byte) {
	out, info, err := Instrument(wasm, Options{
		ImportCost:   func(string, string) int64 { return 3 },
		GrowPageCost: 5,
	})
	_, inspectErr := Inspect(wasm)
	if err != nil {
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		return
	}
	if inspectErr != nil {
		t.Fatalf("Instrument accepts what Inspect refuses: %v", inspectErr)
	}
	if info == nil {
		t.Fatal("nil Info")
	}
	origErr, outErr := compiles(wasm), compiles(out)
	if origErr == nil && outErr != nil {
		t.Fatalf("wazero accepts the original but not the output: %v", outErr)
	}
	if origErr != nil && outErr == nil {
		t.Fatalf("instrumenting made an invalid module valid (%v)", origErr)
	}
	if _, _, err := Instrument(out, Options{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("re-instrumenting the output: %v, want ErrUnsupported", err)
	}
}

func FuzzInstrument(f *testing.F) {
	for _, b := range corpus() {
		f.Add(b)
	}
	for _, b := range specSeeds(f, 40) {
		f.Add(b)
	}
	f.Fuzz(checkInstrument)
}

// TestMutatedModules runs the fuzz property on deterministic random mutations
// of the corpus, so plain `go test` covers it too.
func TestMutatedModules(t *testing.T) {
	for i, s := range corpus() {
		if err := compiles(s); err != nil {
			t.Errorf("corpus module %d is invalid: %v", i, err)
		}
	}
	seeds := append(corpus(), specSeeds(t, 40)...)
	for _, s := range seeds {
		checkInstrument(t, s)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 4000
	if testing.Short() || raceEnabled {
		n = 500
	}
	accepted := 0
	for i := 0; i < n; i++ {
		b := append([]byte(nil), seeds[rng.IntN(len(seeds))]...)
		for k := 1 + rng.IntN(4); k > 0; k-- {
			switch p := rng.IntN(len(b)); rng.IntN(4) {
			case 0:
				b[p] = byte(rng.IntN(256))
			case 1:
				b[p] ^= 1 << rng.IntN(8)
			case 2:
				b = append(b[:p], b[p+1:]...)
			case 3:
				b = append(b[:p], append([]byte{byte(rng.IntN(256))}, b[p:]...)...)
			}
			if len(b) == 0 {
				break
			}
		}
		if _, _, err := Instrument(b, Options{}); err == nil {
			accepted++
		}
		checkInstrument(t, b)
		if t.Failed() {
			t.Fatalf("mutation %d: % x", i, b)
		}
	}
	t.Logf("%d of %d mutations instrumented", accepted, n)
}
