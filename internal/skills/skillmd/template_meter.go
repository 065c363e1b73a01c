package skillmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// A template render cannot be stopped from outside: text/template has no
// context. So a render stops itself. Every place where it can loop, or work in
// proportion to its data, first calls its meter, and an error from the meter
// ends Execute:
//
//   - each range iteration: {{if _buddy_tick}}{{end}} heads every range body;
//   - each range over a map, whose keys text/template sorts before the first
//     iteration: {{if _buddy_sort .m}}{{end}} precedes {{range .m}} and
//     charges the sort;
//   - each call of a function that makes, escapes or compares text: printf,
//     print, println, html, js, urlquery, eq, ne, lt, le, gt and ge are
//     replaced by ones that charge a bound of their work (from the sizes of
//     their arguments, and printf's widths and precisions) before they run;
//   - each write (capWriter).
//
// The other built-ins (and, or, not, len, index, slice, call) do constant
// work a call; printing a value ({{.}}) formats at most the parameters, which
// are capped, before its write is checked; with no {{template}}, nothing else
// repeats.

// The functions meterRanges inserts; a template may not name them itself
// (checkArg).
const (
	tickFunc = "_buddy_tick"
	sortFunc = "_buddy_sort"
)

var internalFuncs = map[string]bool{tickFunc: true, sortFunc: true}

// meter is one render's account: it fails once ctx is done (the deadline
// passed, the caller gone) and once the render's functions have been charged
// left bytes. Only the goroutine running the render uses it.
type meter struct {
	ctx  context.Context // nil for a template that is only parsed
	left int
}

var errWork = errors.New("template work budget exhausted")

// charge takes n bytes of work from the budget, or fails.
func (m *meter) charge(n int) error {
	if err := m.ctx.Err(); err != nil {
		return err
	}
	if n < 0 || n > m.left {
		m.left = 0
		return errWork
	}
	m.left -= n
	return nil
}

// funcs are the functions a render's template is parsed with.
func (m *meter) funcs() template.FuncMap {
	return template.FuncMap{
		tickFunc:   func() (bool, error) { return false, m.charge(0) },
		sortFunc:   func(v any) (bool, error) { return false, m.charge(sortWork(reflect.ValueOf(v))) },
		"printf":   m.printf,
		"print":    m.sprint(fmt.Sprint),
		"println":  m.sprint(fmt.Sprintln),
		"html":     m.escaper(template.HTMLEscaper, 5), // " → &#34;
		"js":       m.escaper(template.JSEscaper, 6),   // < → \u003C
		"urlquery": m.escaper(template.URLQueryEscaper, 3),
		"eq":       m.eq,
		"ne":       m.ne,
		"lt":       m.lt,
		"le":       m.le,
		"gt":       m.gt,
		"ge":       m.ge,
	}
}

func (m *meter) printf(format string, args ...any) (string, error) {
	if err := m.charge(printfSize(format, args, m.left)); err != nil {
		return "", err
	}
	return fmt.Sprintf(format, args...), nil
}

func (m *meter) sprint(f func(...any) string) func(...any) (string, error) {
	return func(args ...any) (string, error) {
		if err := m.charge(sprintSize(args, m.left)); err != nil {
			return "", err
		}
		return f(args...), nil
	}
}

// escaper wraps one of text/template's escapers, which formats its
// arguments as print does, then writes at most grow bytes for each byte.
func (m *meter) escaper(f func(...any) string, grow int) func(...any) (string, error) {
	return func(args ...any) (string, error) {
		n := sprintSize(args, m.left)
		if err := m.charge(satMul(n, 1+grow)); err != nil {
			return "", err
		}
		return f(args...), nil
	}
}

// sortWork is what sorting v's keys costs, for a map (text/template and fmt
// both visit a map in key order): n log n comparisons, and a slice of n pairs.
func sortWork(v reflect.Value) int {
	if v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if v.Kind() != reflect.Map {
		return 0
	}
	n := v.Len()
	return n * (48 + 8*bits.Len(uint(n)))
}

