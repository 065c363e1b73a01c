// Command recall is buddy's built-in skill that searches the memories stored
// with remember, most relevant first: {query, limit?} → {memories}.
package main

import "github.com/buddy-run/buddy/skillkit"

type input struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
}

// JSONFields lets skillkit decode the input without reflection.
func (in *input) JSONFields() []skillkit.Field {
	return []skillkit.Field{skillkit.StringField("query", &in.Query), skillkit.IntField("limit", &in.Limit)}
}

//go:wasmexport run
func run() int32 {
	return skillkit.HandleFields(func(in input) (skillkit.RawJSON, error) {
		if in.Limit < 0 || in.Limit > 100 {
			return nil, skillkit.NewError(skillkit.KindInvalidInput, "limit must be between 1 and 100")
		}
		// The host's answer is the output: {"memories": [...]}, every
		// memory with its tags ([] when it has none), as encoding/json
		// wrote the []skillkit.Memory this built-in decoded and re-encoded
		// before.
		return skillkit.RecallJSON(in.Query, in.Limit)
	})
}

func main() {}
