// Command read_file is buddy's built-in skill that reads a text file in a
// directory the operator granted: {path} → {content}.
package main

import (
	"strconv"

	"github.com/buddy-run/buddy/skillkit"
)

type input struct {
	Path string `json:"path"`
}

// JSONFields lets skillkit decode the input without reflection.
func (in *input) JSONFields() []skillkit.Field {
	return []skillkit.Field{skillkit.StringField("path", &in.Path)}
}

//go:wasmexport run
func run() int32 {
	return skillkit.HandleFields(func(in input) (skillkit.RawJSON, error) {
		if in.Path == "" {
			return nil, skillkit.NewError(skillkit.KindInvalidInput, "path is required")
		}
		data, err := skillkit.ReadFile(in.Path)
		if err != nil {
			return nil, err
		}
		// {"content": "..."} written directly: encoding/json would copy the
		// content several times (and slowly, through reflection). Text checks
		// the UTF-8 as it escapes.
		var o skillkit.Object
		o.Grow(len(data) + len(data)/8 + 16)
		if !o.Text("content", data) {
			return nil, skillkit.NewError(skillkit.KindInvalidInput, in.Path+" is not UTF-8 text ("+strconv.Itoa(len(data))+" bytes)")
		}
		return o.JSON(), nil
	})
}

func main() {}
