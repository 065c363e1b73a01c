package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/buddy-run/buddy/runtime"
)

// A module is compiled once and called in a fresh sandbox every time: the
// counter fixture increments a global and prints it, and prints 1 on every
// call. A loop with no way out ends with a typed error once its fuel is gone.
func Example() {
	ctx := context.Background()
	cache, _ := os.MkdirTemp("", "buddy-example-")
	defer os.RemoveAll(cache)
	rt, err := runtime.New(ctx, runtime.Options{CacheDir: filepath.Join(cache, "cache")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close(ctx)

	load := func(name string, m *runtime.Manifest) *runtime.Module {
		wasm, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
		if err != nil {
			panic(err)
		}
		mod, err := rt.Load(ctx, wasm, runtime.Spec{Name: name, Manifest: m})
		if err != nil {
			panic(err)
		}
		return mod
	}

	echo := load("echo", nil)
	res, _ := echo.Call(ctx, []byte("hello"))
	fmt.Println(string(res.Output))

	counter := load("counter", nil)
	var outs []string
	for range 3 {
		res, _ := counter.Call(ctx, nil)
		outs = append(outs, string(res.Output))
	}
	fmt.Println(strings.Join(outs, " "))

	m := runtime.DefaultManifest("spin")
	m.Resources.Fuel = 10_000
	_, err = load("spin", m).Call(ctx, nil)
	fmt.Println(errors.Is(err, runtime.ErrFuelExhausted))
	// Output:
	// hello
	// 1 1 1
	// true
}
