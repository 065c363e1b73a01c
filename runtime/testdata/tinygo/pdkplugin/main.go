// A plain Extism plugin written with the real go-pdk (no buddy code), built
// with TinyGo for wasip1 as go-pdk documents: buddy must run it unchanged.
package main

import (
	"strconv"

	"github.com/extism/go-pdk"
)

//go:wasmexport greet
func greet() int32 {
	pdk.OutputString("Hello, " + pdk.InputString() + "!")
	return 0
}

//go:wasmexport count_vowels
func countVowels() int32 {
	n := 0
	for _, c := range pdk.Input() {
		switch c {
		case 'a', 'e', 'i', 'o', 'u', 'A', 'E', 'I', 'O', 'U':
			n++
		}
	}
	pdk.OutputString(strconv.Itoa(n))
	return 0
}

//go:wasmexport fail
func fail() int32 {
	pdk.SetErrorString("not_found: no such greeting")
	return 1
}

func main() {}