// sizer bounds the text fmt makes of values: bytes, and leaves, the values
// a verb's width and precision apply to one at a time (each element, each
// map key and value: fmt.Sprintf("%9d", []any{1, 2}) pads both). With verbs
// (printf), a string may come out escaped (%q, "% x", %#v: at most 5 bytes
// a byte) and a float in full (%f of 1e308 has 309 digits); without, as %v.
// It stops counting once bytes pass limit.
type sizer struct {
	verbs         bool
	limit         int
	bytes, leaves int
}

const (
	leafText      = 32 // %!d(float64=…), interface {}(nil)
	containerText = 32 // map[string]interface {}{…}
	intText       = 72 // %#b of a 64-bit integer
	noteText      = 16 // %!d(BADINDEX), %!(NOVERB), …
)

func (z *sizer) add(v reflect.Value, depth int) {
	if z.bytes > z.limit {
		return
	}
	if depth > 2*maxParamDepth { // never, for checked parameters
		z.bytes = satAdd(z.limit, 1)
		return
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			z.leaf(0)
			return
		}
		z.add(v.Elem(), depth+1)
	case reflect.String:
		n := v.Len()
		if z.verbs {
			n = satMul(n, 5)
		}
		z.leaf(n)
	case reflect.Float32, reflect.Float64:
		z.leaf(floatText(v.Float(), z.verbs))
	case reflect.Complex64, reflect.Complex128:
		c := v.Complex()
		z.leaf(floatText(real(c), z.verbs) + floatText(imag(c), z.verbs))
	case reflect.Slice, reflect.Array:
		n := v.Len()
		z.bytes = satAdd(z.bytes, containerText+2*n)
		for i := 0; i < n && z.bytes <= z.limit; i++ {
			z.add(v.Index(i), depth+1)
		}
	case reflect.Map:
		z.bytes = satAdd(z.bytes, containerText+3*v.Len()+sortWork(v))
		it := v.MapRange()
		for z.bytes <= z.limit && it.Next() {
			z.add(it.Key(), depth+1)
			z.add(it.Value(), depth+1)
		}
	default: // bool, integers; never in parameters: what fmt prints as an address
		z.leaf(intText)
	}
}

func (z *sizer) leaf(n int) {
	z.bytes = satAdd(z.bytes, satAdd(n, leafText))
	z.leaves++
}

// floatText bounds a float64 as %v, %e, %g or %x write it (24 bytes), and
// with verbs as %f does: every digit before the point, and six after.
func floatText(x float64, verbs bool) int {
	const shortest = 24 // -1.7976931348623157e+308
	a := math.Abs(x)
	if !verbs || a < 10 || math.IsInf(a, 0) || math.IsNaN(a) {
		return shortest + 8
	}
	return shortest + 8 + int(math.Log10(a)) + 2
}

// sprintSize bounds fmt.Sprint(args...) and fmt.Sprintln(args...).
func sprintSize(args []any, limit int) int {
	z := sizer{limit: limit}
	for _, a := range args {
		z.add(reflect.ValueOf(a), 0)
	}
	return satAdd(z.bytes, len(args)+1)
}

