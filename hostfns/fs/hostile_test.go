//go:build unix

package fs

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/errs"
)

const (
	forbidden = errs.KindForbidden
	notFound  = errs.KindNotFound
	tooLarge  = errs.KindTooLarge
	invalid   = errs.KindInvalidInput
)

// hostileCase is a guest path that both Read and Write must refuse, and the
// exact kind each must refuse it with.
type hostileCase struct {
	name      string
	path      string
	read      errs.Kind
	write     errs.Kind
	writeSize int  // bytes Write is given; 0 means 5
	device    bool // needs fixture.hasDevice
}

// hostileCases is the escape table. It also seeds FuzzResolvePath.
func hostileCases(fx *fixture) []hostileCase {
	data, tmp := fx.data, fx.tmp
	ff := func(name, path string) hostileCase {
		return hostileCase{name: name, path: path, read: forbidden, write: forbidden}
	}
	return []hostileCase{
		// ".." in every spelling: refused lexically, even when it would stay inside.
		ff("dotdot", ".."),
		ff("dotdot slash", "../"),
		ff("dotdot x", "../x"),
		ff("dotdot outside secret", "../outside/secret.txt"),
		ff("a up up", "a/../../x"),
		ff("dot dotdot", "./../x"),
		ff("a dot up up", "a/./../../x"),
		ff("file dotdot", "hello.txt/.."),
		ff("inside detour", "sub/../hello.txt"),
		ff("sub dotdot", "sub/.."),
		ff("deep etc passwd", "../../../../../../etc/passwd"),
		ff("dotdot dot x", ".././x"),
		ff("double slashes", "sub//..//..//x"),
		ff("back into root", "../data/hello.txt"),
		ff("many up", "x/../../../.."),
		ff("dotdot twice", "..//.."),
		ff("dot dotdot only", "./.."),
		ff("sub dot up up", "sub/./../../outside/secret.txt"),
		ff("abs root dotdot x", data+"/../x"),
		ff("abs root dotdot secret", data+"/../outside/secret.txt"),
		ff("abs sub up up", data+"/sub/../../outside/secret.txt"),
		ff("slash dotdot", "/.."),
		ff("slashes dotdot", "//..//x"),
		ff("abs root dotdot", data+"/.."),
		ff("abs back into root", data+"/../data/hello.txt"),
		ff("abs sibling via dotdot", data+"/../data-evil/secret"),
		// Absolute paths outside.
		ff("etc passwd", "/etc/passwd"),
		ff("slash", "/"),
		ff("proc environ", "/proc/self/environ"),
		ff("parent of root", tmp),
		ff("parent of root slash", tmp+"/"),
		ff("abs outside secret", filepath.Join(fx.outside, "secret.txt")),
		ff("abs dev zero", "/dev/zero"),
		ff("tmp", "/tmp"),
		ff("proc root", "/proc/self/root/etc/passwd"),
		ff("root ssh", "/root/.ssh/id_rsa"),
		ff("slash data", "/data/x"),
		// Sibling prefixes: /x/data vs /x/data-evil.
		ff("sibling relative", "../data-evil/secret"),
		ff("sibling absolute", filepath.Join(fx.evil, "secret")),
		ff("sibling dir", fx.evil),
		ff("sibling dir slash", fx.evil+"/"),
		ff("sibling data2", filepath.Join(tmp, "data2/x")),
		ff("sibling dataX", data+"x/secret"),
		// NUL bytes.
		ff("nul at end", "hello.txt\x00"),
		ff("nul only", "\x00"),
		ff("nul component", "sub/\x00/inner.txt"),
		ff("abs nul ext", data+"/hello.txt\x00.png"),
		ff("nul before dotdot", "\x00../x"),
		// Malformed.
		{name: "empty", path: "", read: invalid, write: invalid},
		{name: "4097 bytes", path: strings.Repeat("a", MaxPathBytes+1), read: invalid, write: invalid},
		{name: "4098 bytes of a/", path: strings.Repeat("a/", MaxPathBytes/2+1), read: invalid, write: invalid},
		// Symlinks leaving the root, final or intermediate, absolute or relative.
		ff("final abs symlink out", "link_out_abs"),
		ff("final rel symlink out", "link_out_rel"),
		ff("dir abs symlink out", "link_dir_out/secret.txt"),
		ff("dir rel symlink out", "link_dir_out_rel/secret.txt"),
		ff("dir symlink out new file", "link_dir_out/newfile"),
		ff("dir symlink out new dirs", "link_dir_out/deeper/new"),
		ff("dir rel symlink out new dirs", "link_dir_out_rel/a/b/c"),
		ff("symlink chain", "chain1"),
		ff("dir symlink chain", "chain_dir/secret.txt"),
		ff("symlink to slash", "link_root/etc/passwd"),
		ff("symlink to slash itself", "link_root"),
		ff("rel symlink to slash", "link_root_rel/etc/passwd"),
		ff("symlink loop", "loop_a"),
		ff("self loop", "self_loop"),
		ff("through loop", "loop_a/x"),
		{name: "dangling inside", path: "dangling", read: notFound, write: forbidden},
		ff("dangling abs", "dangling_out"),
		ff("dangling rel out", "dangling_out_rel"),
		ff("dev zero abs symlink", "dev_zero"),
		ff("dev zero rel symlink", "dev_zero_rel"),
		ff("proc environ symlink", "proc_environ"),
		ff("sibling rel symlink", "link_evil"),
		ff("sibling abs symlink", "link_evil_abs"),
		ff("abs symlink pointing inside", "abs_inside"),
		ff("nested up up", "sub/upup/outside/secret.txt"),
		ff("nested up up itself", "sub/upup"),
		ff("nested rel symlink out", "sub/link_up_out"),
		ff("abs form final symlink", data+"/link_out_abs"),
		ff("abs form dir symlink", data+"/link_dir_out_rel/secret.txt"),
		// Not regular files.
		ff("fifo", "fifo"),
		ff("symlink to fifo", "link_fifo"),
		ff("socket", "sock"),
		{name: "device node", path: "zero_dev", read: forbidden, write: forbidden, device: true},
		ff("directory", "dir"),
		ff("subdirectory", "sub"),
		ff("dot", "."),
		ff("dot slash", "./"),
		ff("abs root", data),
		ff("abs root slash", data+"/"),
		ff("sub dot", "sub/."),
		ff("trailing slash file", "hello.txt/"),
		// Too large.
		{name: "oversized", path: "big.bin", read: tooLarge, write: tooLarge, writeSize: fxMax + 1},
		{name: "oversized new file", path: "new-big.bin", read: notFound, write: tooLarge, writeSize: fxMax + 1},
		// A file in the way of a directory.
		{name: "below a file", path: "hello.txt/x", read: notFound, write: invalid},
		{name: "below a dangling symlink", path: "dangling/x", read: notFound, write: invalid},
	}
}

