package runtime_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// The fixtures in testdata (see testdata/README.md), with the facts about each
// that plain wazero can check without buddy's runtime.
type fixture struct {
	file    string
	invalid bool     // CompileModule must refuse it
	imports []string // every import, "module.name" (function imports unless noted)
	memMin  uint32   // minimum pages of the exported memory, when checked
	noLoop  bool     // the source has no loop instruction at all
	// compiled: built from Go source (testdata/tinygo/NAME), not from a .wat;
	// only the README's exports are checked (TinyGo adds its own).
	compiled bool
}

var env = func(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "extism:host/env." + n
	}
	return out
}

var fixtures = []fixture{
	{file: "echo.wasm", imports: env("input_length", "input_load_u8", "input_load_u64", "alloc", "store_u8", "store_u64", "output_set", "error_set")},
	{file: "counter.wasm", imports: env("alloc", "store_u8", "output_set")},
	{file: "spin.wasm"},
	{file: "recurse.wasm"},
	{file: "calltree.wasm", imports: env("alloc", "store_u8", "output_set"), noLoop: true},
	{file: "wide.wasm", imports: env("alloc", "store_u8", "output_set"), noLoop: true},
	{file: "grow.wasm", imports: env("alloc", "store_u8", "output_set")},
	{file: "fill.wasm"},
	{file: "output_huge.wasm", imports: env("alloc", "output_set")},
	{file: "alloc_spam.wasm", imports: env("alloc")},
	{file: "oob_kernel.wasm", imports: env("input_length", "input_load_u8", "input_load_u64", "alloc", "free",
		"length", "length_unsafe", "load_u8", "load_u64", "store_u8", "store_u64", "output_set", "error_set",
		"config_get", "var_get", "var_set", "log_info", "log_error")},
	{file: "oob_host.wasm", imports: append(env("input_length", "input_load_u8", "alloc", "load_u8", "store_u8", "store_u64", "output_set"),
		"buddy:host/v1.log", "buddy:host/v1.fs_read", "buddy:host/v1.fs_write", "buddy:host/v1.http_get",
		"buddy:host/v1.env_get", "buddy:host/v1.kv_get", "buddy:host/v1.kv_set", "buddy:host/v1.kv_delete",
		"buddy:host/v1.memory_remember", "buddy:host/v1.memory_recall")},
	{file: "undeclared.wasm", imports: append(env("alloc", "load_u8", "store_u8", "output_set"), "buddy:host/v1.http_get")},
	{file: "hostile_text.wasm", imports: env("alloc", "store_u8", "store_u64", "log_info", "log_error", "error_set")},
	{file: "undeclared_user.wasm", imports: []string{"extism:host/user.launch_missiles"}},
	{file: "http_request.wasm", imports: env("http_request")},
	{file: "reserved_fuel.wasm", imports: []string{"buddy:fuel.refuel"}},
	{file: "reserved_kernel.wasm", imports: []string{"buddy:kernel.alloc"}},
	{file: "import_memory.wasm", imports: []string{"memory extism:host/env.memory"}},
	{file: "bad_sig.wasm", imports: env("alloc")}, // valid wasm: the mismatch shows only at link time
	{file: "start_forever.wasm"},
	{file: "trap.wasm"},
	{file: "sleep.wasm", imports: []string{"buddy:test.sleep"}},
	{file: "bigmem.wasm", memMin: 1000},
	{file: "fuel_loop.wasm", imports: env("input_length", "input_load_u8", "alloc", "store_u8", "output_set")},
	{file: "pdkplugin.wasm", compiled: true, imports: []string{"wasi_snapshot_preview1.fd_write", "wasi_snapshot_preview1.clock_time_get", "wasi_snapshot_preview1.args_sizes_get", "wasi_snapshot_preview1.args_get", "extism:host/env.alloc", "extism:host/env.store_u64", "extism:host/env.store_u8", "extism:host/env.input_load_u8", "extism:host/env.input_length", "extism:host/env.input_load_u64", "extism:host/env.output_set", "extism:host/env.error_set", "wasi_snapshot_preview1.environ_get", "wasi_snapshot_preview1.environ_sizes_get", "wasi_snapshot_preview1.fd_close", "wasi_snapshot_preview1.fd_fdstat_get", "wasi_snapshot_preview1.fd_filestat_get", "wasi_snapshot_preview1.fd_prestat_get", "wasi_snapshot_preview1.fd_prestat_dir_name", "wasi_snapshot_preview1.fd_read", "wasi_snapshot_preview1.fd_readdir", "wasi_snapshot_preview1.fd_seek", "wasi_snapshot_preview1.path_filestat_get", "wasi_snapshot_preview1.path_open", "wasi_snapshot_preview1.proc_exit", "wasi_snapshot_preview1.random_get"}}, // real go-pdk + TinyGo wasip1
	{file: "skillkit_noop.wasm", compiled: true, imports: append(env("error_set", "alloc", "input_length"),
		"buddy:host/v1.kernel_write", "buddy:host/v1.input_read", "buddy:host/v1.output_write")}, // skillkit + TinyGo, the built-ins' target
	{file: "as_plugin.wasm", compiled: true, imports: env("store_u8", "alloc", "store_u64", "output_set", "input_load_u8", "input_load_u64", "input_length", "error_set")}, // real @extism/as-pdk + asc
	{file: "kernel_corrupt.wasm", imports: env("alloc", "store_u64", "store_u8")},
	{file: "hostcall.wasm", imports: []string{"extism:host/env.input_length", "extism:host/env.input_load_u8", "extism:host/env.alloc", "extism:host/env.store_u8", "extism:host/env.length", "extism:host/env.output_set", "buddy:host/v1.log", "buddy:host/v1.fs_read", "buddy:host/v1.fs_write", "buddy:host/v1.http_get", "buddy:host/v1.http_request", "buddy:host/v1.env_get", "buddy:host/v1.kv_get", "buddy:host/v1.kv_set", "buddy:host/v1.kv_delete", "buddy:host/v1.memory_remember", "buddy:host/v1.memory_recall"}},
	{file: "read_json.wasm", imports: append(env("input_length", "input_offset", "alloc", "output_set"),
		"buddy:host/v1.kernel_read", "buddy:host/v1.kernel_write", "buddy:host/v1.fs_read_json")},
	{file: "read_json_write.wasm", imports: append(env("input_length", "input_offset", "alloc", "output_set"),
		"buddy:host/v1.kernel_read", "buddy:host/v1.kernel_write", "buddy:host/v1.fs_read_json", "buddy:host/v1.fs_write")},
	{file: "leak.wasm", imports: []string{"extism:host/env.alloc", "extism:host/env.store_u64", "extism:host/env.load_u64", "extism:host/env.store_u8", "extism:host/env.output_set"}},
	{file: "kernel_abi.wasm", imports: env("alloc", "free", "length", "length_unsafe", "load_u8", "load_u64", "store_u8", "store_u64",
		"input_length", "input_offset", "input_load_u8", "input_load_u64", "output_set", "output_offset", "output_length",
		"error_set", "error_get", "reset", "memory_bytes", "config_get", "var_get", "var_set", "get_log_level", "log_info", "log_debug")},
	{file: "global_reset.wasm", invalid: true},
	{file: "notwasm.wasm", invalid: true},
	{file: "truncated.wasm", invalid: true},
}

