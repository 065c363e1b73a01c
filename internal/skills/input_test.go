package skills_test

import (
	"testing"

	builtins "github.com/buddy-run/buddy/builtins-wasm"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/runtime"
)

func builtinSchema(t *testing.T, name string) map[string]any {
	t.Helper()
	b, ok := builtins.Get(name)
	if !ok {
		t.Fatalf("no built-in %s", name)
	}
	m, err := runtime.ParseManifest(b.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	return m.InputSchema
}

func TestValidateInput(t *testing.T) {
	// A schema with what the built-ins do not use: enum, nested objects,
	// type lists, number.
	custom := map[string]any{
		"type":     "object",
		"required": []any{"mode"},
		"properties": map[string]any{
			"mode":  map[string]any{"type": "string", "enum": []any{"fast", "slow"}},
			"ratio": map[string]any{"type": "number"},
			"note":  map[string]any{"type": []any{"string", "null"}},
			"opts": map[string]any{
				"type":                 "object",
				"required":             []any{"depth"},
				"additionalProperties": false,
				"properties":           map[string]any{"depth": map[string]any{"type": "integer"}},
			},
		},
	}
	tests := []struct {
		name   string
		schema string // a built-in's name, "custom" or "none"
		input  string
		want   string // "" = accepted; else a part of the invalid_input message
	}{
		// Accepted.
		{"read_file", "read_file", `{"path":"notes.txt"}`, ""},
		{"write_file", "write_file", `{"path":"a/b.txt","content":""}`, ""},
		{"remember with tags", "remember", `{"text":"x","tags":["a","b"]}`, ""},
		{"recall with nothing", "recall", `{}`, ""},
		{"recall limit integer", "recall", `{"limit":5}`, ""},
		{"recall limit integer written as a float", "recall", `{"limit":5.0}`, ""},
		{"recall limit in exponent form", "recall", `{"limit":1e1}`, ""},
		{"surrounding whitespace", "read_file", " \n{\"path\":\"x\"}\n ", ""},
		{"custom: enum value", "custom", `{"mode":"fast","ratio":0.5,"note":null}`, ""},
		{"custom: nested object", "custom", `{"mode":"slow","opts":{"depth":3}}`, ""},
		{"no schema: any object", "none", `{"anything":[1,2,3]}`, ""},

		// Not JSON.
		{"not JSON", "read_file", `{"path":`, "not valid JSON"},
		{"empty input", "read_file", ``, "not valid JSON"},
		{"single quotes", "read_file", `{'path':'x'}`, "not valid JSON"},
		{"trailing data", "read_file", `{"path":"x"} {"path":"y"}`, "trailing data"},
		{"trailing garbage", "read_file", `{"path":"x"}]`, "trailing data"},
		{"not JSON without a schema", "none", `nope`, "not valid JSON"},

		// Not an object.
		{"array", "read_file", `["notes.txt"]`, "must be a JSON object, got an array"},
		{"string", "read_file", `"notes.txt"`, "must be a JSON object, got a string"},
		{"null", "read_file", `null`, "must be a JSON object, got null"},
		{"number", "read_file", `42`, "must be a JSON object, got an integer"},
		{"boolean", "read_file", `true`, "must be a JSON object, got a boolean"},
		{"not an object without a schema", "none", `[1]`, "must be a JSON object"},

		// Missing required.
		{"read_file without path", "read_file", `{}`, "path is required"},
		{"write_file without content", "write_file", `{"path":"a.txt"}`, "content is required"},
		{"remember without text", "remember", `{"tags":["a"]}`, "text is required"},
		{"custom: nested required", "custom", `{"mode":"fast","opts":{}}`, "opts.depth is required"},

		// Wrong type.
		{"path a number", "read_file", `{"path":42}`, "path must be string, got an integer"},
		{"path null", "read_file", `{"path":null}`, "path must be string, got null"},
		{"content an object", "write_file", `{"path":"a","content":{"x":1}}`, "content must be string, got an object"},
		{"tags not an array", "remember", `{"text":"x","tags":"a"}`, "tags must be array, got a string"},
		{"a tag not a string", "remember", `{"text":"x","tags":["a",7]}`, "tags[1] must be string, got an integer"},
		{"limit a fraction", "recall", `{"limit":1.5}`, "limit must be integer, got a number"},
		{"limit a string", "recall", `{"limit":"5"}`, "limit must be integer, got a string"},
		{"custom: enum", "custom", `{"mode":"medium"}`, "mode must be one of"},
		{"custom: number a string", "custom", `{"mode":"fast","ratio":"half"}`, "ratio must be number, got a string"},
		{"custom: type list", "custom", `{"mode":"fast","note":1}`, "note must be string or null, got an integer"},
		{"custom: nested type", "custom", `{"mode":"fast","opts":{"depth":"deep"}}`, "opts.depth must be integer, got a string"},

		// additionalProperties = false.
		{"read_file with an extra property", "read_file", `{"path":"x","mode":"0777"}`, "unknown property mode"},
		{"write_file with an extra property", "write_file", `{"path":"x","content":"y","append":true}`, "unknown property append"},
		{"recall with an extra property", "recall", `{"query":"x","offset":3}`, "unknown property offset"},
		{"custom: nested extra property", "custom", `{"mode":"fast","opts":{"depth":1,"width":2}}`, "unknown property opts.width"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var schema map[string]any
			switch tt.schema {
			case "custom":
				schema = custom
			case "none":
			default:
				schema = builtinSchema(t, tt.schema)
			}
			err := skills.ValidateInput(schema, []byte(tt.input))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ValidateInput(%s) = %v, want accepted", tt.input, err)
				}
				return
			}
			wantKind(t, err, errs.ErrInvalidInput, tt.want)
		})
	}
}
