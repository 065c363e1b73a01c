// The Extism count_vowels demo as a go-pdk plugin: it keeps a running total
// in an Extism var (pdk.GetVar/pdk.SetVar), as the Rust PDK's demo does.
// Built with TinyGo (see README.md); buddy must run it unchanged, with vars
// that start empty at every call.
package main

import (
	"encoding/binary"
	"strconv"

	"github.com/extism/go-pdk"
)

func count(s []byte) uint64 {
	var n uint64
	for _, c := range s {
		switch c {
		case 'a', 'e', 'i', 'o', 'u', 'A', 'E', 'I', 'O', 'U':
			n++
		}
	}
	return n
}

// addToTotal adds n to the var "total" and returns the new total.
func addToTotal(n uint64) uint64 {
	var total uint64
	if v := pdk.GetVar("total"); len(v) == 8 {
		total = binary.LittleEndian.Uint64(v)
	}
	total += n
	pdk.SetVar("total", binary.LittleEndian.AppendUint64(nil, total))
	return total
}

func output(n, total uint64) {
	pdk.OutputString(`{"count":` + strconv.FormatUint(n, 10) + `,"total":` + strconv.FormatUint(total, 10) + `}`)
}

//go:wasmexport count_vowels
func countVowels() int32 {
	n := count(pdk.Input())
	output(n, addToTotal(n))
	return 0
}

// count_vowels_twice counts the input twice within one call: the var keeps
// the total between the two.
//
//go:wasmexport count_vowels_twice
func countVowelsTwice() int32 {
	n := count(pdk.Input())
	addToTotal(n)
	output(n, addToTotal(n))
	return 0
}

func main() {}
