// Command memory_read is buddy's built-in skill that reads a key from the
// assistant's key-value memory: {key} → {key, found, value}.
package main

import (
	"errors"

	"github.com/buddy-run/buddy/skillkit"
)

type input struct {
	Key string `json:"key"`
}

// JSONFields lets skillkit decode the input without reflection.
func (in *input) JSONFields() []skillkit.Field {
	return []skillkit.Field{skillkit.StringField("key", &in.Key)}
}

type output struct {
	Key   string `json:"key"`
	Found bool   `json:"found"`
	Value string `json:"value,omitempty"`
}

//go:wasmexport run
func run() int32 {
	return skillkit.Handle(func(in input) (any, error) {
		if in.Key == "" {
			return nil, skillkit.Errorf(skillkit.KindInvalidInput, "key is required")
		}
		v, err := skillkit.KVGet(in.Key)
		if errors.Is(err, skillkit.ErrNotFound) {
			return output{Key: in.Key}, nil
		}
		if err != nil {
			return nil, err
		}
		return output{Key: in.Key, Found: true, Value: string(v)}, nil
	})
}

func main() {}
