package skills_test

import (
	"context"
	"testing"
)

// TestWarm: Warm loads every skill that can run (so that no call compiles),
// skips those that cannot, does nothing once ctx has ended, and nothing
// loads after Close.
func TestWarm(t *testing.T) {
	dir := t.TempDir()
	cfg := `[skills.read_file]
allowed_directories = [` + tomlString(dir) + `]
[skills.write_file]
allowed_directories = [` + tomlString(dir) + `]
[skills.memory]
`
	cases := []struct {
		name   string
		ctx    func() context.Context
		close  bool
		loaded map[string]bool
	}{
		{"warm", t.Context, false, map[string]bool{"read_file": true, "write_file": true, "memory_read": false}},
		{"ctx ended", func() context.Context {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return ctx
		}, false, map[string]bool{"read_file": false, "write_file": false}},
		{"closed", t.Context, true, map[string]bool{"read_file": false, "write_file": false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// No store: the memory skills are registered but unavailable.
			reg := newRegistry(t, newRuntime(t), parseConfig(t, cfg), nil)
			if c.close {
				if err := reg.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			reg.Warm(c.ctx())
			for name, want := range c.loaded {
				if got := reg.Loaded(name); got != want {
					t.Errorf("%s loaded = %v, want %v", name, got, want)
				}
			}
			if c.close {
				if _, err := reg.Call(t.Context(), "read_file", []byte(`{"path":"x"}`)); err == nil {
					t.Error("a closed registry loaded a skill for a call")
				}
			}
		})
	}
}
