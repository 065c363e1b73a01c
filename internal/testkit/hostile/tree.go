//go:build unix

package hostile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The tree's secrets: no successful read may ever return them.
const (
	SecretOutside = "SECRET-outside-9f2c41"
	SecretEvil    = "SECRET-data-evil-77ab"
	// HelloContent is the content of ROOT/hello.txt, a file a read may return.
	HelloContent = "hello, inside"
)

// Secrets lists the contents that live outside the root.
var Secrets = []string{SecretOutside, SecretEvil}

// BuildTree creates, under base (created if needed), the layout PathRows
// assume, and returns root, the directory to grant:
//
//	base/data/        root: hello.txt, sub/inner.txt, dir/, keep/f.txt, big.bin
//	                  (MaxBytes+1 bytes), exact.bin (MaxBytes), a FIFO (fifo), a
//	                  socket inode (sock), a character device (zero_dev, only with
//	                  CAP_MKNOD; see HasDevice), and symlinks: leaving the root
//	                  (final and intermediate, absolute and relative, chains),
//	                  loops, dangling, to /dev/zero and /proc, to the siblings,
//	                  and a few that stay inside (inside_link, sub/up)
//	base/data-evil/   a sibling whose name starts with "data" (secret)
//	base/data2/       another sibling (x)
//	base/outside/     secrets (secret.txt, dir/deep.txt)
//
// base is made canonical first (EvalSymlinks), so that root is the path the
// kernel reports for it.
func BuildTree(tb testing.TB, base string) (root string) {
	tb.Helper()
	must(tb, os.MkdirAll(base, 0o755))
	base, err := filepath.EvalSymlinks(base)
	must(tb, err)
	root = filepath.Join(base, "data")
	outside := filepath.Join(base, "outside")
	evil := filepath.Join(base, "data-evil")
	for _, d := range []string{"data/sub", "data/dir", "data/keep", "outside/dir", "data-evil", "data2"} {
		must(tb, os.MkdirAll(filepath.Join(base, d), 0o755))
	}
	files := map[string]string{
		"data/hello.txt":       HelloContent,
		"data/sub/inner.txt":   "inner",
		"data/keep/f.txt":      "old",
		"data/big.bin":         strings.Repeat("b", MaxBytes+1),
		"data/exact.bin":       strings.Repeat("e", MaxBytes),
		"outside/secret.txt":   SecretOutside,
		"outside/dir/deep.txt": SecretOutside,
		"data-evil/secret":     SecretEvil,
		"data2/x":              SecretEvil,
	}
	for name, content := range files {
		must(tb, os.WriteFile(filepath.Join(base, name), []byte(content), 0o644))
	}
	links := map[string]string{
		"link_out_abs":     filepath.Join(outside, "secret.txt"),
		"link_out_rel":     "../outside/secret.txt",
		"link_dir_out":     outside,
		"link_dir_out_rel": "../outside",
		"chain1":           "chain2",
		"chain2":           "chain3",
		"chain3":           "../outside/secret.txt",
		"chain_dir":        "link_dir_out_rel",
		"link_root":        "/",
		"link_root_rel":    strings.Repeat("../", 40),
		"loop_a":           "loop_b",
		"loop_b":           "loop_a",
		"self_loop":        "self_loop",
		"dangling":         "missing-target",
		"dangling_out":     "/nonexistent-buddy-target",
		"dangling_out_rel": "../outside/missing",
		"dev_zero":         "/dev/zero",
		"dev_zero_rel":     strings.Repeat("../", 40) + "dev/zero",
		"proc_environ":     "/proc/self/environ",
		"link_evil":        "../data-evil/secret",
		"link_evil_abs":    filepath.Join(evil, "secret"),
		"link_fifo":        "fifo",
		"inside_link":      "hello.txt",
		"abs_inside":       filepath.Join(root, "hello.txt"), // absolute: refused even though inside
		"sub/upup":         "../..",
		"sub/link_up_out":  "../../outside/secret.txt",
		"sub/up":           "..",
	}
	for name, target := range links {
		must(tb, os.Symlink(target, filepath.Join(root, name)))
	}
	must(tb, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	// A socket inode without binding: mknod(S_IFSOCK) needs no privilege, and
	// avoids the 108-byte sun_path limit of long temporary paths.
	must(tb, syscall.Mknod(filepath.Join(root, "sock"), syscall.S_IFSOCK|0o644, 0))
	// /dev/zero's numbers (1, 5), in Linux's encoding; only with CAP_MKNOD.
	_ = syscall.Mknod(filepath.Join(root, "zero_dev"), syscall.S_IFCHR|0o666, 1<<8|5)
	return root
}

// HasDevice reports whether BuildTree could create root/zero_dev, the
// character device of the row marked Device (it needs CAP_MKNOD).
func HasDevice(root string) bool {
	fi, err := os.Lstat(filepath.Join(root, "zero_dev"))
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