// TestFixturesUpToDate fails when a committed .wasm is not what its source
// builds to (run scripts/build-fixtures.sh to fix).
func TestFixturesUpToDate(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	cmd := exec.CommandContext(t.Context(), bash, filepath.Join("..", "scripts", "build-fixtures.sh"), "--check")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build-fixtures.sh --check: %v\n%s", err, out)
	}
}

// TestFixturesAreWhatTheySay compiles every fixture with plain wazero: the valid
// ones compile and export exactly the entry points README.md lists, each of type
// () -> i32, with the imports they claim; the invalid ones are refused.
func TestFixturesAreWhatTheySay(t *testing.T) {
	ctx := t.Context()
	readme := readmeExports(t)

	// Every file in testdata is listed both here and in the README.
	var onDisk []string
	wasms, err := filepath.Glob(filepath.Join("testdata", "*.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range wasms {
		onDisk = append(onDisk, filepath.Base(f))
	}
	var inTable, inReadme []string
	for _, f := range fixtures {
		inTable = append(inTable, f.file)
	}
	for f := range readme {
		inReadme = append(inReadme, f)
	}
	sort.Strings(onDisk)
	sort.Strings(inTable)
	sort.Strings(inReadme)
	if !slices.Equal(onDisk, inTable) {
		t.Errorf("testdata/*.wasm = %v\nfixtures table  = %v", onDisk, inTable)
	}
	if !slices.Equal(onDisk, inReadme) {
		t.Errorf("testdata/*.wasm = %v\nREADME.md       = %v", onDisk, inReadme)
	}

	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)

	for _, fx := range fixtures {
		t.Run(strings.TrimSuffix(fx.file, ".wasm"), func(t *testing.T) {
			bin, err := os.ReadFile(filepath.Join("testdata", fx.file))
			if err != nil {
				t.Fatal(err)
			}
			compiled, err := r.CompileModule(ctx, bin)
			if fx.invalid {
				if err == nil {
					compiled.Close(ctx)
					t.Fatalf("CompileModule accepted %s, which must be invalid", fx.file)
				}
				t.Logf("refused as it should be: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("CompileModule: %v", err)
			}
			defer compiled.Close(ctx)

			// Exports: exactly the README's, all () -> i32.
			var got []string
			for name, def := range compiled.ExportedFunctions() {
				if fx.compiled && !slices.Contains(readme[fx.file], name) {
					continue // the compiler's own exports (malloc, _initialize, ...)
				}
				got = append(got, name)
				if len(def.ParamTypes()) != 0 || !slices.Equal(def.ResultTypes(), []api.ValueType{api.ValueTypeI32}) {
					t.Errorf("export %q has type %v -> %v, want () -> i32", name, def.ParamTypes(), def.ResultTypes())
				}
			}
			want := slices.Clone(readme[fx.file])
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("exported functions = %v, README.md lists %v", got, want)
			}

			// Imports.
			var imports []string
			for _, def := range compiled.ImportedFunctions() {
				mod, name, _ := def.Import()
				imports = append(imports, mod+"."+name)
			}
			for _, def := range compiled.ImportedMemories() {
				mod, name, _ := def.Import()
				imports = append(imports, "memory "+mod+"."+name)
			}
			wantImports := slices.Clone(fx.imports)
			sort.Strings(imports)
			sort.Strings(wantImports)
			if !slices.Equal(imports, wantImports) {
				t.Errorf("imports = %v, want %v", imports, wantImports)
			}

			if fx.memMin != 0 {
				mem, ok := compiled.ExportedMemories()["memory"]
				if !ok {
					t.Errorf("no exported memory, want one of min %d pages", fx.memMin)
				} else if mem.Min() != fx.memMin {
					t.Errorf("memory min = %d pages, want %d", mem.Min(), fx.memMin)
				}
			}

			// The source says what it does, and loop-free means loop-free.
			if fx.compiled {
				return
			}
			src, err := os.ReadFile(filepath.Join("testdata", strings.TrimSuffix(fx.file, ".wasm")+".wat"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(src), ";; ") {
				t.Errorf("%s.wat does not start with a ;; comment block", strings.TrimSuffix(fx.file, ".wasm"))
			}
			if fx.noLoop && loopRE.MatchString(stripComments(string(src))) {
				t.Errorf("%s must not contain a loop", fx.file)
			}
		})
	}
}

var (
	rowRE      = regexp.MustCompile("^\\| `([a-z0-9_]+\\.wasm)` \\| ([^|]*) \\|")
	backtickRE = regexp.MustCompile("`([^`]+)`")
	loopRE     = regexp.MustCompile(`\bloop\b`)
)

// readmeExports parses the fixture table of testdata/README.md: file -> the
// exports listed for it ("—" rows list none).
func readmeExports(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for line := range strings.Lines(string(data)) {
		m := rowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		exports := out[m[1]]
		for _, e := range backtickRE.FindAllStringSubmatch(m[2], -1) {
			if slices.Contains(exports, e[1]) {
				t.Errorf("README.md lists %s export %q twice", m[1], e[1])
			}
			exports = append(exports, e[1])
		}
		out[m[1]] = exports
	}
	if len(out) == 0 {
		t.Fatal("README.md: no fixture rows found")
	}
	return out
}

// stripComments drops ;; line comments and (; block ;) comments from WAT.
func stripComments(src string) string {
	var b strings.Builder
	for len(src) > 0 {
		switch {
		case strings.HasPrefix(src, ";;"):
			i := strings.IndexByte(src, '\n')
			if i < 0 {
				return b.String()
			}
			src = src[i:]
		case strings.HasPrefix(src, "(;"):
			i := strings.Index(src, ";)")
			if i < 0 {
				return b.String()
			}
			src = src[i+2:]
		default:
			b.WriteByte(src[0])
			src = src[1:]
		}
	}
	return b.String()
}
