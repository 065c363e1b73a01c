package skillmd

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// skillFile is the name of a skill folder's file.
const skillFile = "SKILL.md"

// Copy limits for Add.
const (
	MaxFolderBytes = 16 << 20
	MaxFolderFiles = 1000
)

// Store is the folder of SKILL.md skills: <dir>/<name>/SKILL.md. Every write
// goes through os.Root, so no name, resource path or symbolic link can reach
// outside the folder.
type Store struct{ dir string }

// NewStore returns the store in dir (created on the first write).
func NewStore(dir string) *Store { return &Store{dir: dir} }

// Dir is the store's folder.
func (st *Store) Dir() string { return st.dir }

// root opens the store's folder, creating it (0700) when create is set.
func (st *Store) root(create bool) (*os.Root, error) {
	if create {
		if err := os.MkdirAll(st.dir, 0o700); err != nil {
			return nil, errs.Wrap(errs.ErrUnavailable, "skills directory", err)
		}
	}
	r, err := os.OpenRoot(st.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, errs.Wrap(errs.ErrUnavailable, "skills directory", err)
	}
	return r, nil
}

// ListActive loads every skill whose status is active. Hidden folders
// (".placeholder", ".git") are skipped silently; a folder whose SKILL.md does
// not load is reported in problems and the others load all the same.
func (st *Store) ListActive(ctx context.Context) (skills []*Skill, problems []error) {
	all, problems := st.List(ctx)
	for _, s := range all {
		if s.Status == StatusActive {
			skills = append(skills, s)
		}
	}
	return skills, problems
}

