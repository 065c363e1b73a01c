package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/base/errs"
)

const (
	opRead  = "read"
	opWrite = "write"
)

// Stages of Read and Write at which the context is checked (and the test hook
// runs).
const (
	stageStart  = "start"
	stageOpen   = "open"   // Read: after the stat, before the open
	stageRead   = "read"   // Read: after the fstat, before reading
	stageMkdir  = "mkdir"  // Write: before creating parent directories
	stageCreate = "create" // Write: before creating the temporary file
	stageWrite  = "write"  // Write: before writing the data
	stageSync   = "sync"   // Write: before fsyncing the temporary file
	stageRename = "rename" // Write: before renaming it onto the final name
)

// newFilePerm is the mode of a file Write creates.
const newFilePerm os.FileMode = 0o644

// tempMarker is in the name of every temporary file Write creates.
const tempMarker = ".buddy-tmp-"

// Read returns the content of the regular file at the guest path path. See the
// package documentation for the rules; errors wrap errs.ErrForbidden,
// errs.ErrNotFound, errs.ErrTooLarge, errs.ErrInvalidInput or
// errs.ErrUnavailable and name path.
func (r *Roots) Read(ctx context.Context, path string) ([]byte, error) {
	if err := r.step(ctx, opRead, path, stageStart); err != nil {
		return nil, err
	}
	d, rel, err := r.resolve(opRead, path)
	if err != nil {
		return nil, err
	}
	if rel == "." || namesDirectory(path) {
		return nil, pathErr(opRead, path, errs.ErrForbidden, "is a directory", nil)
	}
	// A cheap first look, so that directories, FIFOs, sockets and devices are
	// refused without being opened. Not relied upon: see the fstat below.
	fi, err := d.root.Stat(rel)
	if err != nil {
		return nil, osErr(opRead, path, "stat", err)
	}
	if err := r.checkReadable(path, fi); err != nil {
		return nil, err
	}
	if r.isPrivate(d, fi) {
		return nil, pathErr(opRead, path, errs.ErrForbidden, privateReason, nil)
	}
	if err := r.step(ctx, opRead, path, stageOpen); err != nil {
		return nil, err
	}
	f, err := d.root.OpenFile(rel, readFlags, 0)
	if err != nil {
		return nil, osErr(opRead, path, "opening", err)
	}
	defer f.Close()
	if err := r.checkOpened(opRead, path, d, f, ""); err != nil {
		return nil, err
	}
	// The file actually opened, whatever was swapped in since the stat.
	if fi, err = f.Stat(); err != nil {
		return nil, osErr(opRead, path, "stat", err)
	}
	if err := r.checkReadable(path, fi); err != nil {
		return nil, err
	}
	if r.isPrivate(d, fi) {
		return nil, pathErr(opRead, path, errs.ErrForbidden, privateReason, nil)
	}
	if err := r.step(ctx, opRead, path, stageRead); err != nil {
		return nil, err
	}
	return r.readAll(path, f, fi.Size())
}

// checkReadable refuses anything but a regular file of at most maxRead bytes.
func (r *Roots) checkReadable(path string, fi os.FileInfo) error {
	m := fi.Mode()
	switch {
	case m.IsDir():
		return pathErr(opRead, path, errs.ErrForbidden, "is a directory", nil)
	case !m.IsRegular():
		return pathErr(opRead, path, errs.ErrForbidden, "not a regular file ("+typeName(m)+")", nil)
	case fi.Size() > r.maxRead:
		return pathErr(opRead, path, errs.ErrTooLarge, fmt.Sprintf("file is %d bytes, over the %d-byte read limit", fi.Size(), r.maxRead), nil)
	}
	return nil
}

// readAll reads f, whose size was size at its fstat, reading at most
// maxRead+1 bytes however much it has grown.
func (r *Roots) readAll(path string, f *os.File, size int64) ([]byte, error) {
	limit := r.maxRead + 1
	want := size + 1 // +1 to see EOF without growing
	if want < 512 {
		want = 512 // files in /proc and the like report size 0
	}
	buf := make([]byte, 0, min(want, limit))
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow
		}
		end := min(int64(cap(buf)), limit)
		asked := int(end) - len(buf)
		n, err := f.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > r.maxRead {
			return nil, pathErr(opRead, path, errs.ErrTooLarge, fmt.Sprintf("file grew past the %d-byte read limit", r.maxRead), nil)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, osErr(opRead, path, "reading", err)
		}
		// A regular file's read comes back short only at its end: when it
		// stops exactly at the size fstat gave, that is the file as it is
		// now, and a last read to see EOF (a syscall, ~1 µs) would only
		// confirm it. A file that grew fills the read (the loop goes on);
		// one that shrank, or whose size fstat does not know (/proc, size
		// 0), stops elsewhere and reads on to EOF.
		if size > 0 && int64(len(buf)) == size && n > 0 && n < asked {
			return buf, nil
		}
	}
}

// typeName names a non-regular file type for an error message.
func typeName(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "irregular file"
}

