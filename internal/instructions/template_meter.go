package instructions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"strconv"
	"text/template"

	"github.com/buddy-run/buddy/internal/errs"
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
//   - each write (capWriter).
//
// Printing a value ({{.}}) formats at most the parameters, which are capped,
// before its write is checked; with no {{template}}, nothing else repeats.

// The functions meterRanges inserts; a template may not name them itself
// (checkArg).
const (
	tickFunc = "_buddy_tick"
	sortFunc = "_buddy_sort"
)

var internalFuncs = map[string]bool{tickFunc: true, sortFunc: true}

// meter is one render's account: it fails once ctx is done (the deadline
// passed, the caller gone) and once the render has been charged left bytes
// of work. Only the goroutine running the render uses it.
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
		tickFunc: func() (bool, error) { return false, m.charge(0) },
		sortFunc: func(v any) (bool, error) { return false, m.charge(sortWork(reflect.ValueOf(v))) },
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
