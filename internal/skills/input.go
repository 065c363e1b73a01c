package skills

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
)

// ValidateInput checks a call's input against the subset of JSON Schema that
// tool inputs use: a JSON object, "required" keys present, the "type" of each
// declared property (string, integer, number, boolean, array, object, null, or
// a list of them), "enum", array "items" types, and additionalProperties =
// false. It refuses early, with the property's name, what the guest would
// otherwise refuse later. Keywords it does not know are ignored: the skill
// still validates its own input.
//
// Input that is not valid UTF-8 is refused: JSON is UTF-8 (RFC 8259), and a
// decoder would otherwise rewrite the bad bytes to U+FFFD, so the skill would
// act on text the caller never sent.
func ValidateInput(schema map[string]any, input []byte) error {
	if err := osfile.CheckUTF8("input", input); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return errs.New(errs.ErrInvalidInput, "input is not valid JSON: "+err.Error())
	}
	// Decoder.More is false before a stray "]" or "}", so look at the bytes.
	if rest := bytes.TrimLeft(input[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return errs.New(errs.ErrInvalidInput, "input has trailing data after the JSON value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return errs.New(errs.ErrInvalidInput, fmt.Sprintf("input must be a JSON object, got %s", jsonType(v)))
	}
	if schema == nil {
		return nil
	}
	if err := checkObject("", schema, obj); err != nil {
		return errs.New(errs.ErrInvalidInput, err.Error())
	}
	return nil
}

func checkObject(at string, schema map[string]any, obj map[string]any) error {
	props, _ := schema["properties"].(map[string]any)
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				if _, present := obj[name]; !present {
					return fmt.Errorf("%s is required", join(at, name))
				}
			}
		}
	}
	if ap, ok := schema["additionalProperties"].(bool); ok && !ap {
		var extra []string
		for k := range obj {
			if _, known := props[k]; !known {
				extra = append(extra, k)
			}
		}
		if len(extra) > 0 {
			sort.Strings(extra)
			return fmt.Errorf("unknown property %s", join(at, extra[0]))
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ps, ok := props[k].(map[string]any)
		if !ok {
			continue
		}
		if err := checkValue(join(at, k), ps, obj[k]); err != nil {
			return err
		}
	}
	return nil
}

func checkValue(at string, schema map[string]any, v any) error {
	if t, ok := schema["type"]; ok {
		var types []string
		switch tt := t.(type) {
		case string:
			types = []string{tt}
		case []any:
			for _, x := range tt {
				if s, ok := x.(string); ok {
					types = append(types, s)
				}
			}
		}
		if len(types) > 0 && !matchesAny(types, v) {
			return fmt.Errorf("%s must be %s, got %s", at, strings.Join(types, " or "), jsonType(v))
		}
	}
	if enum, ok := schema["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(v) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s must be one of %v", at, enum)
		}
	}
	switch x := v.(type) {
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range x {
				if err := checkValue(fmt.Sprintf("%s[%d]", at, i), items, e); err != nil {
					return err
				}
			}
		}
	case map[string]any:
		if _, ok := schema["properties"]; ok {
			return checkObject(at, schema, x)
		}
	}
	return nil
}

func matchesAny(types []string, v any) bool {
	for _, t := range types {
		if matches(t, v) {
			return true
		}
	}
	return false
}

func matches(t string, v any) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		if _, err := n.Int64(); err == nil {
			return true
		}
		f, err := n.Float64()
		return err == nil && f == math.Trunc(f) && !math.IsInf(f, 0)
	}
	return true // an unknown type name: leave it to the skill
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "an integer"
		}
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func join(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}
