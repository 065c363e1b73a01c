// Command read_file is buddy's built-in skill that reads a text file in a
// directory the operator granted: {path} → {content}.
package main

import (
	"unicode/utf8"

	"github.com/buddy-run/buddy/skillkit"
)

type input struct {
	Path string `json:"path"`
}

type output struct {
	Content string `json:"content"`
}

//go:wasmexport run
func run() int32 {
	return skillkit.Handle(func(in input) (any, error) {
		if in.Path == "" {
			return nil, skillkit.Errorf(skillkit.KindInvalidInput, "path is required")
		}
		data, err := skillkit.ReadFile(in.Path)
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(data) {
			return nil, skillkit.Errorf(skillkit.KindInvalidInput, "%s is not UTF-8 text (%d bytes)", in.Path, len(data))
		}
		return output{Content: string(data)}, nil
	})
}

func main() {}
