package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/buddy-run/buddy/internal/base/textsafe"
)

// Bounds of Describe.
const (
	// DefaultWidth is how much of an ordinary value Describe shows when
	// width ≤ 0.
	DefaultWidth = 200
	// maxTargetBytes is how much of a target (a path, a URL) is shown in
	// full: PATH_MAX. A longer one is shown as its head and its tail.
	maxTargetBytes = 4096
	maxTargets     = 64 // target fields listed before "… and N more"
	maxOthers      = 32 // other fields listed before "… and N more"
	maxDepth       = 16 // nesting shown; deeper values are named, not shown
	maxKeyBytes    = 128
)

// Describe renders req for a person deciding whether to approve it, one field
// a line, after why it is asked (Request.Reason) and what it will touch
// (Request.Targets), when known:
//
//	asked because: this conversation has read /home/u/tax.pdf; ...
//	will touch:
//	  overwrite /home/u/notes/todo.txt (120 bytes now, 10 bytes after; +1 -3 lines)
//	write_file (mutating) asks to run with:
//	  path: "notes/todo.txt"
//	  content: 10,485,760 bytes, first 200: "..."
//
// The fields that say what is touched (path, url, file, dir, target,
// destination, … and keys ending in path/url/_file/_dir, at any depth) come
// first and are shown whole up to 4 KiB (longer: head and tail with the
// length), so that a write is never approved without its target in sight.
// Other values longer than width bytes (DefaultWidth if width ≤ 0) are folded
// with their length. Nested objects and arrays are flattened to dotted keys
// (options.path, files[2]). A key given twice (or in two cases: Go's JSON
// matches struct fields case-insensitively) is shown each time and flagged,
// since which value the skill reads depends on its parser. Arguments that are
// not a JSON object are shown as "input". Every key and value is escaped with
// textsafe.
func Describe(req Request, width int) string {
	if width <= 0 {
		width = DefaultWidth
	}
	var b strings.Builder
	writeTargets(&b, req)
	fmt.Fprintf(&b, "%s (%s) asks to run with:", textsafe.Terminal(req.Skill, maxKeyBytes), textsafe.Terminal(string(req.Permission), maxKeyBytes))
	fields, ok := flatten(req.Arguments)
	switch {
	case !ok:
		b.WriteString("\n  input (not JSON): ")
		b.WriteString(folded(string(req.Arguments), width))
		return b.String()
	case len(fields) == 0:
		b.WriteString(" no arguments")
		return b.String()
	}
	var targets, others []field
	for _, f := range fields {
		if f.target {
			targets = append(targets, f)
		} else {
			others = append(others, f)
		}
	}
	writeFields(&b, targets, maxTargets, width)
	writeFields(&b, others, maxOthers, width)
	return b.String()
}

func writeFields(b *strings.Builder, fs []field, limit, width int) {
	for i, f := range fs {
		if i == limit {
			n := 0
			for _, g := range fs[i:] {
				n += len(g.value) + g.size
			}
			fmt.Fprintf(b, "\n  … and %d more fields (%s bytes) not shown", len(fs)-i, textsafe.Bytes(n))
			return
		}
		b.WriteString("\n  ")
		b.WriteString(textsafe.Terminal(f.key, maxKeyBytes))
		b.WriteString(": ")
		switch {
		case f.deep:
			fmt.Fprintf(b, "nested deeper than %d levels, %s bytes, not shown", maxDepth, textsafe.Bytes(f.size))
		case !f.str:
			b.WriteString(unquoted(f.value, width))
		case f.target:
			b.WriteString(whole(f.value))
		default:
			b.WriteString(folded(f.value, width))
		}
		if f.repeated {
			b.WriteString("  (key given more than once: the skill may read any of them)")
		}
	}
}

// folded shows v quoted if it fits in width, else its length and its start.
func folded(v string, width int) string {
	shown, rest := textsafe.Prefix(v, width)
	if rest == 0 {
		return quote(shown)
	}
	return fmt.Sprintf(`%s bytes, first %s: %s…`, textsafe.Bytes(len(v)), textsafe.Bytes(len(v)-rest), quote(shown))
}

// unquoted shows a number, a bool or null (a JSON number may be long).
func unquoted(v string, width int) string {
	shown, rest := textsafe.Prefix(v, width)
	if rest == 0 {
		return shown
	}
	return fmt.Sprintf(`%s bytes, first %s: %s…`, textsafe.Bytes(len(v)), textsafe.Bytes(len(v)-rest), shown)
}

// quote puts escaped text in quotes, escaping the quotes inside so that a
// value cannot seem to end early and another field seem to follow.
func quote(shown string) string {
	return `"` + strings.ReplaceAll(shown, `"`, `\"`) + `"`
}

// whole shows a target whole up to maxTargetBytes, else its head and its
// tail (where a path's file name and a URL's query are) with the length.
func whole(v string) string {
	shown, rest := textsafe.Prefix(v, maxTargetBytes)
	if rest == 0 {
		return quote(shown)
	}
	half := maxTargetBytes / 2
	head, headRest := textsafe.Prefix(v, half)
	headEnd := len(v) - headRest
	tailStart := max(len(v)-half, headEnd)
	for tailStart < len(v) && v[tailStart]&0xc0 == 0x80 {
		tailStart++ // start the tail on a rune
	}
	// An escape is at most 4 bytes a byte: the tail is never cut.
	tail, _ := textsafe.Prefix(v[tailStart:], 4*half)
	return fmt.Sprintf(`%s bytes, first %s: %s … %s bytes not shown … last %s: %s`,
		textsafe.Bytes(len(v)), textsafe.Bytes(headEnd), quote(head),
		textsafe.Bytes(tailStart-headEnd), textsafe.Bytes(len(v)-tailStart), quote(tail))
}

