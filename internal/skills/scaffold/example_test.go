package scaffold_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/buddy-run/buddy/internal/skills/scaffold"
)

func ExampleInit() {
	tmp, err := os.MkdirTemp("", "scaffold-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(tmp)

	files, err := scaffold.Init(filepath.Join(tmp, "wordy"), "wordy", "rust")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range files {
		rel, _ := filepath.Rel(tmp, f)
		fmt.Println(filepath.ToSlash(rel))
	}
	// Output:
	// wordy/.cargo/config.toml
	// wordy/.gitignore
	// wordy/Cargo.toml
	// wordy/Makefile
	// wordy/README.md
	// wordy/build.sh
	// wordy/skill.toml
	// wordy/src/buddy.rs
	// wordy/src/lib.rs
	// wordy/test.sh
}
