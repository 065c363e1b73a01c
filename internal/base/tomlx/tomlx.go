// Package tomlx decodes TOML strictly with go-toml/v2 and reports every problem
// with its key path and line, so that skill.toml and buddy.toml errors read
// "resources.fuel (line 12): must be > 0".
//
//	var m manifestFile
//	idx, err := tomlx.Decode(data, &m) // unknown keys, bad types, syntax errors
//	if err != nil { return err }
//	if m.Fuel <= 0 { errs = append(errs, idx.Errorf([]string{"resources", "fuel"}, "must be > 0")) }
//	return tomlx.Join(errs) // nil when empty
package tomlx

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// FieldError is one problem in a TOML document. It unwraps to errs.ErrConfig.
type FieldError struct {
	Path string // dotted key path, e.g. "skills.read_file.allowed_directories"; "" for the document
	Line int    // 1-based; 0 when unknown
	Msg  string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path)
	}
	if e.Line > 0 {
		if e.Path != "" {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "(line %d)", e.Line)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap makes every field error a config error.
func (e *FieldError) Unwrap() error { return errs.ErrConfig }

// Errors is a list of field errors reported together.
type Errors []*FieldError

func (l Errors) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// Unwrap exposes each field error (and so errs.ErrConfig) to errors.Is/As.
func (l Errors) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Join returns nil for no errors, the error itself for one, and Errors otherwise,
// in document order (errors with no line last, otherwise in the order given).
func Join(l []*FieldError) error {
	switch len(l) {
	case 0:
		return nil
	case 1:
		return l[0]
	}
	out := slices.Clone(l)
	slices.SortStableFunc(out, func(a, b *FieldError) int {
		la, lb := a.Line, b.Line
		if la == 0 {
			la = math.MaxInt
		}
		if lb == 0 {
			lb = math.MaxInt
		}
		return cmp.Compare(la, lb)
	})
	return Errors(out)
}

// Index maps dotted key paths of a document to the line where they are set.
type Index struct {
	lines map[string]int
}

// Line returns the line of a key path, or of its nearest ancestor that has one.
func (x *Index) Line(path []string) int {
	if x == nil {
		return 0
	}
	keys := make([]string, len(path))
	for i, k := range path {
		if j := strings.IndexByte(k, '['); j > 0 {
			k = k[:j] // "allowed_directories[2]" is located at its key
		}
		keys[i] = k
	}
	for n := len(keys); n > 0; n-- {
		if l, ok := x.lines[strings.Join(keys[:n], ".")]; ok {
			return l
		}
	}
	return 0
}

// Errorf makes a FieldError for path with the line the index knows.
func (x *Index) Errorf(path []string, format string, args ...any) *FieldError {
	return &FieldError{Path: strings.Join(path, "."), Line: x.Line(path), Msg: fmt.Sprintf(format, args...)}
}

// Decode strictly decodes doc into v. It reports every unknown key, or the first
// type or syntax error, as field errors; the returned Index locates keys for the
// caller's own validation messages.
func Decode(doc []byte, v any) (*Index, error) {
	idx := index(doc)
	err := toml.NewDecoder(strings.NewReader(string(doc))).DisallowUnknownFields().Decode(v)
	if err == nil {
		return idx, nil
	}
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		out := make([]*FieldError, 0, len(strict.Errors))
		for i := range strict.Errors {
			de := &strict.Errors[i]
			row, _ := de.Position()
			out = append(out, &FieldError{Path: idx.fullPath(de.Key(), row), Line: row, Msg: "unknown key"})
		}
		return idx, Join(out)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		return idx, &FieldError{Path: strings.Join(de.Key(), "."), Line: row, Msg: cleanTypeError(de.Error())}
	}
	return idx, &FieldError{Msg: cleanTypeError(err.Error())}
}

// fullPath completes a key path that go-toml reports without the keys of the
// inline tables it sits in ("nope" for `server = {nope = 1}`, "server.key" for
// `[server]` `tls = {key = 1}`): when the path is not in the index on that line, the one
// indexed path on the same line that ends with the same key and contains the
// reported parts in order is meant.
func (x *Index) fullPath(key []string, line int) string {
	path := strings.Join(key, ".")
	if l, ok := x.lines[path]; ok && l == line || line == 0 || len(key) == 0 {
		return path
	}
	found := ""
	for p, l := range x.lines {
		parts := strings.Split(p, ".")
		if l != line || parts[len(parts)-1] != key[len(key)-1] || !subsequence(key, parts) {
			continue
		}
		if found != "" {
			return path // ambiguous: keep what go-toml said
		}
		found = p
	}
	if found == "" {
		return path
	}
	return found
}

// subsequence reports whether sub appears in s in order.
func subsequence(sub, s []string) bool {
	i := 0
	for _, p := range s {
		if i < len(sub) && p == sub[i] {
			i++
		}
	}
	return i == len(sub)
}

