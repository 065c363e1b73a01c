//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package main

func isTerminal(fd uintptr) bool { return false }
