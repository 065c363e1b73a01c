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

type output struct {
	Memories []skillkit.Memory `json:"memories"`
}

//go:wasmexport run
func run() int32 {
	return skillkit.Handle(func(in input) (any, error) {
		if in.Limit < 0 || in.Limit > 100 {
			return nil, skillkit.Errorf(skillkit.KindInvalidInput, "limit must be between 1 and 100")
		}
		ms, err := skillkit.Recall(in.Query, in.Limit)
		if err != nil {
			return nil, err
		}
		if ms == nil {
			ms = []skillkit.Memory{}
		}
		return output{Memories: ms}, nil
	})
}

func main() {}
