// Command memory_write is buddy's built-in skill that stores a value under a
// key in the assistant's key-value memory: {key, value} → {key, bytes}.
package main

import (
	"unsafe"

	"github.com/buddy-run/buddy/skillkit"
)

type input struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

// JSONFields lets skillkit decode the input without reflection.
func (in *input) JSONFields() []skillkit.Field {
	return []skillkit.Field{skillkit.StringField("key", &in.Key), skillkit.StringPtrField("value", &in.Value)}
}

//go:wasmexport run
func run() int32 {
	return skillkit.HandleFields(func(in input) (skillkit.RawJSON, error) {
		if in.Key == "" {
			return nil, skillkit.NewError(skillkit.KindInvalidInput, "key is required")
		}
		if in.Value == nil {
			return nil, skillkit.NewError(skillkit.KindInvalidInput, "value is required")
		}
		// The value's bytes are only read: no copy of them.
		value := unsafe.Slice(unsafe.StringData(*in.Value), len(*in.Value))
		if err := skillkit.KVSet(in.Key, value); err != nil {
			return nil, err
		}
		// {key, bytes}, as encoding/json wrote it, without reflection.
		var o skillkit.Object
		o.String("key", in.Key)
		o.Int("bytes", int64(len(value)))
		return o.JSON(), nil
	})
}

func main() {}
