// Package hostile holds the hostile-input tables of buddy's capability gates,
// as data shared by every test that drives a gate: the file-system gate's
// own tests (hostfns/fs), the network gate's (hostfns/http), and the
// end-to-end tests of the buddy command (cmd/buddy), which run each row
// through the read_file, write_file and fetch_url built-ins.
//
//	root := hostile.BuildTree(t, t.TempDir()) // the layout PathRows assume
//	for _, r := range hostile.PathRows {
//		_, err := roots.Read(ctx, r.In(root))
//		// errs.KindOf(err) == r.Read
//	}
//	for _, r := range hostile.URLRows {
//		// a gate allowing hostile.URLPolicy refuses r.URL with r.Fetch
//	}
//
// A row names the exact errs.Kind each operation must refuse it with. It is a
// normal package (not a _test file) so that several test packages share one
// table; nothing outside tests imports it.
package hostile

import (
	"path/filepath"
	"strings"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// Caps the tables assume. They mirror the gates' own constants, which the
// gates' tests compare with these (this package cannot import the gates: their
// in-package tests import it).
const (
	// MaxBytes is the read and write cap the path rows assume: BuildTree's
	// big.bin is one byte over it and exact.bin is exactly it. Grant the root
	// with this cap (Options.MaxReadBytes/MaxWriteBytes, or max_bytes in
	// buddy.toml).
	MaxBytes = 64
	// MaxPathBytes is hostfns/fs.MaxPathBytes: the longest guest path.
	MaxPathBytes = 4096
	// MaxPathDepth is hostfns/fs.MaxPathDepth: the most elements of one.
	MaxPathDepth = 128
	// MaxURLBytes is hostfns/http.MaxURLBytes: the longest URL.
	MaxURLBytes = 8192
)

// Placeholders in PathRow.Path, replaced by PathRow.In.
const (
	Root = "{root}" // the allowed directory BuildTree returns
	Base = "{base}" // its parent, which holds the outside, data-evil and data2 siblings
)

// PathRow is a guest path that both a read and a write must refuse, and the
// exact kind each must refuse it with.
type PathRow struct {
	Name  string
	Path  string // may contain Root and Base; see In
	Read  errs.Kind
	Write errs.Kind
	// WriteSize is the number of bytes a write is given; 0 means 5. See Content.
	WriteSize int
	// Device marks the row that needs the character device BuildTree creates
	// only with CAP_MKNOD; see HasDevice.
	Device bool
	// SkillRead and SkillWrite are the kinds through the read_file and
	// write_file built-ins when they differ from Read and Write ("" = the
	// same): the host functions answer an argument over their cap (a path over
	// MaxPathBytes) with too_large before the gate sees it (docs/HOST_ABI.md).
	SkillRead, SkillWrite errs.Kind
}

// SkillReadKind is the kind the read_file built-in refuses the row with.
func (r PathRow) SkillReadKind() errs.Kind { return or(r.SkillRead, r.Read) }

// SkillWriteKind is the kind the write_file built-in refuses the row with.
func (r PathRow) SkillWriteKind() errs.Kind { return or(r.SkillWrite, r.Write) }

func or(k, def errs.Kind) errs.Kind {
	if k != "" {
		return k
	}
	return def
}

// In returns the row's path for a tree whose allowed directory is root.
func (r PathRow) In(root string) string {
	return strings.NewReplacer(Root, root, Base, filepath.Dir(root)).Replace(r.Path)
}

// Content is what a write of this row writes: WriteSize bytes (default 5).
func (r PathRow) Content() string {
	n := r.WriteSize
	if n == 0 {
		n = 5
	}
	return strings.Repeat("w", n)
}

const (
	forbidden = errs.KindForbidden
	notFound  = errs.KindNotFound
	tooLarge  = errs.KindTooLarge
	invalid   = errs.KindInvalidInput
)

func ff(name, path string) PathRow {
	return PathRow{Name: name, Path: path, Read: forbidden, Write: forbidden}
}

// PathRows is the escape table of the file-system gate, for the tree BuildTree
// creates, granted with a cap of MaxBytes for reads and writes. Relative paths
// resolve against the root. It also seeds hostfns/fs's FuzzResolvePath.
var PathRows = []PathRow{
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
	ff("abs root dotdot x", Root+"/../x"),
	ff("abs root dotdot secret", Root+"/../outside/secret.txt"),
	ff("abs sub up up", Root+"/sub/../../outside/secret.txt"),
	ff("slash dotdot", "/.."),
	ff("slashes dotdot", "//..//x"),
	ff("abs root dotdot", Root+"/.."),
	ff("abs back into root", Root+"/../data/hello.txt"),
	ff("abs sibling via dotdot", Root+"/../data-evil/secret"),
	// Absolute paths outside.
	ff("etc passwd", "/etc/passwd"),
	ff("slash", "/"),
	ff("proc environ", "/proc/self/environ"),
	ff("parent of root", Base),
	ff("parent of root slash", Base+"/"),
	ff("abs outside secret", Base+"/outside/secret.txt"),
	ff("abs dev zero", "/dev/zero"),
	ff("tmp", "/tmp"),
	ff("proc root", "/proc/self/root/etc/passwd"),
	ff("root ssh", "/root/.ssh/id_rsa"),
	ff("slash data", "/data/x"),
	// Sibling prefixes: /x/data vs /x/data-evil.
	ff("sibling relative", "../data-evil/secret"),
	ff("sibling absolute", Base+"/data-evil/secret"),
	ff("sibling dir", Base+"/data-evil"),
	ff("sibling dir slash", Base+"/data-evil/"),
	ff("sibling data2", Base+"/data2/x"),
	ff("sibling dataX", Root+"x/secret"),
	// NUL bytes.
	ff("nul at end", "hello.txt\x00"),
	ff("nul only", "\x00"),
	ff("nul component", "sub/\x00/inner.txt"),
	ff("abs nul ext", Root+"/hello.txt\x00.png"),
	ff("nul before dotdot", "\x00../x"),
	// Malformed.
	{Name: "empty", Path: "", Read: invalid, Write: invalid},
	{Name: "4097 bytes", Path: strings.Repeat("a", MaxPathBytes+1), Read: invalid, Write: invalid, SkillRead: tooLarge, SkillWrite: tooLarge},
	{Name: "4098 bytes of a/", Path: strings.Repeat("a/", MaxPathBytes/2+1), Read: invalid, Write: invalid, SkillRead: tooLarge, SkillWrite: tooLarge},
	{Name: "129 elements", Path: strings.Repeat("a/", MaxPathDepth) + "f", Read: invalid, Write: invalid},
	{Name: "129 elements with slashes", Path: "/" + strings.Repeat("a//", MaxPathDepth) + "f", Read: invalid, Write: invalid},
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
	{Name: "dangling inside", Path: "dangling", Read: notFound, Write: forbidden},
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
	ff("abs form final symlink", Root+"/link_out_abs"),
	ff("abs form dir symlink", Root+"/link_dir_out_rel/secret.txt"),
	// Not regular files.
	ff("fifo", "fifo"),
	ff("symlink to fifo", "link_fifo"),
	ff("socket", "sock"),
	{Name: "device node", Path: "zero_dev", Read: forbidden, Write: forbidden, Device: true},
	ff("directory", "dir"),
	ff("subdirectory", "sub"),
	ff("dot", "."),
	ff("dot slash", "./"),
	ff("abs root", Root),
	ff("abs root slash", Root+"/"),
	ff("sub dot", "sub/."),
	ff("trailing slash file", "hello.txt/"),
	// Too large.
	{Name: "oversized", Path: "big.bin", Read: tooLarge, Write: tooLarge, WriteSize: MaxBytes + 1},
	{Name: "oversized new file", Path: "new-big.bin", Read: notFound, Write: tooLarge, WriteSize: MaxBytes + 1},
	// A file in the way of a directory.
	{Name: "below a file", Path: "hello.txt/x", Read: notFound, Write: invalid},
	{Name: "below a dangling symlink", Path: "dangling/x", Read: notFound, Write: invalid},
}

// URLRow is a URL the network gate must refuse before any I/O, and the kind
// it must refuse it with. No row needs DNS: every refusal comes from the
// static check (scheme, userinfo, host syntax, IP literals in every spelling,
// names not on the list, ports), so the rows can run through a built binary.
// Rows that need a resolver (names resolving to private addresses, DNS
// rebinding) stay in hostfns/http's own tests.
type URLRow struct {
	URL string
	// Fetch is the kind the gate (hostfns/http Check and Get) refuses it with.
	Fetch errs.Kind
	// Skill is the kind through the fetch_url built-in when it differs from
	// Fetch ("" = the same): the built-in refuses an empty url itself, and the
	// http_get host function answers a URL over its argument cap
	// (MaxURLBytes) with too_large before the gate sees it.
	Skill errs.Kind
}

// SkillKind is the kind the fetch_url built-in refuses the row with.
func (r URLRow) SkillKind() errs.Kind { return or(r.Skill, r.Fetch) }

// URLPolicy is the allowlist the URL rows are refused under. Adding an IP
// literal with a port other than 80 and 443 (an httptest server's
// "127.0.0.1:PORT") changes no row's outcome.
var URLPolicy = []string{
	"example.com",
	"*.example.org",
	"api.example.net:8443",
	"93.184.216.34",
	"2606:2800:21f:cb07:6820:80da:af6b:8b2c",
}

func fu(url string) URLRow  { return URLRow{URL: url, Fetch: forbidden} }
func inv(url string) URLRow { return URLRow{URL: url, Fetch: invalid} }

// URLRows must all be refused under URLPolicy, with the kind given.
var URLRows = []URLRow{
	// Hosts not on the list, and suffix tricks.
	fu("http://evil.test/"),
	fu("HTTP://EVIL.TEST/"),
	fu("http://example.com.evil.test/"),
	fu("http://evilexample.com/"),
	fu("http://example.comevil.test/"),
	inv("http://example.com%2eevil.test/"),
	inv("http://example.com%00.evil.test/"),
	fu("http://evil.test#@example.com/"),
	fu("http://evil.test?@example.com/"),
	inv("http://evil.test\\@example.com/"),
	fu("http://evil.test/.example.com"),
	fu("http://localhost/"),
	fu("http://LOCALHOST./"),
	inv("http://example.com../"),
	inv("http://exa mple.com/"),
	inv("http://*.example.org/"),
	fu("http://bücher.example.org/"),
	fu("http://xn--bcher-kva.example.com/"),
	// A wildcard covers subdomains only.
	fu("http://example.org/"),
	fu("http://xexample.org/"),
	fu("http://example.org.evil.test/"),
	fu("http://www.example.com/"),
	// Userinfo, in every shape.
	fu("http://example.com@evil.test/"),
	fu("http://user@example.com/"),
	fu("http://user:pass@example.com/"),
	fu("http://:@example.com/"),
	fu("http://@example.com/"),
	fu("http://127.0.0.1:80@example.com/"),
	// IP literals in every spelling (none of these addresses is listed).
	fu("http://127.0.0.1/"),
	fu("http://2130706433/"),
	fu("http://0177.0.0.1/"),
	fu("http://0x7f.0.0.1/"),
	fu("http://0x7f000001/"),
	fu("http://0X7F.1/"),
	fu("http://127.1/"),
	fu("http://127.0.1/"),
	fu("http://127.0.0.1./"),
	fu("http://0/"),
	fu("http://0.0.0.0/"),
	fu("http://[::1]/"),
	fu("http://[::1]:80/"),
	fu("http://[0:0:0:0:0:0:0:1]/"),
	fu("http://[::]/"),
	fu("http://[::ffff:127.0.0.1]/"),
	fu("http://[::ffff:7f00:1]/"),
	fu("http://[0:0:0:0:0:ffff:127.0.0.1]/"),
	fu("http://[::127.0.0.1]/"),
	fu("http://[fe80::1%25eth0]/"),
	fu("http://[fe80::1]/"),
	fu("http://[fc00::1]/"),
	fu("http://[2002:7f00:1::]/"),
	fu("http://[64:ff9b::a00:1]/"),
	inv("http://[127.0.0.1]/"),
	fu("http://10.0.0.1/"),
	fu("http://012.0.0.1/"),
	fu("http://172.16.0.1/"),
	fu("http://192.168.1.1/"),
	fu("http://3232235777/"),
	fu("http://100.64.0.1/"),
	fu("http://198.18.0.1/"),
	fu("http://192.0.2.1/"),
	fu("http://224.0.0.1/"),
	fu("http://255.255.255.255/"),
	fu("http://1.1.1.1/"),
	inv("http://1.2.3.4.5/"),
	inv("http://example.256/"),
	inv("http://0x100000000/"),
	inv("http://%31%32%37.0.0.1/"),
	// Cloud metadata endpoints.
	fu("http://169.254.169.254/latest/meta-data/"),
	fu("http://0xa9fea9fe/"),
	fu("http://[::ffff:169.254.169.254]/"),
	fu("http://[::ffff:a9fe:a9fe]/"),
	fu("http://[fd00:ec2::254]/"),
	fu("http://[64:ff9b::a9fe:a9fe]/"),
	fu("http://100.100.100.200/"),
	// Schemes and URL shapes.
	fu("file:///etc/passwd"),
	fu("ftp://example.com/"),
	fu("gopher://example.com/"),
	fu("javascript:alert(1)"),
	fu("data:text/plain,hello"),
	fu("ws://example.com/"),
	fu("//example.com/"),
	fu("example.com/path"),
	fu("http:example.com"),
	{URL: "", Fetch: forbidden, Skill: invalid},
	inv("http:///path"),
	inv("http://"),
	inv("http://:80/"),
	inv("http://example.com\t/"),
	inv("http://[::1/"),
	{URL: "http://" + strings.Repeat("a", MaxURLBytes), Fetch: invalid, Skill: tooLarge},
	// Ports.
	fu("https://api.example.net/"),
	fu("http://api.example.net/"),
	fu("https://api.example.net:9443/"),
	inv("http://example.com:99999/"),
	inv("http://example.com:0/"),
	inv("https://example.com:443.evil.test/"),
}
