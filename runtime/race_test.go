//go:build race

package runtime_test

// raceEnabled: the race detector slows wazero's host calls ~10×; long loops
// scale down under it (make test also runs them in full without it).
const raceEnabled = true
