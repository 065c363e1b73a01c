//go:build race

package skillmd

const raceEnabled = true
