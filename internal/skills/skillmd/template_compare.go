package skillmd

import (
	"errors"
	"fmt"
	"reflect"
)

// The comparison functions of a render: text/template's eq, ne, lt, le, gt
// and ge, charging the length of the strings they compare first. A FuncMap
// cannot call the built-ins, so these follow text/template's funcs.go: the
// same kinds compare (integers across signedness, nil against a nillable
// value, other comparable values with ==), with the same errors.
// TestTemplateComparisonsMatchBuiltins holds them to it.

var (
	errBadComparisonType = errors.New("invalid type for comparison")
	errNoComparison      = errors.New("missing argument for comparison")
)

type cmpKind int

const (
	cmpInvalid cmpKind = iota
	cmpBool
	cmpComplex
	cmpInt
	cmpFloat
	cmpString
	cmpUint
)

func cmpKindOf(v reflect.Value) (cmpKind, error) {
	switch v.Kind() {
	case reflect.Bool:
		return cmpBool, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return cmpInt, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return cmpUint, nil
	case reflect.Float32, reflect.Float64:
		return cmpFloat, nil
	case reflect.Complex64, reflect.Complex128:
		return cmpComplex, nil
	case reflect.String:
		return cmpString, nil
	}
	return cmpInvalid, errBadComparisonType
}

// indirectInterface is the value inside an interface (invalid for nil).
func indirectInterface(v reflect.Value) reflect.Value {
	if v.Kind() != reflect.Interface {
		return v
	}
	if v.IsNil() {
		return reflect.Value{}
	}
	return v.Elem()
}

func isNilValue(v reflect.Value) bool {
	if !v.IsValid() {
		return true
	}
	switch v.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
		return v.IsNil()
	}
	return false
}

// chargeStrings charges the length of the strings among args.
func (m *meter) chargeStrings(args ...reflect.Value) error {
	n := 0
	for _, a := range args {
		if a = indirectInterface(a); a.Kind() == reflect.String {
			n = satAdd(n, a.Len())
		}
	}
	return m.charge(n)
}

func (m *meter) eq(arg1 reflect.Value, arg2 ...reflect.Value) (bool, error) {
	if err := m.chargeStrings(arg1); err != nil {
		return false, err
	}
	if err := m.chargeStrings(arg2...); err != nil {
		return false, err
	}
	return cmpEq(arg1, arg2...)
}

func (m *meter) ne(arg1, arg2 reflect.Value) (bool, error) {
	equal, err := m.eq(arg1, arg2)
	return !equal, err
}

func (m *meter) lt(arg1, arg2 reflect.Value) (bool, error) {
	if err := m.chargeStrings(arg1, arg2); err != nil {
		return false, err
	}
	return cmpLt(arg1, arg2)
}

func (m *meter) le(arg1, arg2 reflect.Value) (bool, error) {
	less, err := m.lt(arg1, arg2)
	if less || err != nil {
		return less, err
	}
	return m.eq(arg1, arg2)
}

func (m *meter) gt(arg1, arg2 reflect.Value) (bool, error) {
	lessOrEqual, err := m.le(arg1, arg2)
	if err != nil {
		return false, err
	}
	return !lessOrEqual, nil
}

func (m *meter) ge(arg1, arg2 reflect.Value) (bool, error) {
	less, err := m.lt(arg1, arg2)
	if err != nil {
		return false, err
	}
	return !less, nil
}

// cmpEq is arg1 == arg2[0] || arg1 == arg2[1] || ….
func cmpEq(arg1 reflect.Value, arg2 ...reflect.Value) (bool, error) {
	arg1 = indirectInterface(arg1)
	if len(arg2) == 0 {
		return false, errNoComparison
	}
	k1, _ := cmpKindOf(arg1)
	for _, arg := range arg2 {
		arg = indirectInterface(arg)
		k2, _ := cmpKindOf(arg)
		truth := false
		if k1 != k2 {
			switch {
			case k1 == cmpInt && k2 == cmpUint:
				truth = arg1.Int() >= 0 && uint64(arg1.Int()) == arg.Uint()
			case k1 == cmpUint && k2 == cmpInt:
				truth = arg.Int() >= 0 && arg1.Uint() == uint64(arg.Int())
			default:
				if arg1.IsValid() && arg.IsValid() {
					return false, fmt.Errorf("incompatible types for comparison: %v and %v", arg1.Type(), arg.Type())
				}
			}
		} else {
			switch k1 {
			case cmpBool:
				truth = arg1.Bool() == arg.Bool()
			case cmpComplex:
				truth = arg1.Complex() == arg.Complex()
			case cmpFloat:
				truth = arg1.Float() == arg.Float()
			case cmpInt:
				truth = arg1.Int() == arg.Int()
			case cmpString:
				truth = arg1.String() == arg.String()
			case cmpUint:
				truth = arg1.Uint() == arg.Uint()
			default:
				if k1, k2 := arg1.Kind(), arg.Kind(); k1 != k2 && k1 != reflect.Invalid && k2 != reflect.Invalid {
					return false, fmt.Errorf("non-comparable types %s: %v, %s: %v", arg1, arg1.Type(), arg.Type(), arg)
				}
				if isNilValue(arg1) || isNilValue(arg) {
					truth = isNilValue(arg) == isNilValue(arg1)
				} else {
					if !arg.Type().Comparable() {
						return false, fmt.Errorf("non-comparable type %s: %v", arg, arg.Type())
					}
					truth = arg1.Interface() == arg.Interface()
				}
			}
		}
		if truth {
			return true, nil
		}
	}
	return false, nil
}

// cmpLt is arg1 < arg2.
func cmpLt(arg1, arg2 reflect.Value) (bool, error) {
	arg1 = indirectInterface(arg1)
	k1, err := cmpKindOf(arg1)
	if err != nil {
		return false, err
	}
	arg2 = indirectInterface(arg2)
	k2, err := cmpKindOf(arg2)
	if err != nil {
		return false, err
	}
	if k1 != k2 {
		switch {
		case k1 == cmpInt && k2 == cmpUint:
			return arg1.Int() < 0 || uint64(arg1.Int()) < arg2.Uint(), nil
		case k1 == cmpUint && k2 == cmpInt:
			return arg2.Int() >= 0 && arg1.Uint() < uint64(arg2.Int()), nil
		}
		return false, fmt.Errorf("incompatible types for comparison: %v and %v", arg1.Type(), arg2.Type())
	}
	switch k1 {
	case cmpFloat:
		return arg1.Float() < arg2.Float(), nil
	case cmpInt:
		return arg1.Int() < arg2.Int(), nil
	case cmpString:
		return arg1.String() < arg2.String(), nil
	case cmpUint:
		return arg1.Uint() < arg2.Uint(), nil
	}
	return false, errBadComparisonType // bool, complex
}
