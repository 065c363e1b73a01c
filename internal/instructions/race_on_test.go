//go:build race

package instructions

const raceEnabled = true
