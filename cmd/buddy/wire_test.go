package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/config"
)

// TestOneGate: the approval gate is built in one place, env.newGate in
// wire.go. A front end (serve, mcp, skill run, the WebSocket server, MCP,
// the agent, channels and schedulers to come) that builds its own gate — and
// could leave out the audit log, the guard or the state — fails here.
func TestOneGate(t *testing.T) {
	root := filepath.Join("..", "..")
	const approvalPkg = "github.com/buddy-run/buddy/internal/approval"
	var sites []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if strings.HasPrefix(filepath.ToSlash(rel), "internal/approval/") {
			return nil // the gate's own package
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		local := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == approvalPkg {
				local = "approval"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && (sel.Sel.Name == "New" || sel.Sel.Name == "NewGate") {
				sites = append(sites, filepath.ToSlash(rel)+": "+local+"."+sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"cmd/buddy/wire.go: approval.New"}; !slices.Equal(sites, want) {
		t.Fatalf("gates are built at %v; want only %v (env.newGate)", sites, want)
	}
}

// TestRestartKeys: every key of every section of buddy.toml is either
// applied by a reload (SIGHUP) or named by it as needing a restart — never
// silently ignored — and the key names are buddy.toml's own (each appears in
// buddy.example.toml).
func TestRestartKeys(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "..", "buddy.example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	forEachKey(func(key string, get func(*config.Config) reflect.Value) {
		n++
		base := config.Default()
		changed := config.Default()
		if !perturb(get(changed)) {
			t.Errorf("%s: cannot change a %s in the test", key, get(changed).Type())
			return
		}
		got := restartKeys(base, changed)
		live := slices.Contains(liveKeys, key)
		switch {
		case live && len(got) != 0:
			t.Errorf("%s is applied by a reload, yet reported as needing a restart: %v", key, got)
		case !live && !slices.Equal(got, []string{key}):
			t.Errorf("changing %s: restartKeys = %v, want [%s]", key, got, key)
		}
		sec, name, _ := strings.Cut(key, ".")
		if !regexp.MustCompile(`(?ms)^#?\s*\[` + sec + `\]$.*?^#?\s*` + name + `\s*=`).Match(example) {
			t.Errorf("%s is not a key of buddy.example.toml's [%s]", name, sec)
		}
	})
	if n < 30 {
		t.Fatalf("only %d keys enumerated", n)
	}
	for _, k := range liveKeys {
		found := false
		forEachKey(func(key string, _ func(*config.Config) reflect.Value) { found = found || key == k })
		if !found {
			t.Errorf("liveKeys names %s, which is no key", k)
		}
	}
}

// perturb changes v to another value.
func perturb(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		if v.Type() == reflect.TypeFor[time.Duration]() {
			v.SetInt(v.Int() + int64(time.Second))
		} else {
			v.SetInt(v.Int() + 1)
		}
	case reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.ValueOf("x")))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if !perturb(p.Elem()) {
			return false
		}
		v.Set(p)
	default:
		return false
	}
	return true
}
