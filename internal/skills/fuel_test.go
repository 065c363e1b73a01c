package skills_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestBuiltinsFuel runs typical calls of the built-ins through the registry
// and logs their fuel (go test -v -run TestBuiltinsFuel ./internal/registry/:
// the figures of docs/BENCHMARKS.md). Fuel counts the guest's instructions
// and is deterministic: each call is made twice and must cost the same.
func TestBuiltinsFuel(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string][]byte{
		"empty.txt": nil,
		"4k.txt":    bytes.Repeat([]byte("0123456789abcdef"), 256),
		"64k.txt":   bytes.Repeat([]byte("0123456789abcdef"), 4096),
		"text.txt":  []byte(strings.Repeat("if a < b && c > \"d\" {\n\tprintln(\"é\")\n}\n", 4096/40)),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	html := strings.Repeat("<p>hello</p>", 4096/12+1)[:4096]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, html)
	}))
	defer srv.Close()
	cfg := parseConfig(t, fmt.Sprintf(`
[skills.read_file]
allowed_directories = [%s]
[skills.write_file]
allowed_directories = [%[1]s]
[skills.fetch_url]
allowed_domains = [%q]
[skills.memory]
`, tomlString(dir), strings.TrimPrefix(srv.URL, "http://")))
	reg := newRegistry(t, newRuntime(t), cfg, newStore(t))
	plain4k := strings.Repeat("0123456789abcdef", 256)
	text4k := strings.Repeat(`if a < b && c > \"d\" {\n\tprintln(\"é\")\n}\n`, 4096/40)
	for _, c := range []struct{ skill, input, what string }{
		{"read_file", `{"path":"empty.txt"}`, "empty file"},
		{"read_file", `{"path":"4k.txt"}`, "4 KiB"},
		{"read_file", `{"path":"64k.txt"}`, "64 KiB"},
		{"read_file", `{"path":"text.txt"}`, "4 KiB of code (escapes, UTF-8)"},
		{"write_file", `{"path":"w.txt","content":"hello"}`, "5 bytes"},
		{"write_file", `{"path":"w.txt","content":"` + plain4k + `"}`, "4 KiB"},
		{"write_file", `{"path":"w.txt","content":"` + text4k + `"}`, "4 KiB of code (escapes, UTF-8)"},
		{"memory_write", `{"key":"k","value":"v"}`, "1 byte"},
		{"memory_write", `{"key":"k4","value":"` + plain4k + `"}`, "4 KiB"},
		{"memory_read", `{"key":"k"}`, "1 byte"},
		{"memory_read", `{"key":"k4"}`, "4 KiB"},
		{"memory_read", `{"key":"none"}`, "missing key"},
		{"fetch_url", `{"url":"` + srv.URL + `/page"}`, "4 KiB of HTML"},
	} {
		var fuel [2]uint64
		for i := range fuel {
			res, err := reg.Call(t.Context(), c.skill, []byte(c.input))
			if err != nil {
				t.Fatalf("%s %s: %v", c.skill, c.what, err)
			}
			fuel[i] = res.Fuel
		}
		if fuel[0] == 0 || fuel[0] != fuel[1] {
			t.Errorf("%s %s: fuel %d then %d", c.skill, c.what, fuel[0], fuel[1])
		}
		t.Logf("%-12s %-32s %10d", c.skill, c.what, fuel[0])
	}
}

// TestReadFileRefusesLargeBinary: read_file refuses a binary file near its
// size limit with a clean invalid_input, not by running out of memory while
// escaping it first (each invalid byte would become six: 8 MiB of 0x80 bytes
// would need ~100 MiB under read_file's 128 MiB cap and leaking GC).
func TestReadFileRefusesLargeBinary(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "blob.bin"), bytes.Repeat([]byte{0x80}, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := parseConfig(t, fmt.Sprintf("[skills.read_file]\nallowed_directories = [%s]\n", tomlString(dir)))
	reg := newRegistry(t, newRuntime(t), cfg, newStore(t))
	_, err := reg.Call(t.Context(), "read_file", []byte(`{"path":"blob.bin"}`))
	if errs.KindOf(err) != errs.KindInvalidInput || !strings.Contains(fmt.Sprint(err), "not UTF-8 text") {
		t.Fatalf("read_file of an 8 MiB binary file: %v; want invalid_input, not UTF-8 text", err)
	}
}