func TestHostileRead(t *testing.T) {
	fx := newFixture(t)
	cases := hostileCases(fx)
	if len(cases) < 60 {
		t.Fatalf("only %d hostile cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.device && !fx.hasDevice {
				t.Skip("cannot create a device node here (needs CAP_MKNOD)")
			}
			var data []byte
			var err error
			finishWithin(t, 5*time.Second, "Read", func() { data, err = fx.roots.Read(t.Context(), c.path) })
			noSecret(t, "Read", data)
			if data != nil {
				t.Errorf("Read returned %d bytes with an error", len(data))
			}
			wantKind(t, err, c.read, c.path)
			if !filepath.IsAbs(c.path) && strings.Contains(err.Error(), fx.tmp) {
				t.Errorf("error %q shows the host directory", err)
			}
			_, _, rerr := fx.roots.Resolve(c.path)
			if rerr != nil && errs.KindOf(rerr) != c.read {
				t.Errorf("Resolve refused with %s, Read with %s", errs.KindOf(rerr), c.read)
			}
		})
	}
	fx.checkOutsideUnchanged(t)
}

func TestHostileWrite(t *testing.T) {
	fx := newFixture(t)
	for _, c := range hostileCases(fx) {
		t.Run(c.name, func(t *testing.T) {
			if c.device && !fx.hasDevice {
				t.Skip("cannot create a device node here (needs CAP_MKNOD)")
			}
			size := c.writeSize
			if size == 0 {
				size = 5
			}
			var n int
			var err error
			finishWithin(t, 5*time.Second, "Write", func() {
				n, err = fx.roots.Write(t.Context(), c.path, []byte(strings.Repeat("w", size)))
			})
			if n != 0 {
				t.Errorf("Write returned n=%d with an error", n)
			}
			wantKind(t, err, c.write, c.path)
			if !filepath.IsAbs(c.path) && strings.Contains(err.Error(), fx.tmp) {
				t.Errorf("error %q shows the host directory", err)
			}
			// A refused write changes nothing at all, inside or outside.
			if d := diffSnapshots(fx.before, snapshot(t, fx.tmp), nil); len(d) > 0 {
				t.Fatalf("refused write changed the tree: %v", d)
			}
		})
	}
}
