//go:build race

package fuel

const raceEnabled = true
