package install_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/skills/install"
)

// hostileModule is a module exporting run: () -> i32 with the given table
// section content and function body (without its final i32.const 0; end).
func hostileModule(tables, code []byte) []byte {
	section := func(b []byte, id byte, content []byte) []byte {
		b = append(b, id)
		for n := uint64(len(content)); ; n >>= 7 {
			if n < 0x80 {
				b = append(b, byte(n))
				break
			}
			b = append(b, byte(n)|0x80)
		}
		return append(b, content...)
	}
	b := section([]byte("\x00asm\x01\x00\x00\x00"), 1, []byte{1, 0x60, 0, 1, 0x7f})
	b = section(b, 3, []byte{1, 0})
	if tables != nil {
		b = section(b, 4, tables)
	}
	b = section(b, 7, []byte{1, 3, 'r', 'u', 'n', 0, 0})
	body := append([]byte{0}, code...)
	body = append(body, 0x41, 0, 0x0b)
	fn := section(nil, 0, body)[1:] // size-prefixed body
	return section(b, 10, append([]byte{1}, fn...))
}

// TestInstallRefusesModulesOverLimits: skill install refuses, before
// compiling anything, modules that would make the host allocate gigabytes or
// compile for minutes, with the kind of the limit; nothing is installed.
func TestInstallRefusesModulesOverLimits(t *testing.T) {
	tests := []struct {
		name string
		wasm []byte
		kind error
		want string
	}{
		{"a table of 2^27 entries", hostileModule([]byte{1, 0x70, 0, 0x80, 0x80, 0x80, 0x40}, nil), errs.ErrMemoryLimit, "MaxTableEntries"},
		{"a table over memory_mb", hostileModule([]byte{1, 0x70, 0, 0x80, 0x80, 0x20}, nil), errs.ErrMemoryLimit, "table entries"},
		{"8,000 nested blocks", hostileModule(nil, append(bytes.Repeat([]byte{0x02, 0x40}, 8000), bytes.Repeat([]byte{0x0b}, 8000)...)), errs.ErrTooLarge, "MaxNesting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			dir := t.TempDir()
			path := filepath.Join(dir, "skill.wasm")
			if err := os.WriteFile(path, tt.wasm, 0o644); err != nil {
				t.Fatal(err)
			}
			// memory_mb 2: the 512 Ki-entry table (4 MiB) does not fit.
			text := manifest("skill_x", "1.0.0", "read_only", "[resources]\nmemory_mb = 2\n")
			if err := os.WriteFile(filepath.Join(dir, "skill.toml"), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := e.inst.Install(t.Context(), install.Request{WasmPath: path})
			wantKind(t, err, tt.kind, tt.want)
			e.nothingWritten(t)
		})
	}
}