// field is one leaf of the arguments.
type field struct {
	key      string // dotted path: options.path, files[2]
	value    string // a string's text, or the JSON of a number, bool, null, {} or []
	str      bool   // value is a string
	target   bool   // the key says what is touched
	repeated bool   // the same key (case-insensitively) appears twice in its object
	deep     bool   // nested past maxDepth: not shown
	size     int    // bytes of JSON skipped, when deep
}

// flatten lists the leaves of raw in document order; ok is false if raw is
// not exactly one JSON value.
func flatten(raw []byte) (fields []field, ok bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, true
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, false
	}
	if d, isDelim := tok.(json.Delim); isDelim && d == '{' {
		err = walkObject(dec, "", 0, false, &fields)
	} else {
		err = walkValue(dec, tok, "input", "input", 0, &fields)
	}
	if err != nil {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false // trailing data: the skill gets bytes we did not show
	}
	return fields, true
}

// walkObject reads an object's members after its '{'.
func walkObject(dec *json.Decoder, prefix string, depth int, parentTarget bool, out *[]field) error {
	seen := map[string][2]int{} // lower-cased key → its first fields in *out, [start, end)
	empty := true
	for dec.More() {
		empty = false
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := tok.(string)
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		first := len(*out)
		tok, err = dec.Token()
		if err != nil {
			return err
		}
		if err := walkValue(dec, tok, key, k, depth+1, out); err != nil {
			return err
		}
		lk := fold(k)
		prev, dup := seen[lk]
		if !dup {
			seen[lk] = [2]int{first, len(*out)}
			continue
		}
		for _, r := range [][2]int{prev, {first, len(*out)}} {
			for i := r[0]; i < r[1]; i++ {
				(*out)[i].repeated = true
			}
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return err
	}
	if empty && prefix != "" {
		*out = append(*out, field{key: prefix, value: "{}", target: parentTarget})
	}
	return nil
}

// walkValue reads the value that starts with tok.
func walkValue(dec *json.Decoder, tok json.Token, key, leaf string, depth int, out *[]field) error {
	target := isTarget(leaf)
	switch v := tok.(type) {
	case string:
		*out = append(*out, field{key: key, value: v, str: true, target: target})
		return nil
	case json.Number:
		*out = append(*out, field{key: key, value: v.String(), target: target})
		return nil
	case bool:
		*out = append(*out, field{key: key, value: fmt.Sprint(v), target: target})
		return nil
	case nil:
		*out = append(*out, field{key: key, value: "null", target: target})
		return nil
	}
	d, _ := tok.(json.Delim)
	if depth >= maxDepth {
		n, err := skip(dec, d)
		*out = append(*out, field{key: key, deep: true, size: n, target: target})
		return err
	}
	if d == '{' {
		return walkObject(dec, key, depth, target, out)
	}
	i := 0
	for ; dec.More(); i++ {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if err := walkValue(dec, tok, fmt.Sprintf("%s[%d]", key, i), leaf, depth+1, out); err != nil {
			return err
		}
	}
	if i == 0 {
		*out = append(*out, field{key: key, value: "[]", target: target})
	}
	_, err := dec.Token() // ']'
	return err
}

// skip reads the rest of a value that opened with d, returning about how many
// bytes it held.
func skip(dec *json.Decoder, d json.Delim) (int, error) {
	start := dec.InputOffset()
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return 0, err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return int(dec.InputOffset() - start + 1), nil
}

// targetKeys name what a call touches.
var targetKeys = map[string]bool{
	"path": true, "paths": true, "file": true, "files": true, "filename": true,
	"dir": true, "dirs": true, "directory": true, "folder": true,
	"url": true, "urls": true, "uri": true, "href": true, "link": true,
	"endpoint": true, "host": true, "domain": true, "address": true,
	"target": true, "destination": true, "dest": true, "dst": true,
	"to": true, "from": true, "src": true, "source": true, "location": true,
}

// fold maps a key to what Go's case-insensitive JSON matching treats as the
// same key (ſ is s, the Kelvin sign is k).
func fold(key string) string { return strings.ToLower(strings.ToUpper(key)) }

func isTarget(key string) bool {
	k := strings.ReplaceAll(fold(key), "-", "_")
	k = strings.TrimRight(k, "0123456789_") // path2, url_1
	if targetKeys[k] {
		return true
	}
	for _, suffix := range []string{"path", "paths", "url", "urls", "uri", "_file", "_files", "_dir", "_directory", "filename"} {
		if strings.HasSuffix(k, suffix) {
			return true
		}
	}
	return false
}

// writeTargets writes the reason and the resolved targets of req, escaped,
// each on its own line, before the arguments.
func writeTargets(b *strings.Builder, req Request) {
	if req.Reason != "" {
		b.WriteString("asked because: ")
		b.WriteString(textsafe.Terminal(req.Reason, maxTargetBytes))
		b.WriteString("\n")
	}
	if len(req.Targets) == 0 {
		return
	}
	b.WriteString("will touch:\n")
	for i, t := range req.Targets {
		if i == maxTargets {
			fmt.Fprintf(b, "  … and %d more\n", len(req.Targets)-i)
			break
		}
		b.WriteString("  ")
		b.WriteString(textsafe.Terminal(t.String(), 2*maxTargetBytes))
		b.WriteString("\n")
	}
}
