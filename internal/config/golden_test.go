package config

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// TestGolden parses each testdata/*.toml and compares the outcome with the
// .golden file beside it: the field errors one per line, or the parsed
// configuration flattened to "key = value" lines. "{{dir}}" in an input stands
// for a temporary directory holding documents/, sandbox/, home/ and file.txt;
// $HOME is {{dir}}/home and $XDG_DATA_HOME is /xdg/data. Rewrite the golden
// files with `go test ./internal/config/ -run TestGolden -update`.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.toml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	dir := t.TempDir()
	mkdir(t, dir, "documents")
	mkdir(t, dir, "sandbox")
	home := mkdir(t, dir, "home")
	writeFile(t, dir, "file.txt", "x")
	t.Setenv("HOME", home)
	t.Setenv("XDG_DATA_HOME", "/xdg/data")

	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".toml")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			doc := strings.ReplaceAll(string(src), "{{dir}}", dir)
			var got string
			c, err := Parse([]byte(doc))
			if err != nil {
				var b strings.Builder
				for _, fe := range fieldErrors(t, err) {
					fmt.Fprintf(&b, "error: %s\n", fe.Error())
				}
				got = b.String()
			} else {
				got = flatten(c)
			}
			got = strings.ReplaceAll(got, dir, "{{dir}}")

			golden := strings.TrimSuffix(in, ".toml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from %s (run with -update to accept):\n--- got\n%s--- want\n%s", in, golden, got, want)
			}
		})
	}
}

// flatten renders a configuration as sorted "path = value" lines, with
// durations in Go syntax. MaxConcurrent depends on the machine and is left out
// when it is the default.
func flatten(c *Config) string {
	var lines []string
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		switch {
		case v.Type() == reflect.TypeFor[time.Duration]():
			lines = append(lines, fmt.Sprintf("%s = %s", prefix, time.Duration(v.Int())))
		case v.Kind() == reflect.Struct:
			for i := range v.NumField() {
				walk(strings.TrimPrefix(prefix+"."+v.Type().Field(i).Name, "."), v.Field(i))
			}
		case v.Kind() == reflect.Map:
			keys := v.MapKeys()
			slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
			if len(keys) == 0 {
				lines = append(lines, prefix+" = {}")
			}
			for _, k := range keys {
				walk(prefix+"."+k.String(), v.MapIndex(k))
			}
		case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
			lines = append(lines, fmt.Sprintf("%s = %q", prefix, v.Interface()))
		case v.Kind() == reflect.Slice:
			lines = append(lines, fmt.Sprintf("%s = %v", prefix, v.Interface()))
		case v.Kind() == reflect.String:
			lines = append(lines, fmt.Sprintf("%s = %q", prefix, v.String()))
		default:
			lines = append(lines, fmt.Sprintf("%s = %v", prefix, v.Interface()))
		}
	}
	walk("", reflect.ValueOf(*c))
	out := lines[:0]
	for _, l := range lines {
		if l == fmt.Sprintf("Limits.MaxConcurrent = %d", 2*runtimeProcs()) {
			l = "Limits.MaxConcurrent = <2×GOMAXPROCS>"
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n") + "\n"
}

func runtimeProcs() int { return goruntime.GOMAXPROCS(0) }
