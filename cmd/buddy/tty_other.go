//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package main

import "os"

func isTerminal(fd uintptr) bool { return false }

// readNoEcho reads a line; this platform has no terminal modes buddy knows.
func readNoEcho(f *os.File) ([]byte, error) { return readLine(f) }
