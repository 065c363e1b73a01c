package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/rules"
	"github.com/buddy-run/buddy/internal/base/tomlx"
)

// exampleManifest is the skill.toml of the manifest issue. Line numbers in the
// tests below refer to it.
const exampleManifest = `[skill]
name = "word_count"
version = "0.1.0"
description = "Counts words"
author = "someone"
permission = "read_only"
entrypoint = "run"
[skill.input_schema]
type = "object"
[capabilities]
files_read = false
files_write = false
network = []
env = []
memory = false
[resources]
fuel = 1_000_000_000
memory_mb = 16
timeout = "5s"
`

// edit returns the example with the first occurrence of old replaced; it fails
// the test when old is not there, so a case cannot silently test nothing.
func edit(t testing.TB, old, new string) string {
	t.Helper()
	if !strings.Contains(exampleManifest, old) {
		t.Fatalf("example manifest has no %q", old)
	}
	return strings.Replace(exampleManifest, old, new, 1)
}

// manifestErrors returns the field errors of a ParseManifest error.
func manifestErrors(t testing.TB, err error) []*tomlx.FieldError {
	t.Helper()
	if !errors.Is(err, errs.ErrConfig) {
		t.Fatalf("error %v does not wrap errs.ErrConfig", err)
	}
	var list tomlx.Errors
	if errors.As(err, &list) {
		return list
	}
	var fe *tomlx.FieldError
	if errors.As(err, &fe) {
		return []*tomlx.FieldError{fe}
	}
	t.Fatalf("error %T %v carries no field error", err, err)
	return nil
}

func TestParseManifestExample(t *testing.T) {
	m, err := ParseManifest([]byte(exampleManifest))
	if err != nil {
		t.Fatal(err)
	}
	want := &Manifest{
		Name:        "word_count",
		Version:     "0.1.0",
		Description: "Counts words",
		Author:      "someone",
		Permission:  ReadOnly,
		Entrypoint:  "run",
		InputSchema: map[string]any{"type": "object"},
		Resources:   Resources{Fuel: 1_000_000_000, MemoryMB: 16, Timeout: 5 * time.Second},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("ParseManifest(example) =\n%#v\nwant\n%#v", m, want)
	}
	if got := m.Resources.MaxPages(); got != 256 {
		t.Errorf("MaxPages = %d, want 256", got)
	}
}

