// Command remember is buddy's built-in skill that stores a free-text memory
// with optional tags: {text, tags?} → {id}.
package main

import (
	"strings"

	"github.com/buddy-run/buddy/skillkit"
)

type input struct {
	Text string   `json:"text"`
	Tags []string `json:"tags"`
}

type output struct {
	ID int64 `json:"id"`
}

//go:wasmexport run
func run() int32 {
	return skillkit.Handle(func(in input) (any, error) {
		if strings.TrimSpace(in.Text) == "" {
			return nil, skillkit.Errorf(skillkit.KindInvalidInput, "text is required")
		}
		id, err := skillkit.Remember(in.Text, in.Tags)
		if err != nil {
			return nil, err
		}
		return output{ID: id}, nil
	})
}

func main() {}
