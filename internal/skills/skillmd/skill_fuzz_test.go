package skillmd

import (
	"fmt"
	"io/fs"
	"math"
	"os"
	"reflect"
	"testing"
)

// FuzzParseSkillMD: Parse never panics, and a skill it accepts renders
// (Render) to a SKILL.md that parses to the same skill.
func FuzzParseSkillMD(f *testing.F) {
	seeds := []string{
		"---\nname: greet\ntype: template\nparameters:\n  who: the name\n---\n```template\nHello {{.who}}!\n```\n",
		"---\nname: t\ntype: template\ntemplate: \"{{range .a}}[{{.}}]{{end}}\"\n---\n",
		"---\nname: backup\ntype: composite\n---\n```json\n{\"steps\": [{\"tool\": \"read_file\", \"params\": {\"path\": \"a.txt\", \"n\": 1.5}}]}\n```\n",
		"---\nname: c\ntype: composite\nsteps:\n  - tool: read_file\n    params: {path: a, n: 1}\n---\n",
		"---\nname: legacy\ntype: script\n---\n```sh\necho hi\n```\n",
		"---\nname: web-fetch\ndescription: Fetch\nallowed-tools: Read Write\nmetadata:\n  version: \"1.2\"\n  n: 3\npermissions:\n  fs:\n    read: [\"$SKILL_DIR/**\"]\n    write: [\"$WORK_DIR/**\"]\n  network:\n    allow: [\"*:443\", \"api.example.com\"]\n  env: [LANG]\n  services: {x: 1}\n---\nContent here\n",
		"\xef\xbb\xbf---\r\ndescription: \"no name: the folder's\"\r\nstatus: draft\r\n---\r\n\r\n# Z\r\n",
	}
	files := []string{"testdata/doc-coauthoring.md"}
	paths, _ := fs.Glob(Defaults(), "*/SKILL.md")
	for _, p := range paths {
		b, err := fs.ReadFile(Defaults(), p)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, string(b))
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, string(b))
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		s, err := Parse("folder/SKILL.md", []byte(data))
		if err != nil {
			return
		}
		out, err := Render(s)
		if err != nil {
			t.Fatalf("Render of an accepted skill: %v\n%#v", err, s)
		}
		again, err := Parse("folder/SKILL.md", out)
		if err != nil {
			t.Fatalf("the rendered skill does not parse: %v\n%s", err, out)
		}
		if d := skillDiff(s, again); d != "" {
			t.Fatalf("the rendered skill parses to another: %s\nrendered:\n%s", d, out)
		}
	})
}

// skillDiff names the first field in which a and b differ ("" if none). An
// empty list or map is the same as none, and NaN as NaN.
func skillDiff(a, b *Skill) string {
	fields := []struct {
		name string
		a, b any
	}{
		{"name", a.Name, b.Name}, {"description", a.Description, b.Description}, {"type", a.Type, b.Type},
		{"status", a.Status, b.Status}, {"parameters", a.Parameters, b.Parameters}, {"source", a.Source, b.Source},
		{"allowed tools", a.AllowedTools, b.AllowedTools}, {"license", a.License, b.License},
		{"metadata", a.Metadata, b.Metadata}, {"permissions", a.Permissions, b.Permissions},
		{"content", a.Content, b.Content}, {"template", a.Template, b.Template}, {"steps", a.Steps, b.Steps},
		{"script", a.Script, b.Script},
	}
	for _, f := range fields {
		if !sameValue(reflect.ValueOf(f.a), reflect.ValueOf(f.b)) {
			return fmt.Sprintf("%s: %#v, then %#v", f.name, f.a, f.b)
		}
	}
	return ""
}

func sameValue(a, b reflect.Value) bool {
	for _, v := range []*reflect.Value{&a, &b} {
		for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && !v.IsNil() {
			*v = v.Elem()
		}
	}
	empty := func(v reflect.Value) bool {
		if !v.IsValid() {
			return true
		}
		switch v.Kind() {
		case reflect.Slice, reflect.Map:
			return v.Len() == 0
		case reflect.Interface, reflect.Pointer:
			return v.IsNil()
		}
		return false
	}
	if empty(a) || empty(b) {
		return empty(a) && empty(b)
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float() || math.IsNaN(a.Float()) && math.IsNaN(b.Float())
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		it := a.MapRange()
		for it.Next() {
			if !sameValue(it.Value(), b.MapIndex(it.Key())) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range a.NumField() {
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}
