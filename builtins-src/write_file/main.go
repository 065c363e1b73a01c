// Command write_file is buddy's built-in skill that atomically writes a text
// file in a directory the operator granted, creating parent directories:
// {path, content} → {bytes_written}.
package main

import (
	"unsafe"

	"github.com/buddy-run/buddy/skillkit"
)

type input struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

// JSONFields lets skillkit decode the input without reflection.
func (in *input) JSONFields() []skillkit.Field {
	return []skillkit.Field{skillkit.StringField("path", &in.Path), skillkit.StringPtrField("content", &in.Content)}
}

//go:wasmexport run
func run() int32 {
	return skillkit.HandleFields(func(in input) (skillkit.RawJSON, error) {
		if in.Path == "" {
			return nil, skillkit.NewError(skillkit.KindInvalidInput, "path is required")
		}
		if in.Content == nil {
			return nil, skillkit.NewError(skillkit.KindInvalidInput, "content is required")
		}
		// The content's bytes are only read: no copy of them.
		content := unsafe.Slice(unsafe.StringData(*in.Content), len(*in.Content))
		n, err := skillkit.WriteFile(in.Path, content)
		if err != nil {
			return nil, err
		}
		// {bytes_written}, as encoding/json wrote it, without reflection.
		var o skillkit.Object
		o.Int("bytes_written", int64(n))
		return o.JSON(), nil
	})
}

func main() {}
