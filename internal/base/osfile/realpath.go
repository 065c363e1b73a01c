package osfile

import "path/filepath"

// RealPath is p with its symbolic links resolved as far as it exists (the
// rest joined on as named), as SQLite and the kernel resolve it: a link
// named notes.md cannot stand for secret.txt in a glob match, and the files
// named after a database (its stamp, its setup lock) are the same for every
// process that reaches it through any link.
func RealPath(p string) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	dir, base := filepath.Split(p)
	if dir == "" || dir == p {
		return p
	}
	return filepath.Join(RealPath(filepath.Clean(dir)), base)
}