// List loads every skill, whatever its status.
func (st *Store) List(ctx context.Context) ([]*Skill, []error) {
	r, err := st.root(false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{err}
	}
	defer r.Close()
	f, err := r.Open(".")
	if err != nil {
		return nil, []error{errs.Wrap(errs.ErrUnavailable, "reading "+st.dir, err)}
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil, []error{errs.Wrap(errs.ErrUnavailable, "reading "+st.dir, err)}
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if e.IsDir() || e.Type()&fs.ModeSymlink != 0 {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	skills := make([]*Skill, len(names))
	problems := make([]error, len(names))
	// Parsing is CPU-bound: spread it over the cores (1,000 skills in well
	// under 100 ms, docs/BENCHMARKS.md).
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(1, min(runtime.GOMAXPROCS(0), len(names))) {
		wg.Go(func() {
			for i := range next {
				skills[i], problems[i] = st.load(r, names[i])
			}
		})
	}
	for i := range names {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	var outS []*Skill
	var outP []error
	for i := range names {
		if problems[i] != nil {
			outP = append(outP, problems[i])
		} else if skills[i] != nil {
			outS = append(outS, skills[i])
		}
	}
	if ctx.Err() != nil {
		outP = append(outP, errs.Wrap(errs.ErrCanceled, "loading skills", ctx.Err()))
	}
	return outS, outP
}

// load reads one skill folder through the root: a SKILL.md (or folder) that
// is a symbolic link out of the store does not load.
func (st *Store) load(r *os.Root, name string) (*Skill, error) {
	path := filepath.Join(st.dir, name, "SKILL.md")
	f, err := r.Open(name + "/SKILL.md")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &FileError{Path: path, Msg: "missing: a skill folder holds a SKILL.md"}
		}
		return nil, &FileError{Path: path, Msg: fmt.Sprintf("cannot be read: %v", err)}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, &FileError{Path: path, Msg: fmt.Sprintf("cannot be read: %v", err)}
	}
	if !fi.Mode().IsRegular() {
		return nil, &FileError{Path: path, Msg: "is not a regular file"}
	}
	if fi.Size() > MaxFileBytes {
		return nil, &FileError{Path: path, Msg: fmt.Sprintf("larger than %d bytes", MaxFileBytes)}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, &FileError{Path: path, Msg: fmt.Sprintf("cannot be read: %v", err)}
	}
	s, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	if s.Name != name {
		return nil, &FileError{Path: path, Line: 2, Msg: fmt.Sprintf("name %q does not match its folder %q", s.Name, name)}
	}
	s.Dir, s.Path = filepath.Join(st.dir, name), path
	return s, nil
}

// Get loads one skill by name.
func (st *Store) Get(name string) (*Skill, error) {
	if !ValidName(name) {
		return nil, errs.New(errs.ErrNotFound, fmt.Sprintf("no SKILL.md skill %q", name))
	}
	r, err := st.root(false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.New(errs.ErrNotFound, fmt.Sprintf("no SKILL.md skill %q", name))
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if _, err := r.Lstat(name); errors.Is(err, fs.ErrNotExist) {
		return nil, errs.New(errs.ErrNotFound, fmt.Sprintf("no SKILL.md skill %q", name))
	}
	return st.load(r, name)
}

// Save validates s and writes <dir>/<name>/SKILL.md (replacing it
// atomically). A skill without a status is saved active.
func (st *Store) Save(s *Skill) error {
	c := *s
	if c.Status == "" {
		c.Status = StatusActive
	}
	if c.Type == "" {
		c.Type = TypeInstruction
	}
	if err := c.Validate(); err != nil {
		return errs.Wrap(errs.ErrInvalidInput, "skill "+c.Name, err)
	}
	data, err := Render(&c)
	if err != nil {
		return err
	}
	r, err := st.root(true)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := noLinks(r, c.Name); err != nil {
		return err
	}
	if err := r.MkdirAll(c.Name, 0o700); err != nil {
		return errs.Wrap(errs.ErrUnavailable, "creating the folder of "+c.Name, err)
	}
	return writeAtomic(r, c.Name+"/SKILL.md", data)
}

// Delete removes a skill's whole folder.
func (st *Store) Delete(name string) error {
	if !ValidName(name) {
		return errs.New(errs.ErrNotFound, fmt.Sprintf("no SKILL.md skill %q", name))
	}
	r, err := st.root(false)
	if errors.Is(err, fs.ErrNotExist) {
		return errs.New(errs.ErrNotFound, fmt.Sprintf("no SKILL.md skill %q", name))
	}
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := r.Lstat(name); err != nil {
		return errs.New(errs.ErrNotFound, fmt.Sprintf("no SKILL.md skill %q", name))
	}
	if err := r.RemoveAll(name); err != nil {
		return errs.Wrap(errs.ErrUnavailable, "removing "+name, err)
	}
	return nil
}

// SaveResource writes a file inside a skill's folder (scripts/run.sh,
// reference/api.md). The path must be relative, without "..", not the
// SKILL.md itself, and cross no symbolic link.
func (st *Store) SaveResource(name, rel string, data []byte) error {
	if !ValidName(name) {
		return errs.New(errs.ErrInvalidInput, fmt.Sprintf("skill name %q is not valid", name))
	}
	clean, err := cleanRel(rel)
	if err != nil {
		return err
	}
	if strings.EqualFold(clean, "SKILL.md") {
		return errs.New(errs.ErrForbidden, "the SKILL.md is written with Save, which validates it")
	}
	r, err := st.root(true)
	if err != nil {
		return err
	}
	defer r.Close()
	target := name + "/" + clean
	if err := noLinks(r, target); err != nil {
		return err
	}
	if dir := filepath.ToSlash(filepath.Dir(target)); dir != "." {
		if err := r.MkdirAll(dir, 0o700); err != nil {
			return errs.Wrap(errs.ErrForbidden, "creating "+dir, err)
		}
	}
	return writeAtomic(r, target, data)
}

// cleanRel checks a resource path: relative, no "..", no NUL.
func cleanRel(rel string) (string, error) {
	if rel == "" || strings.ContainsRune(rel, 0) || filepath.IsAbs(rel) || strings.HasPrefix(rel, "/") {
		return "", errs.New(errs.ErrForbidden, fmt.Sprintf("resource path %q must be relative to the skill folder", rel))
	}
	for _, seg := range strings.Split(filepath.ToSlash(rel), "/") {
		if seg == ".." {
			return "", errs.New(errs.ErrForbidden, fmt.Sprintf("resource path %q leaves the skill folder", rel))
		}
	}
	c := filepath.ToSlash(filepath.Clean(rel))
	if c == "." {
		return "", errs.New(errs.ErrForbidden, fmt.Sprintf("resource path %q names the folder itself", rel))
	}
	return c, nil
}

// noLinks refuses a path any existing component of which is a symbolic link
// (os.Root already keeps links inside the folder; the file gate refuses them
// outright, and so does this).
func noLinks(r *os.Root, rel string) error {
	segs := strings.Split(rel, "/")
	for i := range segs {
		p := strings.Join(segs[:i+1], "/")
		fi, err := r.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return errs.Wrap(errs.ErrForbidden, p, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return errs.New(errs.ErrForbidden, fmt.Sprintf("%s is a symbolic link: skill files never follow links", p))
		}
	}
	return nil
}

// writeAtomic writes a file through r by a temporary file and a rename.
func writeAtomic(r *os.Root, rel string, data []byte) error {
	tmp := fmt.Sprintf("%s.tmp-%s", rel, randHex())
	if err := r.WriteFile(tmp, data, 0o600); err != nil {
		return errs.Wrap(errs.ErrUnavailable, "writing "+rel, err)
	}
	if err := r.Rename(tmp, rel); err != nil {
		_ = r.Remove(tmp)
		return errs.Wrap(errs.ErrUnavailable, "writing "+rel, err)
	}
	return nil
}

func randHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Add copies a skill folder into the store, validating its SKILL.md first.
// Symbolic links in the folder are refused; hidden files and folders (.git)
// are left out. An existing skill of the same name is not replaced.
func (st *Store) Add(ctx context.Context, src string) (*Skill, error) {
	src = filepath.Clean(src)
	fi, err := os.Stat(src)
	if err != nil {
		return nil, errs.Wrap(errs.ErrNotFound, "skill folder "+src, err)
	}
	if !fi.IsDir() {
		return nil, errs.New(errs.ErrInvalidInput, src+" is not a folder holding a SKILL.md")
	}
	srcRoot, err := os.OpenRoot(src)
	if err != nil {
		return nil, errs.Wrap(errs.ErrInvalidInput, "skill folder "+src, err)
	}
	defer srcRoot.Close()
	mdInfo, err := srcRoot.Lstat("SKILL.md")
	if err != nil || !mdInfo.Mode().IsRegular() {
		return nil, errs.New(errs.ErrInvalidInput, filepath.Join(src, "SKILL.md")+" is missing or not a regular file")
	}
	data, err := srcRoot.ReadFile("SKILL.md")
	if err != nil {
		return nil, errs.Wrap(errs.ErrInvalidInput, "reading "+filepath.Join(src, "SKILL.md"), err)
	}
	s, err := Parse(filepath.Join(src, "SKILL.md"), data)
	if err != nil {
		return nil, err
	}
	type file struct {
		rel  string
		mode fs.FileMode
	}
	var files []file
	var total int64
	err = fs.WalkDir(srcRoot.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return errs.New(errs.ErrForbidden, fmt.Sprintf("%s is a symbolic link: a skill folder is copied without links", filepath.Join(src, p)))
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return errs.New(errs.ErrInvalidInput, fmt.Sprintf("%s is not a regular file", filepath.Join(src, p)))
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		files = append(files, file{p, info.Mode()})
		if len(files) > MaxFolderFiles || total > MaxFolderBytes {
			return errs.New(errs.ErrTooLarge, fmt.Sprintf("skill folder %s is over %d files or %d bytes", src, MaxFolderFiles, MaxFolderBytes))
		}
		return ctx.Err()
	})
	if err != nil {
		if errs.KindOf(err) == errs.KindInternal {
			err = errs.Wrap(errs.ErrInvalidInput, "copying "+src, err)
		}
		return nil, err
	}
	r, err := st.root(true)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if _, err := r.Lstat(s.Name); err == nil {
		return nil, errs.New(errs.ErrInvalidInput, fmt.Sprintf("a skill %q already exists in %s: remove it first (buddy skill remove %s)", s.Name, st.dir, s.Name))
	}
	tmp := ".add-" + randHex() // hidden: never loaded if left behind
	if err := r.Mkdir(tmp, 0o700); err != nil {
		return nil, errs.Wrap(errs.ErrUnavailable, "copying "+src, err)
	}
	defer r.RemoveAll(tmp)
	for _, f := range files {
		b, err := srcRoot.ReadFile(f.rel)
		if err != nil {
			return nil, errs.Wrap(errs.ErrInvalidInput, "reading "+filepath.Join(src, f.rel), err)
		}
		dst := tmp + "/" + filepath.ToSlash(f.rel)
		if d := filepath.ToSlash(filepath.Dir(dst)); d != tmp {
			if err := r.MkdirAll(d, 0o700); err != nil {
				return nil, errs.Wrap(errs.ErrUnavailable, "copying "+f.rel, err)
			}
		}
		if err := r.WriteFile(dst, b, f.mode.Perm()&0o700|0o600); err != nil {
			return nil, errs.Wrap(errs.ErrUnavailable, "copying "+f.rel, err)
		}
	}
	if err := r.Rename(tmp, s.Name); err != nil {
		return nil, errs.Wrap(errs.ErrUnavailable, "adding "+s.Name, err)
	}
	s.Dir, s.Path = filepath.Join(st.dir, s.Name), filepath.Join(st.dir, s.Name, "SKILL.md")
	return s, nil
}

// Fingerprint digests what the folder holds now without parsing it: each
// skill folder's name and its SKILL.md's size, mode and modification time.
// Two equal fingerprints mean no skill was added, removed or (as far as the
// file system's clock can tell) changed; a Catalog compares them to see
// changes made while buddy runs. A missing folder has the fingerprint "".
func (st *Store) Fingerprint() (string, error) {
	entries, err := os.ReadDir(st.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", errs.Wrap(errs.ErrUnavailable, "reading "+st.dir, err)
	}
	h := sha256.New()
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !(e.IsDir() || e.Type()&fs.ModeSymlink != 0) {
			continue
		}
		fmt.Fprintf(h, "%q %v", name, e.Type())
		for _, f := range []string{"", skillFile} {
			if fi, err := os.Stat(filepath.Join(st.dir, name, f)); err == nil {
				fmt.Fprintf(h, " %d %v %d", fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
			} else {
				h.Write([]byte(" -"))
			}
		}
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
