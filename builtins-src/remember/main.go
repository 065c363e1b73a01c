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

// JSONFields lets skillkit decode the input without reflection.
func (in *input) JSONFields() []skillkit.Field {
	return []skillkit.Field{skillkit.StringField("text", &in.Text), skillkit.StringsField("tags", &in.Tags)}
}

//go:wasmexport run
func run() int32 {
	return skillkit.HandleFields(func(in input) (skillkit.RawJSON, error) {
		if strings.TrimSpace(in.Text) == "" {
			return nil, skillkit.NewError(skillkit.KindInvalidInput, "text is required")
		}
		id, err := skillkit.Remember(in.Text, in.Tags)
		if err != nil {
			return nil, err
		}
		// {id}, as encoding/json wrote it, without reflection.
		var o skillkit.Object
		o.Int("id", id)
		return o.JSON(), nil
	})
}

func main() {}
