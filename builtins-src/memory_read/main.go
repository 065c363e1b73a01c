// Command memory_read is buddy's built-in skill that reads a key from the
// assistant's key-value memory: {key} → {key, found, value}.
package main

import "github.com/buddy-run/buddy/skillkit"

type input struct {
	Key string `json:"key"`
}

// JSONFields lets skillkit decode the input without reflection.
func (in *input) JSONFields() []skillkit.Field {
	return []skillkit.Field{skillkit.StringField("key", &in.Key)}
}

// output writes {key, found, value?} as encoding/json wrote the struct it
// replaced (Key string, Found bool, Value string `json:"value,omitempty"`),
// without reflection.
func output(key string, found bool, value []byte) skillkit.RawJSON {
	var o skillkit.Object
	o.Grow(len(key) + len(value) + len(value)/8 + 40)
	o.String("key", key)
	o.Bool("found", found)
	if len(value) > 0 {
		o.Bytes("value", value)
	}
	return o.JSON()
}

//go:wasmexport run
func run() int32 {
	return skillkit.HandleFields(func(in input) (skillkit.RawJSON, error) {
		if in.Key == "" {
			return nil, skillkit.NewError(skillkit.KindInvalidInput, "key is required")
		}
		v, err := skillkit.KVGet(in.Key)
		if skillkit.KindOf(err) == skillkit.KindNotFound {
			return output(in.Key, false, nil), nil
		}
		if err != nil {
			return nil, err
		}
		return output(in.Key, true, v), nil
	})
}

func main() {}
