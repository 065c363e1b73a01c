// A plain Extism plugin written with the real go-pdk (no buddy code), built
// with TinyGo for wasip1 as go-pdk documents: buddy must run it unchanged.
package main

import (
	"fmt"
	"os"
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

// wasi_probe tries what a WASI guest could do to its host if WASI were
// configured loosely, and reports what it got: buddy links WASI with no
// filesystem, environment, arguments or stdout.
//
//go:wasmexport wasi_probe
func wasiProbe() int32 {
	_, readErr := os.ReadFile("/etc/hostname")
	entries, dirErr := os.ReadDir("/")
	fmt.Println("written to stdout")
	pdk.OutputString(fmt.Sprintf(`{"read_ok":%t,"dir_entries":%d,"dir_ok":%t,"env":%d,"home":%q,"args":%d}`,
		readErr == nil, len(entries), dirErr == nil, len(os.Environ()), os.Getenv("HOME"), len(os.Args)))
	return 0
}

func main() {}
