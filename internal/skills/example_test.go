package skills_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/runtime"
)

// A built-in is registered only when buddy.toml has a section for it, with
// exactly the grant the section gives; a call is prepared once (looked up,
// its arguments checked, the module and grant fixed) and then run.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "buddy-example-")
	defer os.RemoveAll(dir)
	docs := filepath.Join(dir, "docs")
	_ = os.Mkdir(docs, 0o700)
	_ = os.WriteFile(filepath.Join(docs, "notes.txt"), []byte("buy milk"), 0o600)

	cfg, err := config.Parse(fmt.Appendf(nil, "[skills.read_file]\nallowed_directories = [%q]\n", docs))
	if err != nil {
		fmt.Println(err)
		return
	}
	rt, _ := runtime.New(ctx, runtime.Options{CacheDir: filepath.Join(dir, "cache")})
	defer rt.Close(ctx)
	reg, err := skills.New(ctx, skills.Options{Runtime: rt, Config: cfg, Deps: hostfns.Deps{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close(ctx)

	infos, _ := reg.List(ctx)
	for _, i := range infos {
		fmt.Println(i.Name, i.Permission, i.Policy, i.Touches[0] == "read files in "+docs)
	}
	p, err := reg.Prepare(ctx, catalog.Call{Skill: "read_file", Arguments: json.RawMessage(`{"path":"notes.txt"}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := p.Run(ctx)
	fmt.Println(string(res.Output), err)

	_, err = reg.Prepare(ctx, catalog.Call{Skill: "write_file", Arguments: json.RawMessage(`{}`)})
	fmt.Println(err)
	// Output:
	// read_file read_only trust true
	// {"content":"buy milk"} <nil>
	// no skill "write_file" (the built-in write_file is not enabled: add a [skills.write_file] section to buddy.toml)
}
