//go:build !race

package skillmd

const raceEnabled = false