// Write replaces (or creates) the file at the guest path path with data,
// atomically, creating missing parent directories, and returns len(data). See
// the package documentation for the rules; errors wrap errs.ErrForbidden,
// errs.ErrNotFound, errs.ErrTooLarge, errs.ErrInvalidInput or
// errs.ErrUnavailable and name path. On an error the file at path is as it was,
// except when only the final fsync of the directory failed: then the new
// content is in place, len(data) is returned with an errs.ErrUnavailable error,
// and whether the rename survives a crash is unknown.
func (r *Roots) Write(ctx context.Context, path string, data []byte) (int, error) {
	if err := r.step(ctx, opWrite, path, stageStart); err != nil {
		return 0, err
	}
	d, rel, err := r.resolve(opWrite, path)
	if err != nil {
		return 0, err
	}
	if rel == "." || namesDirectory(path) {
		return 0, pathErr(opWrite, path, errs.ErrForbidden, "is a directory", nil)
	}
	if int64(len(data)) > r.maxWrite {
		return 0, pathErr(opWrite, path, errs.ErrTooLarge, fmt.Sprintf("%d bytes is over the %d-byte write limit", len(data), r.maxWrite), nil)
	}

	// Resolve the parent directory once; every later step works inside it.
	parent, base := filepath.Dir(rel), filepath.Base(rel)
	if err := r.checkDirPath(opWrite, path, d, parent, base); err != nil {
		return 0, err
	}
	dirRoot := d.root
	if parent != "." {
		if err := r.step(ctx, opWrite, path, stageMkdir); err != nil {
			return 0, err
		}
		if err := d.root.MkdirAll(parent, 0o755); err != nil {
			if errors.Is(err, syscall.EEXIST) {
				return 0, pathErr(opWrite, path, errs.ErrInvalidInput, "a parent path component is not a directory", nil)
			}
			return 0, osErr(opWrite, path, "creating parent directories", err)
		}
		sub, err := d.root.OpenRoot(parent)
		if err != nil {
			return 0, osErr(opWrite, path, "opening parent directory", err)
		}
		defer sub.Close()
		dirRoot = sub
	}

	if r.privateName(d, dirRoot, base) {
		return 0, pathErr(opWrite, path, errs.ErrForbidden, privateReason, nil)
	}
	// Where the parent actually is, whatever was swapped in since the check.
	if err := r.checkRootDir(opWrite, path, d, dirRoot, base); err != nil {
		return 0, err
	}
	perm := newFilePerm
	switch fi, err := dirRoot.Lstat(base); {
	case err == nil:
		if err := checkWritable(path, fi); err != nil {
			return 0, err
		}
		perm = fi.Mode().Perm()
	case !errors.Is(err, iofs.ErrNotExist):
		return 0, osErr(opWrite, path, "stat", err)
	}

	if err := r.step(ctx, opWrite, path, stageCreate); err != nil {
		return 0, err
	}
	f, tmp, err := createTemp(dirRoot, base)
	if err != nil {
		return 0, osErr(opWrite, path, "creating temporary file", err)
	}
	renamed := false
	defer func() {
		if !renamed {
			f.Close() // a second Close only returns ErrClosed
			dirRoot.Remove(tmp)
		}
	}()
	if err := r.step(ctx, opWrite, path, stageWrite); err != nil {
		return 0, err
	}
	if _, err := f.Write(data); err != nil {
		return 0, osErr(opWrite, path, "writing", err)
	}
	if err := r.step(ctx, opWrite, path, stageSync); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, osErr(opWrite, path, "syncing", err)
	}
	if err := f.Chmod(perm); err != nil {
		return 0, osErr(opWrite, path, "setting mode", err)
	}
	if err := f.Close(); err != nil {
		return 0, osErr(opWrite, path, "closing", err)
	}
	if err := r.step(ctx, opWrite, path, stageRename); err != nil {
		return 0, err
	}
	if err := dirRoot.Rename(tmp, base); err != nil {
		if errors.Is(err, syscall.EEXIST) { // a directory appeared at base
			return 0, pathErr(opWrite, path, errs.ErrForbidden, "is a directory", nil)
		}
		return 0, osErr(opWrite, path, "renaming temporary file", err)
	}
	renamed = true
	if err := syncDir(dirRoot); err != nil {
		return len(data), osErr(opWrite, path, "syncing directory", err)
	}
	return len(data), nil
}

// checkWritable refuses to replace anything but a regular file.
func checkWritable(path string, fi os.FileInfo) error {
	m := fi.Mode()
	switch {
	case m.IsDir():
		return pathErr(opWrite, path, errs.ErrForbidden, "is a directory", nil)
	case m&os.ModeSymlink != 0:
		return pathErr(opWrite, path, errs.ErrForbidden, "is a symbolic link (not written through)", nil)
	case !m.IsRegular():
		return pathErr(opWrite, path, errs.ErrForbidden, "not a regular file ("+typeName(m)+")", nil)
	}
	return nil
}

// createTemp creates a new file named after base in dir, exclusively.
func createTemp(dir *os.Root, base string) (*os.File, string, error) {
	// Keep the name under NAME_MAX (255) and valid UTF-8 where base is.
	const keep = 100
	if len(base) > keep {
		n := keep
		for n > 0 && !utf8.RuneStart(base[n]) {
			n--
		}
		base = base[:n]
	}
	prefix := "." + base + tempMarker
	for try := 0; ; try++ {
		name := prefix + strconv.FormatUint(rand.Uint64(), 36)
		f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return f, name, nil
		}
		if !errors.Is(err, iofs.ErrExist) || try == 9 {
			return nil, "", err
		}
	}
}

// syncDir fsyncs dir so that a rename in it survives a crash. Filesystems
// that cannot sync a directory are not an error.
func syncDir(dir *os.Root) error {
	f, err := dir.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return err
	}
	return nil
}
