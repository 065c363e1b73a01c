package main

import (
	"fmt"
	"strings"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
	"github.com/buddy-run/buddy/runtime"
)

// readRawInput reads --input-raw: inline text, @FILE, or - for stdin, as
// bytes (Extism plugins take bytes: no JSON, no UTF-8 check), bounded like
// --input.
func (a *app) readRawInput(v string) ([]byte, error) {
	switch {
	case v == "-":
		b, err := osfile.ReadAllBounded(a.stdin, runtime.DefaultMaxInputBytes)
		if err != nil {
			return nil, errs.Wrap(errs.ErrInvalidInput, "reading raw input from stdin", err)
		}
		return b, nil
	case strings.HasPrefix(v, "@"):
		b, err := osfile.ReadBounded(v[1:], runtime.DefaultMaxInputBytes)
		if err != nil {
			return nil, errs.Wrap(errs.ErrInvalidInput, "reading raw input file "+v[1:], err)
		}
		return b, nil
	}
	return []byte(v), nil
}

// rawInputAllowed: raw bytes go only to a module whose manifest declares no
// input schema (the default, any JSON object, counts as none); a declared
// schema is a promise about the input that raw bytes would skip.
func rawInputAllowed(path string, m *runtime.Manifest) error {
	if m.DeclaresInput() {
		return errs.New(errs.ErrInvalidInput, fmt.Sprintf("%s: its manifest declares an input schema; pass a JSON object with --input, not --input-raw", path))
	}
	return nil
}
