package install_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/buddy-run/buddy/internal/skills/install"
	"github.com/buddy-run/buddy/internal/store"
)

// BenchmarkInstall1MiB: `buddy skill install` of a 1 MiB module (a real
// plugin padded with a custom section): manifest, inspection, validation,
// copy with fsync, sha256 and the store row — each iteration under a new name.
func BenchmarkInstall1MiB(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "buddy.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close(context.Background())
	wasm, err := os.ReadFile(filepath.Join("..", "..", "..", "runtime", "testdata", "pdkplugin.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	// Custom section "pad" of ~1 MiB: id 0, LEB128 size, name, payload.
	pad := 1<<20 - len(wasm) - 16
	payload := append([]byte{3, 'p', 'a', 'd'}, bytes.Repeat([]byte{0xAB}, pad)...)
	mod := append(bytes.Clone(wasm), 0)
	for n := uint(len(payload)); ; n >>= 7 {
		if n < 0x80 {
			mod = append(mod, byte(n))
			break
		}
		mod = append(mod, byte(n&0x7f|0x80))
	}
	mod = append(mod, payload...)
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		b.Fatal(err)
	}
	wasmPath := filepath.Join(src, "big.wasm")
	if err := os.WriteFile(wasmPath, mod, 0o644); err != nil {
		b.Fatal(err)
	}
	inst := &install.Installer{Store: st, DataDir: filepath.Join(dir, "data")}
	b.SetBytes(int64(len(mod)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		mpath := filepath.Join(src, fmt.Sprintf("skill%d.toml", i))
		m := fmt.Sprintf("[skill]\nname = \"big_%d\"\nversion = \"1.0.0\"\ndescription = \"a big one\"\npermission = \"read_only\"\nentrypoint = \"greet\"\n", i)
		if err := os.WriteFile(mpath, []byte(m), 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := inst.Install(ctx, install.Request{WasmPath: wasmPath, ManifestPath: mpath}); err != nil {
			b.Fatal(err)
		}
	}
}
