package skillmd

import (
	"embed"
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// defaultSkills are the skills buddy ships. The hidden .placeholder keeps
// the pattern valid if none ships; hidden folders are never deployed.
//
//go:embed all:defaults
var defaultSkills embed.FS

// Defaults returns the embedded skills' files (rooted at the skill folders).
func Defaults() fs.FS {
	sub, _ := fs.Sub(defaultSkills, "defaults")
	return sub
}

// EnsureDefaults copies the embedded skills into dir: a skill folder that
// already exists is left as it is (the user's edits win), and hidden
// folders are skipped. It returns the names deployed.
func EnsureDefaults(dir string) ([]string, error) {
	return ensure(Defaults(), dir)
}

func ensure(src fs.FS, dir string) ([]string, error) {
	entries, err := fs.ReadDir(src, ".")
	if err != nil {
		return nil, errs.Wrap(errs.ErrInternal, "embedded skills", err)
	}
	st := NewStore(dir)
	r, err := st.root(true)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var deployed []string
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		if _, err := r.Lstat(name); err == nil {
			continue // the user's, or deployed before: never overwritten
		} else if !errors.Is(err, fs.ErrNotExist) {
			return deployed, errs.Wrap(errs.ErrUnavailable, "skills directory", err)
		}
		tmp := ".default-" + randHex()
		err := fs.WalkDir(src, name, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			dst := tmp + strings.TrimPrefix(p, name)
			if d.IsDir() {
				return r.MkdirAll(dst, 0o700)
			}
			b, err := fs.ReadFile(src, p)
			if err != nil {
				return err
			}
			return r.WriteFile(dst, b, 0o600)
		})
		if err == nil {
			err = r.Rename(tmp, path.Clean(name))
		}
		if err != nil {
			_ = r.RemoveAll(tmp)
			if errors.Is(err, os.ErrExist) {
				continue // another buddy deployed it meanwhile
			}
			return deployed, errs.Wrap(errs.ErrUnavailable, "deploying the default skill "+name, err)
		}
		deployed = append(deployed, name)
	}
	return deployed, nil
}