// printfSize bounds len(fmt.Sprintf(format, args...)): the format's own text;
// for each verb, the largest argument with every leaf at the verb's width and
// precision, and room for fmt's notes (%!d(MISSING), %!(BADWIDTH), …); and
// the arguments fmt lists after %!(EXTRA when the verbs leave some unused.
// It follows fmt's grammar (doPrintf): flags, [n], width or *, .precision
// or *, [n], verb. A * takes its value from an int argument, which fmt
// refuses past 1e6; the bound takes the largest int argument.
func printfSize(format string, args []any, limit int) int {
	most, leaves, star, all := 0, 0, 0, 0
	for _, a := range args {
		z := sizer{verbs: true, limit: limit}
		v := reflect.ValueOf(a)
		z.add(v, 0)
		most, leaves = max(most, z.bytes), max(leaves, z.leaves)
		all = satAdd(all, satAdd(z.bytes, 2*noteText)) // %!(EXTRA map[string]interface {}=…
		if n, ok := intArg(v); ok {
			star = max(star, n)
		}
	}
	size, used, reordered := len(format), 0, false
	for i := 0; i < len(format) && size <= limit; {
		if format[i] != '%' {
			i++
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("#0+- ", format[i]) >= 0 {
			i++
		}
		wid, prec := 0, 0
		i = skipArgIndex(format, i, &reordered)
		if i < len(format) && format[i] == '*' {
			i, wid = i+1, star
			used++
		} else {
			wid, i = digits(format, i)
		}
		if i+1 < len(format) && format[i] == '.' {
			i = skipArgIndex(format, i+1, &reordered)
			if i < len(format) && format[i] == '*' {
				i, prec = i+1, star
				used++
			} else {
				prec, i = digits(format, i)
			}
		}
		i = skipArgIndex(format, i, &reordered)
		size = satAdd(size, 3*noteText)
		if i >= len(format) {
			break
		}
		verb, n := utf8.DecodeRuneInString(format[i:])
		i += n
		if verb == '%' {
			continue
		}
		used++
		size = satAdd(size, satAdd(most, satMul(leaves, wid+prec)))
	}
	if !reordered && used < len(args) {
		size = satAdd(size, all)
	}
	return size
}

// skipArgIndex skips an explicit argument index ([n]) at format[i:], as
// fmt's argNumber does.
func skipArgIndex(format string, i int, reordered *bool) int {
	if i >= len(format) || format[i] != '[' {
		return i
	}
	*reordered = true
	if j := strings.IndexByte(format[i:], ']'); j >= 0 && len(format)-i >= 3 {
		return i + j + 1
	}
	return i + 1
}

// digits reads a width or precision (fmt gives up on one past 1e6).
func digits(format string, i int) (int, int) {
	n := 0
	for ; i < len(format) && '0' <= format[i] && format[i] <= '9'; i++ {
		n = min(n*10+int(format[i]-'0'), 1<<31)
	}
	return n, i
}

// intArg is the value fmt would take from v for a *: an integer within ±1e6.
func intArg(v reflect.Value) (int, bool) {
	var n int64
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n = v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if v.Uint() > 1e6 {
			return 0, false
		}
		n = int64(v.Uint())
	default:
		return 0, false
	}
	if n > 1e6 || n < -1e6 {
		return 0, false
	}
	return int(max(n, -n)), true
}

func satAdd(a, b int) int {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt
}

func satMul(a, b int) int {
	if a != 0 && b > math.MaxInt/a {
		return math.MaxInt
	}
	return a * b
}

// checkParams refuses parameters that are not JSON values (as encoding/json
// decodes them into any), nest deeper than maxParamDepth, or measure more
// than MaxTemplateParams bytes as JSON.
func checkParams(params map[string]any) error {
	n, err := jsonSize(params, 0, MaxTemplateParams)
	if err != nil {
		return errs.Wrap(errs.ErrInvalidInput, "parameters", err)
	}
	if n > MaxTemplateParams {
		return errs.New(errs.ErrTooLarge, fmt.Sprintf("parameters over %d bytes", MaxTemplateParams))
	}
	return nil
}

// jsonSize measures v as JSON, stopping once past limit.
func jsonSize(v any, depth, limit int) (int, error) {
	if depth > maxParamDepth {
		return 0, fmt.Errorf("nested deeper than %d", maxParamDepth)
	}
	switch v := v.(type) {
	case nil, bool:
		return 5, nil
	case float64:
		var b [32]byte
		return len(strconv.AppendFloat(b[:0], v, 'g', -1, 64)), nil
	case json.Number:
		return len(v), nil
	case string:
		return len(v) + 2, nil
	case []any:
		n := 2 + len(v)
		for _, e := range v {
			k, err := jsonSize(e, depth+1, limit)
			if err != nil {
				return 0, err
			}
			if n += k; n > limit {
				return n, nil
			}
		}
		return n, nil
	case map[string]any:
		n := 2
		for key, e := range v {
			k, err := jsonSize(e, depth+1, limit)
			if err != nil {
				return 0, err
			}
			if n += len(key) + 4 + k; n > limit {
				return n, nil
			}
		}
		return n, nil
	}
	return 0, fmt.Errorf("a %T is not a JSON value", v)
}
