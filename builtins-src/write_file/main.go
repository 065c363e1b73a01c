// Command write_file is buddy's built-in skill that atomically writes a text
// file in a directory the operator granted, creating parent directories:
// {path, content} → {bytes_written}.
package main

import "github.com/buddy-run/buddy/skillkit"

type input struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

// JSONFields lets skillkit decode the input without reflection.
func (in *input) JSONFields() []skillkit.Field {
	return []skillkit.Field{skillkit.StringField("path", &in.Path), skillkit.StringPtrField("content", &in.Content)}
}

type output struct {
	BytesWritten int `json:"bytes_written"`
}

//go:wasmexport run
func run() int32 {
	return skillkit.Handle(func(in input) (any, error) {
		if in.Path == "" {
			return nil, skillkit.Errorf(skillkit.KindInvalidInput, "path is required")
		}
		if in.Content == nil {
			return nil, skillkit.Errorf(skillkit.KindInvalidInput, "content is required")
		}
		n, err := skillkit.WriteFile(in.Path, []byte(*in.Content))
		if err != nil {
			return nil, err
		}
		return output{BytesWritten: n}, nil
	})
}

func main() {}
