package fs_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/buddy-run/buddy/hostfns/fs"
	"github.com/buddy-run/buddy/internal/base/errs"
)

func Example() {
	dir, err := os.MkdirTemp("", "buddy-fs-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	roots, err := fs.Open([]string{dir}, fs.Options{MaxReadBytes: 1 << 20})
	if err != nil {
		panic(err)
	}
	defer roots.Close()
	ctx := context.TODO() // the host function's call context

	n, err := roots.Write(ctx, "notes/today.md", []byte("hello"))
	fmt.Println(n, err)
	data, err := roots.Read(ctx, "notes/today.md")
	fmt.Println(string(data), err)

	_, err = roots.Read(ctx, "../etc/passwd")
	fmt.Println(errors.Is(err, errs.ErrForbidden), errs.KindOf(err))
	fmt.Println(err)
	_, err = roots.Read(ctx, "/etc/passwd")
	fmt.Println(err)
	// Output:
	// 5 <nil>
	// hello <nil>
	// true forbidden
	// read "../etc/passwd": path contains a ".." element
	// read "/etc/passwd": outside the allowed directories
}
