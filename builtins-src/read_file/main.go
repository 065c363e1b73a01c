// Command read_file is buddy's built-in skill that reads a text file in a
// directory the operator granted: {path} → {content}.
package main

import (
	"unsafe"

	"github.com/buddy-run/buddy/skillkit"
)

type input struct {
	Path string `json:"path"`
}

// JSONFields lets skillkit decode the input without reflection.
func (in *input) JSONFields() []skillkit.Field {
	return []skillkit.Field{skillkit.StringField("path", &in.Path)}
}

// prefix is what the output holds before the content's JSON string.
const prefix = `{"content":`

// firstRoom is the room the first try leaves for the JSON string: a
// larger file is written again into exactly the room the host asked for
// (from the same read: the host keeps it for the retry).
const firstRoom = 16 << 10

//go:wasmexport run
func run() int32 {
	return skillkit.HandleFields(func(in input) (skillkit.RawJSON, error) {
		if in.Path == "" {
			return nil, skillkit.NewError(skillkit.KindInvalidInput, "path is required")
		}
		// {"content": "..."} built in one buffer: the host writes the
		// string in place, after the prefix, and the closing brace follows.
		room := uint32(firstRoom)
		for try := 0; try < 3; try++ {
			out := make([]byte, len(prefix), len(prefix)+int(room)+1)
			copy(out, prefix)
			r := fsReadJSON(addr(unsafe.StringData(in.Path)), uint32(len(in.Path)), addr(&out[:cap(out)][len(prefix)]), room)
			status, n := byte(r>>32), uint32(r)
			if status != 0 {
				return nil, skillkit.NewError(kindOf(status), string(out[len(prefix):len(prefix)+int(min(n, room))]))
			}
			if n <= room {
				out = out[:len(prefix)+int(n)]
				return skillkit.RawJSON(append(out, '}')), nil
			}
			room = n // the file is larger: ask again with the room it needs
		}
		return nil, skillkit.NewError(skillkit.KindUnavailable, in.Path+" kept growing while it was read")
	})
}

func addr(p *byte) uint32 { return uint32(uintptr(unsafe.Pointer(p))) }

// kindOf names a host status byte (docs/HOST_ABI.md; never renumbered).
func kindOf(status byte) skillkit.Kind {
	kinds := [...]skillkit.Kind{1: skillkit.KindForbidden, 2: skillkit.KindNotFound, 3: skillkit.KindTooLarge,
		4: skillkit.KindInvalidInput, 5: skillkit.KindUnavailable, 6: skillkit.KindDenied,
		7: skillkit.KindTimeout, 8: skillkit.KindInternal}
	if int(status) < len(kinds) && kinds[status] != "" {
		return kinds[status]
	}
	return skillkit.KindInternal
}

func main() {}