// cleanTypeError rewrites go-toml's Go-flavoured messages ("toml: cannot decode
// TOML string into struct field x.y of type int64") into user terms ("expected
// an integer, got a string"); other messages lose their "toml: " prefix.
func cleanTypeError(msg string) string {
	msg = strings.TrimPrefix(msg, "toml: ")
	rest, ok := strings.CutPrefix(msg, "cannot decode TOML ")
	if !ok {
		return msg
	}
	got, target, ok := strings.Cut(rest, " into ")
	if !ok {
		return msg
	}
	if strings.HasPrefix(target, "struct field ") {
		// "struct field T.F of type X": T may be a long anonymous struct type.
		i := strings.LastIndex(target, " of type ")
		if i < 0 {
			return msg
		}
		target = target[i+len(" of type "):]
	}
	return "expected " + tomlKind(target) + ", got " + withArticle(got)
}

// tomlKind names the TOML kind of value that decodes into a Go type.
func tomlKind(goType string) string {
	t := strings.TrimLeft(goType, "*")
	switch {
	case strings.HasPrefix(t, "["):
		return "an array"
	case strings.HasPrefix(t, "map[") || strings.HasPrefix(t, "struct"):
		return "a table"
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case t == "float32" || t == "float64":
		return "a float"
	case t == "time.Time" || strings.HasPrefix(t, "toml.Local"):
		return "a datetime"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint") || t == "time.Duration":
		return "an integer"
	}
	return "a value of Go type " + goType
}

func withArticle(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

// index walks the document with the unstable parser and records the line of
// every key (tables, dotted keys and inline tables). A document that does not
// parse gives an empty index: Decode reports the syntax error itself.
func index(doc []byte) *Index {
	x := &Index{lines: map[string]int{}}
	p := unstable.Parser{}
	p.Reset(doc)
	var prefix []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			prefix = keyParts(e.Key())
			x.record(&p, prefix, e)
		case unstable.KeyValue:
			x.keyValue(&p, prefix, e)
		}
	}
	return x
}

func (x *Index) keyValue(p *unstable.Parser, prefix []string, kv *unstable.Node) {
	path := append(append([]string{}, prefix...), keyParts(kv.Key())...)
	x.record(p, path, kv)
	x.value(p, path, kv.Value())
}

// value indexes the keys of inline tables, also inside arrays: "t[1].x" is
// located at "t.x".
func (x *Index) value(p *unstable.Parser, path []string, v *unstable.Node) {
	if v == nil {
		return
	}
	switch v.Kind {
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			x.keyValue(p, path, it.Node())
		}
	case unstable.Array:
		it := v.Children()
		for it.Next() {
			x.value(p, path, it.Node())
		}
	}
}

// record sets the line of path and of each of its prefixes not seen before: a
// dotted key "a.b.c = 1" or a header "[a.b]" also defines "a" (and "a.b").
func (x *Index) record(p *unstable.Parser, path []string, n *unstable.Node) {
	line := 0
	it := n.Key()
	if it.Next() {
		if r := it.Node().Raw; r.Length > 0 {
			line = p.Shape(r).Start.Line
		}
	}
	for i := 1; i <= len(path); i++ {
		key := strings.Join(path[:i], ".")
		if _, ok := x.lines[key]; !ok {
			x.lines[key] = line
		}
	}
}

func keyParts(it unstable.Iterator) []string {
	var out []string
	for it.Next() {
		out = append(out, string(it.Node().Data))
	}
	return out
}

// Validator collects the problems of one decoded document, each with its
// key path and line, for buddy.toml (internal/config) and skill.toml
// (runtime) alike: the checks both make are made here, once.
//
//	v := tomlx.NewValidator(idx)
//	fuel := v.Positive(f.Fuel, "resources.fuel", rules.MaxFuel)
//	if err := v.Err(); err != nil { ... }
type Validator struct {
	idx  *Index
	errs []*FieldError
}

// NewValidator validates the document idx indexes.
func NewValidator(idx *Index) *Validator { return &Validator{idx: idx} }

// Fail records a problem at a dotted key path ("skills.read_file.fuel";
// an index like "[2]" stays on the last part).
func (v *Validator) Fail(path string, format string, args ...any) {
	v.errs = append(v.errs, v.idx.Errorf(strings.Split(path, "."), format, args...))
}

// Positive returns *n when it is in 1..max, else records why and returns 0
// (0 too when the key is absent).
func (v *Validator) Positive(n *int64, path string, max int64) int64 {
	if n == nil {
		return 0
	}
	if *n <= 0 {
		v.Fail(path, "must be > 0")
		return 0
	}
	if *n > max {
		v.Fail(path, "must be <= %d", max)
		return 0
	}
	return *n
}

// Duration parses *s ("10s", "1m30s"), which must be in (0, max], else
// records why and returns 0 (0 too when the key is absent).
func (v *Validator) Duration(s *string, path string, max time.Duration) time.Duration {
	if s == nil {
		return 0
	}
	d, err := time.ParseDuration(*s)
	switch {
	case err != nil:
		v.Fail(path, "%q is not a duration (like \"10s\" or \"1m30s\")", *s)
	case d <= 0:
		v.Fail(path, "must be > 0")
	case d > max:
		v.Fail(path, "must be <= %s", shortDuration(max))
	default:
		return d
	}
	return 0
}

// Err is every problem recorded, joined (nil when there is none).
func (v *Validator) Err() error { return Join(v.errs) }

// shortDuration writes d without zero units: 24h, 1h30m, 90s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