func TestParseManifestDefaults(t *testing.T) {
	m, err := ParseManifest([]byte(`[skill]
name = "tiny"
version = "1.0.0"
description = "  Does little.  "
permission = "mutating"
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Manifest{
		Name:        "tiny",
		Version:     "1.0.0",
		Description: "Does little.",
		Permission:  Mutating,
		Entrypoint:  "run",
		InputSchema: map[string]any{"type": "object"},
		Resources:   Resources{Fuel: 1e9, MemoryMB: 16, Timeout: 5 * time.Second},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got\n%#v\nwant\n%#v", m, want)
	}
	if DefaultFuel != 1e9 || DefaultMemoryMB != 16 || DefaultTimeout != 5*time.Second || DefaultEntrypoint != "run" {
		t.Error("defaults differ from docs/CONFIG.md (skill.toml)")
	}
}

func TestDefaultManifest(t *testing.T) {
	a, b := DefaultManifest("x"), DefaultManifest("x")
	if a.Name != "x" || a.Permission != ReadOnly || a.Entrypoint != "run" || a.Resources.Fuel != 1e9 ||
		a.Resources.MemoryMB != 16 || a.Resources.Timeout != 5*time.Second || a.InputSchema["type"] != "object" {
		t.Errorf("DefaultManifest = %#v", a)
	}
	if len(a.Capabilities.Network) != 0 || len(a.Capabilities.Env) != 0 || a.Capabilities.FilesRead ||
		a.Capabilities.FilesWrite || a.Capabilities.Memory {
		t.Errorf("DefaultManifest grants capabilities: %#v", a.Capabilities)
	}
	a.InputSchema["type"] = "mutated"
	if b.InputSchema["type"] != "object" {
		t.Error("DefaultManifest values share their input schema")
	}
}

func TestParseManifestValid(t *testing.T) {
	name64 := "a" + strings.Repeat("b", 63)
	tests := []struct {
		name     string
		doc      string
		check    func(*Manifest) any // returns the value to compare
		expected any
	}{
		{"prerelease and build", edit(t, `"0.1.0"`, `"1.0.0-rc.1+build.5"`), func(m *Manifest) any { return m.Version }, "1.0.0-rc.1+build.5"},
		{"zero version", edit(t, `"0.1.0"`, `"0.0.0"`), func(m *Manifest) any { return m.Version }, "0.0.0"},
		{"multi-digit version", edit(t, `"0.1.0"`, `"10.20.30"`), func(m *Manifest) any { return m.Version }, "10.20.30"},
		{"prerelease alnum", edit(t, `"0.1.0"`, `"1.0.0-alpha.0.x-y"`), func(m *Manifest) any { return m.Version }, "1.0.0-alpha.0.x-y"},
		{"name one letter", edit(t, `"word_count"`, `"a"`), func(m *Manifest) any { return m.Name }, "a"},
		{"name 64 chars", edit(t, `"word_count"`, `"`+name64+`"`), func(m *Manifest) any { return m.Name }, name64},
		{"name digits and underscores", edit(t, `"word_count"`, `"a_1_b2"`), func(m *Manifest) any { return m.Name }, "a_1_b2"},
		{"permission mutating", edit(t, `"read_only"`, `"mutating"`), func(m *Manifest) any { return m.Permission }, Mutating},
		{"permission network", edit(t, `"read_only"`, `"network"`), func(m *Manifest) any { return m.Permission }, Network},
		{"entrypoint", edit(t, `entrypoint = "run"`, `entrypoint = "handle_v2"`), func(m *Manifest) any { return m.Entrypoint }, "handle_v2"},
		{"entrypoint absent", edit(t, "entrypoint = \"run\"\n", ""), func(m *Manifest) any { return m.Entrypoint }, "run"},
		{"no author", edit(t, "author = \"someone\"\n", ""), func(m *Manifest) any { return m.Author }, ""},
		{"fuel 1", edit(t, "1_000_000_000", "1"), func(m *Manifest) any { return m.Resources.Fuel }, uint64(1)},
		{"fuel max", edit(t, "1_000_000_000", fmt.Sprint(MaxFuel)), func(m *Manifest) any { return m.Resources.Fuel }, uint64(MaxFuel)},
		{"memory 2", edit(t, "memory_mb = 16", "memory_mb = 2"), func(m *Manifest) any { return m.Resources.MemoryMB }, 2},
		{"memory 4096", edit(t, "memory_mb = 16", "memory_mb = 4096"), func(m *Manifest) any { return m.Resources.MaxPages() }, uint32(65536)},
		{"timeout ms", edit(t, `"5s"`, `"500ms"`), func(m *Manifest) any { return m.Resources.Timeout }, 500 * time.Millisecond},
		{"timeout 1h", edit(t, `"5s"`, `"1h"`), func(m *Manifest) any { return m.Resources.Timeout }, time.Hour},
		{"timeout compound", edit(t, `"5s"`, `"1m30s"`), func(m *Manifest) any { return m.Resources.Timeout }, 90 * time.Second},
		{"no resources", edit(t, "[resources]\nfuel = 1_000_000_000\nmemory_mb = 16\ntimeout = \"5s\"\n", ""),
			func(m *Manifest) any { return m.Resources }, Resources{Fuel: DefaultFuel, MemoryMB: DefaultMemoryMB, Timeout: DefaultTimeout}},
		{"network normalised, deduplicated, sorted",
			strings.Replace(edit(t, "network = []", `network = ["API.example.com", "*.Example.com.", "api.example.com", "127.0.0.1:8080", "[::1]:80"]`), `permission = "read_only"`, `permission = "network"`, 1),
			func(m *Manifest) any { return m.Capabilities.Network },
			[]string{"*.example.com", "127.0.0.1:8080", "[::1]:80", "api.example.com"}},
		{"network star", strings.Replace(edit(t, "network = []", `network = ["*"]`), `permission = "read_only"`, `permission = "network"`, 1), func(m *Manifest) any { return m.Capabilities.Network }, []string{"*"}},
		{"env deduplicated and sorted", edit(t, "env = []", `env = ["TZ", "HOME", "_X1", "TZ"]`),
			func(m *Manifest) any { return m.Capabilities.Env }, []string{"HOME", "TZ", "_X1"}},
		{"booleans", strings.Replace(edit(t, "files_read = false\nfiles_write = false", "files_read = true\nfiles_write = true"), `permission = "read_only"`, `permission = "mutating"`, 1),
			func(m *Manifest) any { return m.Capabilities.FilesRead && m.Capabilities.FilesWrite }, true},
		{"memory capability", edit(t, "memory = false", "memory = true"), func(m *Manifest) any { return m.Capabilities.Memory }, true},
		{"schema with properties",
			edit(t, "type = \"object\"\n", "type = \"object\"\nrequired = [\"path\"]\n[skill.input_schema.properties.path]\ntype = \"string\"\nmaxLength = 4096\nminimum = 1.5\n"),
			func(m *Manifest) any { return m.InputSchema },
			map[string]any{"type": "object", "required": []any{"path"}, "properties": map[string]any{
				"path": map[string]any{"type": "string", "maxLength": int64(4096), "minimum": 1.5}}}},
		{"schema inline", edit(t, "[skill.input_schema]\ntype = \"object\"\n", "input_schema = {type = \"object\", properties = {}}\n"),
			func(m *Manifest) any { return m.InputSchema }, map[string]any{"type": "object", "properties": map[string]any{}}},
		{"schema absent", edit(t, "[skill.input_schema]\ntype = \"object\"\n", ""),
			func(m *Manifest) any { return m.InputSchema }, map[string]any{"type": "object"}},
		{"quoted date string allowed", edit(t, "type = \"object\"\n", "type = \"object\"\nexamples = [\"1979-05-27\"]\n"),
			func(m *Manifest) any { return m.InputSchema["examples"] }, []any{"1979-05-27"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseManifest([]byte(tt.doc))
			if err != nil {
				t.Fatalf("ParseManifest: %v\n%s", err, tt.doc)
			}
			if got := tt.check(m); !reflect.DeepEqual(got, tt.expected) {
				t.Errorf("got %#v, want %#v", got, tt.expected)
			}
		})
	}
}

type fieldWant struct {
	path string
	line int
	msg  string // a part of the message
}

func TestParseManifestInvalid(t *testing.T) {
	name65 := "a" + strings.Repeat("b", 64)
	tests := []struct {
		name string
		doc  string
		want []fieldWant
	}{
		// [skill]
		{"name empty", edit(t, `"word_count"`, `""`), []fieldWant{{"skill.name", 2, "required"}}},
		{"name missing", edit(t, "name = \"word_count\"\n", ""), []fieldWant{{"skill.name", 1, "required"}}},
		{"name uppercase", edit(t, `"word_count"`, `"Word_count"`), []fieldWant{{"skill.name", 2, `"Word_count" must match`}}},
		{"name leading digit", edit(t, `"word_count"`, `"1word"`), []fieldWant{{"skill.name", 2, "must match"}}},
		{"name leading underscore", edit(t, `"word_count"`, `"_word"`), []fieldWant{{"skill.name", 2, "must match"}}},
		{"name dash", edit(t, `"word_count"`, `"word-count"`), []fieldWant{{"skill.name", 2, "must match"}}},
		{"name 65 chars", edit(t, `"word_count"`, `"`+name65+`"`), []fieldWant{{"skill.name", 2, "must match"}}},
		{"name non-ASCII", edit(t, `"word_count"`, `"wörd"`), []fieldWant{{"skill.name", 2, "must match"}}},
		{"name not a string", edit(t, `"word_count"`, `7`), []fieldWant{{"skill.name", 2, "expected a string, got an integer"}}},
		{"version missing", edit(t, "version = \"0.1.0\"\n", ""), []fieldWant{{"skill.version", 1, "required"}}},
		{"version 1", edit(t, `"0.1.0"`, `"1"`), []fieldWant{{"skill.version", 3, "not a semantic version"}}},
		{"version 1.0", edit(t, `"0.1.0"`, `"1.0"`), []fieldWant{{"skill.version", 3, "not a semantic version"}}},
		{"version v1.0.0", edit(t, `"0.1.0"`, `"v1.0.0"`), []fieldWant{{"skill.version", 3, "not a semantic version"}}},
		{"version 01.0.0", edit(t, `"0.1.0"`, `"01.0.0"`), []fieldWant{{"skill.version", 3, "not a semantic version"}}},
		{"version 1.0.0-", edit(t, `"0.1.0"`, `"1.0.0-"`), []fieldWant{{"skill.version", 3, "not a semantic version"}}},
		{"version 1.0.0-01", edit(t, `"0.1.0"`, `"1.0.0-01"`), []fieldWant{{"skill.version", 3, "not a semantic version"}}},
		{"version spaces", edit(t, `"0.1.0"`, `" 1.0.0"`), []fieldWant{{"skill.version", 3, "not a semantic version"}}},
		{"version number", edit(t, `"0.1.0"`, `1.0`), []fieldWant{{"skill.version", 3, "expected a string, got a float"}}},
		{"description empty", edit(t, `"Counts words"`, `"   "`), []fieldWant{{"skill.description", 4, "required"}}},
		{"description too long", edit(t, `"Counts words"`, `"`+strings.Repeat("x", 1025)+`"`), []fieldWant{{"skill.description", 4, "longer than 1024"}}},
		{"author too long", edit(t, `"someone"`, `"`+strings.Repeat("x", 257)+`"`), []fieldWant{{"skill.author", 5, "longer than 256"}}},
		{"permission missing", edit(t, "permission = \"read_only\"\n", ""), []fieldWant{{"skill.permission", 1, "required"}}},
		{"permission admin", edit(t, `"read_only"`, `"admin"`), []fieldWant{{"skill.permission", 6, `"admin" must be read_only, mutating or network`}}},
		{"permission upper", edit(t, `"read_only"`, `"READ_ONLY"`), []fieldWant{{"skill.permission", 6, "must be read_only"}}},
		{"entrypoint empty", edit(t, `entrypoint = "run"`, `entrypoint = ""`), []fieldWant{{"skill.entrypoint", 7, "not a valid export name"}}},
		{"entrypoint leading digit", edit(t, `entrypoint = "run"`, `entrypoint = "1run"`), []fieldWant{{"skill.entrypoint", 7, "not a valid export name"}}},
		{"entrypoint space", edit(t, `entrypoint = "run"`, `entrypoint = "run now"`), []fieldWant{{"skill.entrypoint", 7, "not a valid export name"}}},
		// [skill.input_schema]
		{"schema type string", edit(t, `type = "object"`, `type = "string"`), []fieldWant{{"skill.input_schema.type", 9, `must be "object"`}}},
		{"schema type array", edit(t, `type = "object"`, `type = ["object"]`), []fieldWant{{"skill.input_schema.type", 9, `must be "object"`}}},
		{"schema type missing", edit(t, `type = "object"`, `title = "x"`), []fieldWant{{"skill.input_schema", 8, `needs type = "object"`}}},
		{"schema properties not a table", edit(t, "type = \"object\"\n", "type = \"object\"\nproperties = 5\n"),
			[]fieldWant{{"skill.input_schema.properties", 10, "must be a table"}}},
		{"schema datetime", edit(t, "type = \"object\"\n", "type = \"object\"\nwhen = 1979-05-27T07:32:00Z\n"),
			[]fieldWant{{"skill.input_schema.when", 10, "TOML date or time"}}},
		{"schema local date deep", edit(t, "type = \"object\"\n", "type = \"object\"\n[skill.input_schema.properties.day]\ntype = \"string\"\nenum = [\"x\", 1979-05-27]\n"),
			[]fieldWant{{"skill.input_schema.properties.day.enum[1]", 12, "TOML date or time"}}},
		{"schema local time inline", edit(t, "[skill.input_schema]\ntype = \"object\"\n", "input_schema = {type = \"object\", t = {d = 07:32:00}}\n"),
			[]fieldWant{{"skill.input_schema.t.d", 8, "TOML date or time"}}},
		{"schema NaN", edit(t, "type = \"object\"\n", "type = \"object\"\nminimum = nan\n"),
			[]fieldWant{{"skill.input_schema.minimum", 10, "not a JSON number"}}},
		{"schema infinity", edit(t, "type = \"object\"\n", "type = \"object\"\nmaximum = -inf\n"),
			[]fieldWant{{"skill.input_schema.maximum", 10, "not a JSON number"}}},
		// [capabilities]
		{"network bad patterns", strings.Replace(edit(t, "network = []", `network = ["ok.example.com", "https://x.com", "*.com", "user@x.com"]`), `permission = "read_only"`, `permission = "network"`, 1),
			[]fieldWant{
				{"capabilities.network[1]", 13, "has a scheme"},
				{"capabilities.network[2]", 13, "top-level domain"},
				{"capabilities.network[3]", 13, "has userinfo"},
			}},
		{"network needs network permission", edit(t, "network = []", `network = ["api.example.com"]`),
			[]fieldWant{{"capabilities.network", 13, `declare permission = "network"`}}},
		{"files_write needs mutating", edit(t, "files_write = false", "files_write = true"),
			[]fieldWant{{"capabilities.files_write", 12, `declare permission = "mutating"`}}},
		{"network not strings", edit(t, "network = []", `network = [1]`), []fieldWant{{"capabilities.network", 13, "expected a string, got an integer"}}},
		{"network a string", edit(t, "network = []", `network = "example.com"`), []fieldWant{{"capabilities.network", 13, "expected an array, got a string"}}},
		{"env names", edit(t, "env = []", `env = ["OK", "1BAD", "HAS-DASH", "", "A B"]`),
			[]fieldWant{
				{"capabilities.env[1]", 14, `"1BAD" is not an environment variable name`},
				{"capabilities.env[2]", 14, "not an environment variable name"},
				{"capabilities.env[3]", 14, "not an environment variable name"},
				{"capabilities.env[4]", 14, "not an environment variable name"},
			}},
		{"files_read not a bool", edit(t, "files_read = false", `files_read = "yes"`), []fieldWant{{"capabilities.files_read", 11, "expected a boolean, got a string"}}},
		// [resources]
		{"fuel 0", edit(t, "1_000_000_000", "0"), []fieldWant{{"resources.fuel", 17, "must be > 0"}}},
		{"fuel negative", edit(t, "1_000_000_000", "-5"), []fieldWant{{"resources.fuel", 17, "must be > 0"}}},
		{"fuel over max", edit(t, "1_000_000_000", fmt.Sprint(int64(MaxFuel)+1)), []fieldWant{{"resources.fuel", 17, "must be <="}}},
		{"fuel max int64", edit(t, "1_000_000_000", "9223372036854775807"), []fieldWant{{"resources.fuel", 17, "must be <="}}},
		{"fuel over int64", edit(t, "1_000_000_000", "99999999999999999999"), []fieldWant{{"resources.fuel", 17, "too large"}}},
		{"fuel float", edit(t, "1_000_000_000", "1e9"), []fieldWant{{"resources.fuel", 17, "expected an integer, got a float"}}},
		{"fuel string", edit(t, "1_000_000_000", `"lots"`), []fieldWant{{"resources.fuel", 17, "expected an integer, got a string"}}},
		{"memory 1", edit(t, "memory_mb = 16", "memory_mb = 1"), []fieldWant{{"resources.memory_mb", 18, "between 2 and 4096"}}},
		{"memory 0", edit(t, "memory_mb = 16", "memory_mb = 0"), []fieldWant{{"resources.memory_mb", 18, "between 2 and 4096"}}},
		{"memory 5000", edit(t, "memory_mb = 16", "memory_mb = 5000"), []fieldWant{{"resources.memory_mb", 18, "between 2 and 4096"}}},
		{"memory 4097", edit(t, "memory_mb = 16", "memory_mb = 4097"), []fieldWant{{"resources.memory_mb", 18, "between 2 and 4096"}}},
		{"timeout abc", edit(t, `"5s"`, `"abc"`), []fieldWant{{"resources.timeout", 19, `"abc" is not a duration`}}},
		{"timeout no unit", edit(t, `"5s"`, `"5"`), []fieldWant{{"resources.timeout", 19, "not a duration"}}},
		{"timeout empty", edit(t, `"5s"`, `""`), []fieldWant{{"resources.timeout", 19, "not a duration"}}},
		{"timeout 0s", edit(t, `"5s"`, `"0s"`), []fieldWant{{"resources.timeout", 19, "must be > 0"}}},
		{"timeout negative", edit(t, `"5s"`, `"-1s"`), []fieldWant{{"resources.timeout", 19, "must be > 0"}}},
		{"timeout 2h", edit(t, `"5s"`, `"2h"`), []fieldWant{{"resources.timeout", 19, "must be <= 1h"}}},
		{"timeout integer", edit(t, `"5s"`, `5`), []fieldWant{{"resources.timeout", 19, "expected a string, got an integer"}}},
		// unknown keys
		{"unknown in skill", edit(t, "author = \"someone\"\n", "author = \"someone\"\nextra = 1\n"), []fieldWant{{"skill.extra", 6, "unknown key"}}},
		{"unknown in capabilities", edit(t, "memory = false\n", "memory = false\nfilesystem = [\"/\"]\n"), []fieldWant{{"capabilities.filesystem", 16, "unknown key"}}},
		{"unknown table", exampleManifest + "[wasm]\npath = \"x.wasm\"\n", []fieldWant{{"wasm", 20, "unknown key"}}},
		{"unknown top-level key", "version = \"1.0.0\"\n" + exampleManifest, []fieldWant{{"version", 1, "unknown key"}}},
		{"unknown keys everywhere at once",
			strings.NewReplacer("author = \"someone\"\n", "author = \"someone\"\nextra = 1\n",
				"memory = false\n", "memory = false\nfilesystem = true\n",
				"timeout = \"5s\"\n", "timeout = \"5s\"\nfuell = 3\n").Replace(exampleManifest) + "[wasm]\n",
			[]fieldWant{
				{"skill.extra", 6, "unknown key"},
				{"capabilities.filesystem", 17, "unknown key"},
				{"resources.fuell", 22, "unknown key"},
				{"wasm", 23, "unknown key"},
			}},
		// several invalid values reported together
		{"several errors",
			strings.NewReplacer(`"word_count"`, `"Bad"`, `"0.1.0"`, `"1.0"`, `"read_only"`, `"admin"`,
				"network = []", `network = ["http://x"]`, "1_000_000_000", "0", "memory_mb = 16", "memory_mb = 1",
				`"5s"`, `"2h"`).Replace(exampleManifest),
			[]fieldWant{
				{"skill.name", 2, "must match"},
				{"skill.version", 3, "not a semantic version"},
				{"skill.permission", 6, "must be"},
				{"capabilities.network[0]", 13, "has a scheme"},
				{"resources.fuel", 17, "must be > 0"},
				{"resources.memory_mb", 18, "between"},
				{"resources.timeout", 19, "must be <="},
			}},
		// syntax
		{"syntax error", edit(t, "memory_mb = 16", "memory_mb = "), []fieldWant{{"", 18, ""}}},
		{"duplicate table", exampleManifest + "[skill]\n", []fieldWant{{"skill", 20, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseManifest([]byte(tt.doc))
			if err == nil {
				t.Fatalf("ParseManifest accepted (%+v):\n%s", m, tt.doc)
			}
			if m != nil {
				t.Errorf("ParseManifest returned a manifest with its error")
			}
			got := manifestErrors(t, err)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d errors, want %d: %v", len(got), len(tt.want), err)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Path != w.path || g.Line != w.line || !strings.Contains(g.Msg, w.msg) {
					t.Errorf("error %d = {%q, line %d, %q}, want {%q, line %d, containing %q}", i, g.Path, g.Line, g.Msg, w.path, w.line, w.msg)
				}
				if w.path != "" {
					prefix := fmt.Sprintf("%s (line %d): ", w.path, w.line)
					if !strings.Contains(err.Error(), prefix) {
						t.Errorf("error text %q does not contain %q", err, prefix)
					}
				}
			}
		})
	}
}

func TestLoadManifest(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "skill.toml")
	if err := os.WriteFile(good, []byte(exampleManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte(edit(t, "memory_mb = 16", "memory_mb = 1")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("ok", func(t *testing.T) {
		m, err := LoadManifest(good)
		if err != nil || m.Name != "word_count" {
			t.Fatalf("LoadManifest = %+v, %v", m, err)
		}
	})
	t.Run("invalid names the file and the key", func(t *testing.T) {
		_, err := LoadManifest(bad)
		if !errors.Is(err, errs.ErrConfig) {
			t.Fatalf("error %v is not a config error", err)
		}
		if want := bad + ": resources.memory_mb (line 18): "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("error %q does not start with %q", err, want)
		}
	})
	t.Run("missing is not found", func(t *testing.T) {
		_, err := LoadManifest(filepath.Join(dir, "nope.toml"))
		if !errors.Is(err, errs.ErrNotFound) || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("error %v: want errs.ErrNotFound wrapping os.ErrNotExist", err)
		}
	})
	t.Run("directory is a config error", func(t *testing.T) {
		_, err := LoadManifest(dir)
		if !errors.Is(err, errs.ErrConfig) {
			t.Errorf("error %v is not a config error", err)
		}
	})
}

func TestValidName(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"a", true}, {"read_file", true}, {"a1", true}, {"a" + strings.Repeat("_", 63), true},
		{"", false}, {"A", false}, {"1a", false}, {"_a", false}, {"a-b", false}, {"a.b", false},
		{"a b", false}, {"a" + strings.Repeat("b", 64), false}, {"é", false}, {"a\n", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.in), func(t *testing.T) {
			if got := ValidName(tt.in); got != tt.want {
				t.Errorf("ValidName(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add(exampleManifest)
	f.Add("[skill]\nname = \"a\"\nversion = \"1.0.0-rc.1+b\"\ndescription = \"d\"\npermission = \"network\"\n" +
		"[capabilities]\nnetwork = [\"*.example.com:443\", \"*\", \"[::1]\"]\nenv = [\"HOME\"]\n")
	f.Add("[skill]\nname = \"a\"\nversion = \"1.0.0\"\ndescription = \"d\"\npermission = \"mutating\"\n" +
		"input_schema = {type = \"object\", properties = {p = {type = \"string\", default = 1979-05-27}}}\n")
	f.Add("[resources]\nfuel = -1\nmemory_mb = 99999\ntimeout = \"-5s\"\n")
	f.Add("[skill.input_schema]\ntype = \"object\"\nx = [[1], [nan]]\n[[skill.input_schema.y]]\nz = 1\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, doc string) {
		m, err := ParseManifest([]byte(doc))
		if err != nil {
			if m != nil {
				t.Fatal("manifest returned with an error")
			}
			if !errors.Is(err, errs.ErrConfig) {
				t.Fatalf("error %v is not a config error", err)
			}
			return
		}
		if !ValidName(m.Name) {
			t.Errorf("accepted name %q", m.Name)
		}
		if !semverRE.MatchString(m.Version) {
			t.Errorf("accepted version %q", m.Version)
		}
		if !slices.Contains([]Permission{ReadOnly, Mutating, Network}, m.Permission) {
			t.Errorf("accepted permission %q", m.Permission)
		}
		if strings.TrimSpace(m.Description) == "" {
			t.Error("accepted an empty description")
		}
		if !exportRE.MatchString(m.Entrypoint) {
			t.Errorf("accepted entrypoint %q", m.Entrypoint)
		}
		r := m.Resources
		if r.Fuel == 0 || r.Fuel > MaxFuel {
			t.Errorf("accepted fuel %d", r.Fuel)
		}
		if r.MemoryMB < MinMemoryMB || r.MemoryMB > MaxMemoryMB {
			t.Errorf("accepted memory_mb %d", r.MemoryMB)
		}
		if r.Timeout <= 0 || r.Timeout > MaxTimeout {
			t.Errorf("accepted timeout %v", r.Timeout)
		}
		if m.InputSchema["type"] != "object" {
			t.Errorf("accepted schema type %v", m.InputSchema["type"])
		}
		if _, err := checkJSON(m.InputSchema, ""); err != nil {
			t.Errorf("accepted a schema with no JSON form: %v", err)
		}
		for _, n := range m.Capabilities.Network {
			if e, err := allow.Parse(n, allow.Manifest); err != nil || e.String() != n {
				t.Errorf("network entry %q is not canonical (%q, %v)", n, e, err)
			}
		}
		for _, e := range m.Capabilities.Env {
			if !rules.ValidEnvName(e) {
				t.Errorf("accepted env name %q", e)
			}
		}
		if !slices.IsSorted(m.Capabilities.Network) || !slices.IsSorted(m.Capabilities.Env) {
			t.Error("capabilities not sorted")
		}
	})
}
