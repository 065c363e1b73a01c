// Command memory_write is buddy's built-in skill that stores a value under a
// key in the assistant's key-value memory: {key, value} → {key, bytes}.
package main

import "github.com/buddy-run/buddy/skillkit"

type input struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

// JSONFields lets skillkit decode the input without reflection.
func (in *input) JSONFields() []skillkit.Field {
	return []skillkit.Field{skillkit.StringField("key", &in.Key), skillkit.StringPtrField("value", &in.Value)}
}

type output struct {
	Key   string `json:"key"`
	Bytes int    `json:"bytes"`
}

//go:wasmexport run
func run() int32 {
	return skillkit.Handle(func(in input) (any, error) {
		if in.Key == "" {
			return nil, skillkit.Errorf(skillkit.KindInvalidInput, "key is required")
		}
		if in.Value == nil {
			return nil, skillkit.Errorf(skillkit.KindInvalidInput, "value is required")
		}
		if err := skillkit.KVSet(in.Key, []byte(*in.Value)); err != nil {
			return nil, err
		}
		return output{Key: in.Key, Bytes: len(*in.Value)}, nil
	})
}

func main() {}
