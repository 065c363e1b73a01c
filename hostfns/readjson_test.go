package hostfns_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/secrets"
	"github.com/buddy-run/buddy/runtime"
)

// readJSON runs runtime/testdata/read_json.wasm, which calls fs_read_json
// with pointers into its own memory (see its header).
type readJSON struct {
	t   *testing.T
	ctx context.Context
	mod *runtime.Module
}

func loadReadJSON(t *testing.T, g hostfns.Grants, d hostfns.Deps) (*readJSON, error) {
	return loadFixture(t, "read_json.wasm", g, d)
}

func loadFixture(t *testing.T, name string, g hostfns.Grants, d hostfns.Deps) (*readJSON, error) {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join("..", "runtime", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(t.Context(), runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	set, err := hostfns.Link(g, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close(context.Background()) })
	m := runtime.DefaultManifest("read_json")
	m.Capabilities.FilesRead = true
	if len(g.Write) > 0 {
		m.Capabilities.FilesWrite = true
		m.Permission = runtime.Mutating
	}
	mod, err := rt.Load(t.Context(), wasm, runtime.Spec{Manifest: m, Host: set})
	if err != nil {
		return nil, err
	}
	return &readJSON{t: t, ctx: t.Context(), mod: mod}, nil
}

// call runs export fn with buf, cap and path, and returns the status, n,
// what the guest's buffer holds (min(n, cap) bytes) and the fuel.
func (r *readJSON) call(fn string, buf, bufCap uint32, path string) (errs.Status, uint32, []byte, uint64, error) {
	in := binary.LittleEndian.AppendUint32(nil, buf)
	in = binary.LittleEndian.AppendUint32(in, bufCap)
	res, err := r.mod.CallExport(r.ctx, fn, append(in, path...))
	if err != nil {
		return 0, 0, nil, 0, err
	}
	v := binary.LittleEndian.Uint64(res.Output)
	if v>>40 != 0 {
		r.t.Fatalf("result %#x: bits above the status set", v)
	}
	return errs.Status(v >> 32), uint32(v), res.Output[8:], res.Fuel, nil
}

// jsonOf is encoding/json's string literal of s.
func jsonOf(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestFSReadJSON(t *testing.T) {
	dir := t.TempDir()
	text := "line 1 <b>&</b> \"quoted\" \\ tab\t é \u2028\n"
	files := map[string]string{
		"a.txt": text, "empty.txt": "", "bin.dat": "abc\xffdef",
		"4k.txt": strings.Repeat("0123456789abcdef", 256), "8k.txt": strings.Repeat("0123456789abcdef", 512),
		"big.txt": strings.Repeat("x", 1<<20+1),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := loadReadJSON(t, hostfns.Grants{Read: []string{dir}, MaxReadBytes: 1 << 20}, hostfns.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	const buf, room = 1024, 64 << 10 // the fixture's memory is 128 KiB

	// Allowed: the file as encoding/json writes it, relative or absolute.
	for _, path := range []string{"a.txt", filepath.Join(dir, "a.txt")} {
		st, n, got, _, err := r.call("run", buf, room, path)
		if err != nil || st != errs.StatusOK || string(got) != jsonOf(text) || int(n) != len(got) {
			t.Errorf("%s: %v %d %d %q, want %q", path, err, st, n, got, jsonOf(text))
		}
	}
	if st, _, got, _, err := r.call("run", buf, room, "empty.txt"); err != nil || st != errs.StatusOK || string(got) != `""` {
		t.Errorf("empty file: %v %d %q", err, st, got)
	}

	// Refused as fs_read refuses, the message in the buffer.
	for _, c := range []struct {
		path   string
		status errs.Status
		msg    string
	}{
		{"../a.txt", errs.StatusForbidden, `"../a.txt"`},
		{"/etc/passwd", errs.StatusForbidden, "outside the allowed directories"},
		{"missing.txt", errs.StatusNotFound, "missing.txt"},
		{"big.txt", errs.StatusTooLarge, "read limit"},
		{"", errs.StatusInvalidInput, "empty path"},
		{".", errs.StatusForbidden, "directory"},
		{"bin.dat", errs.StatusInvalidInput, "not UTF-8 text (7 bytes)"},
		{strings.Repeat("a", 4097), errs.StatusTooLarge, "4096-byte cap"},
	} {
		st, n, got, _, err := r.call("run", buf, room, c.path)
		if err != nil || st != c.status || !strings.Contains(string(got), c.msg) || int(n) != len(got) {
			t.Errorf("%.40q: %v status %d n %d %q; want %d, %q", c.path, err, st, n, got, c.status, c.msg)
		}
	}

	// A buffer too small: status OK and the room needed, larger than cap;
	// called again with that room, the file.
	want := jsonOf(files["4k.txt"])
	st, n, _, _, err := r.call("run", buf, 100, "4k.txt")
	if err != nil || st != errs.StatusOK || int(n) != len(want) {
		t.Fatalf("4 KiB into 100 bytes: %v %d n %d, want n %d", err, st, n, len(want))
	}
	if st, _, got, _, err := r.call("run", buf, n, "4k.txt"); err != nil || st != errs.StatusOK || string(got) != want {
		t.Errorf("4 KiB into its exact room: %v %d %d bytes", err, st, len(got))
	}
	if st, n, _, _, _ := r.call("run", buf, 0, "a.txt"); st != errs.StatusOK || int(n) != len(jsonOf(text)) {
		t.Errorf("a.txt into no room: %d n %d", st, n)
	}
	// An error into a small buffer: the message cut to it.
	if st, n, got, _, _ := r.call("run", buf, 5, "missing.txt"); st != errs.StatusNotFound || n != 5 || len(got) != 5 {
		t.Errorf("an error into 5 bytes: %d n %d %q", st, n, got)
	}

	// Guest ranges outside its memory end the call (a trap), whatever the
	// path: the buffer, the path, a capacity past the end.
	for _, c := range []struct {
		fn          string
		buf, bufCap uint32
	}{
		{"run", 128 << 10, 1},          // the buffer starts past the memory
		{"run", 100 << 10, 64 << 10},   // and ends past it
		{"run", 0, 0xFFFFFFFF},         // a capacity of 4 GiB
		{"run", 0xFFFFFFFF, 2},         // wrapping around
		{"bad_path", buf, room},        // the path outside
		{"long_path", buf, room},       // a path length past the memory (and the cap)
		{"long_path", 0xFFFFFFF0, 100}, // both
	} {
		_, _, _, _, err := r.call(c.fn, c.buf, c.bufCap, "a.txt")
		if c.fn == "long_path" && c.buf == buf {
			// Over the path cap: refused before the path is looked at.
			st, _, got, _, err := r.call(c.fn, c.buf, c.bufCap, "a.txt")
			if err != nil || st != errs.StatusTooLarge {
				t.Errorf("long_path: %v %d %q", err, st, got)
			}
			continue
		}
		if !errors.Is(err, errs.ErrTrap) {
			t.Errorf("%s buf %#x cap %#x: %v, want a trap", c.fn, c.buf, c.bufCap, err)
		}
	}

	// Fuel: the same read costs the same every time; a file 4 KiB larger
	// costs at least its documented rate more (a unit per 8 bytes read and
	// per 64 bytes written, on top of the guest's own copying).
	fuel := func(path string) uint64 {
		_, _, _, f, err := r.call("run", buf, room, path)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f4, f8 := fuel("4k.txt"), fuel("8k.txt")
	for range 3 {
		if f := fuel("4k.txt"); f != f4 {
			t.Errorf("4 KiB: fuel %d then %d", f4, f)
		}
		if f := fuel("8k.txt"); f != f8 {
			t.Errorf("8 KiB: fuel %d then %d", f8, f)
		}
	}
	if f8-f4 < 4096/8+4096/64 {
		t.Errorf("fuel 4 KiB %d, 8 KiB %d: the 4 KiB more cost under %d", f4, f8, 4096/8+4096/64)
	}
}

// TestFSReadJSONGated: fs_read_json is linked with the read grant only, and
// a module importing it needs the files_read capability, as fs_read.
func TestFSReadJSONGated(t *testing.T) {
	if _, err := loadReadJSON(t, hostfns.Grants{Write: []string{t.TempDir()}}, hostfns.Deps{}); !errors.Is(err, errs.ErrForbidden) {
		t.Errorf("loaded without a read grant: %v", err)
	}
	wasm, err := os.ReadFile(filepath.Join("..", "runtime", "testdata", "read_json.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	m := runtime.DefaultManifest("read_json")
	if _, err := runtime.Inspect(t.Context(), wasm, m); !errors.Is(err, errs.ErrForbidden) || !strings.Contains(err.Error(), "files_read") {
		t.Errorf("inspected without files_read: %v", err)
	}
	m.Capabilities.FilesRead = true
	if _, err := runtime.Inspect(t.Context(), wasm, m); err != nil {
		t.Errorf("inspected with files_read: %v", err)
	}
}

// TestFSReadJSONRedacts: secrets are replaced in the file and in error
// messages, before the escaping (the JSON holds "[secret:NAME]").
func TestFSReadJSONRedacts(t *testing.T) {
	sec, err := secrets.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := sec.Set(t.Context(), "github", []byte(token)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("my token is \""+token+"\"\n"), 0o600)
	r, err := loadReadJSON(t, hostfns.Grants{Read: []string{dir}}, hostfns.Deps{Secrets: sec})
	if err != nil {
		t.Fatal(err)
	}
	st, _, got, _, err := r.call("run", 1024, 4096, "notes.txt")
	if err != nil || st != errs.StatusOK || string(got) != jsonOf("my token is \"[secret:github]\"\n") {
		t.Errorf("notes.txt: %v %d %q", err, st, got)
	}
	st, _, got, _, err = r.call("run", 1024, 4096, "missing-"+token+".txt")
	if err != nil || st != errs.StatusNotFound || bytes.Contains(got, []byte(token)) || !bytes.Contains(got, []byte("[secret:github]")) {
		t.Errorf("an error naming the token: %v %d %q", err, st, got)
	}
}

// TestFSReadJSONRetryReadsOnce: a guest that tries with too little room and
// again with the room asked for (as read_file does for a file over 16 KiB)
// gets the file whole from one read.
func TestFSReadJSONRetryReadsOnce(t *testing.T) {
	dir := t.TempDir()
	content := strings.Repeat("0123456789abcde\n", 1280) // 20 KiB
	if err := os.WriteFile(filepath.Join(dir, "20k.txt"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := loadReadJSON(t, hostfns.Grants{Read: []string{dir}}, hostfns.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"20k.txt", filepath.Join(dir, "20k.txt")} {
		var u hostfns.Usage
		r.ctx = hostfns.WithUsage(t.Context(), &u)
		st, n, got, _, err := r.call("retry", 1024, 16, path)
		if err != nil || st != errs.StatusOK || string(got) != jsonOf(content) || int(n) != len(got) {
			t.Fatalf("%s: %v %d %d, %d bytes", path, err, st, n, len(got))
		}
		if rep := u.Report(); rep.BytesRead != int64(len(content)) {
			t.Errorf("%s: %d bytes read, want %d (once)", path, rep.BytesRead, len(content))
		}
	}
}

// TestFSReadJSONRetryAfterWrite: a write between the two tries is seen by
// the second: what the first read is not kept across it.
func TestFSReadJSONRetryAfterWrite(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.txt"), []byte("the original content"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := loadFixture(t, "read_json_write.wasm", hostfns.Grants{Read: []string{dir}, Write: []string{dir}}, hostfns.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	st, _, got, _, err := r.call("write_retry", 1024, 4, "w.txt")
	if err != nil || st != errs.StatusOK || string(got) != jsonOf("rewritten") {
		t.Fatalf("%v %d %q, want %q", err, st, got, jsonOf("rewritten"))
	}
}
