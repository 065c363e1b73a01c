// Command noop is a built-in's trivial call: a TinyGo module built through
// skillkit exactly as builtins-src/ are (scripts/build-fixtures.sh uses
// scripts/build-builtins.sh's target and flags), which decodes its input
// {"path": ...} without reflection and answers it back, {"path": ...}: the
// echo's work, done the way a built-in does it. BenchmarkCallLatency/ratio
// times it against runtime/testdata/echo.wasm.
package main

import "github.com/buddy-run/buddy/skillkit"

type input struct {
	Path string `json:"path"`
}

// JSONFields lets skillkit decode the input without reflection.
func (in *input) JSONFields() []skillkit.Field {
	return []skillkit.Field{skillkit.StringField("path", &in.Path)}
}

//go:wasmexport run
func run() int32 {
	return skillkit.HandleFields(func(in input) (skillkit.RawJSON, error) {
		var o skillkit.Object
		o.String("path", in.Path)
		return o.JSON(), nil
	})
}

func main() {}
