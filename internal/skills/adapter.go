package skills

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	builtins "github.com/buddy-run/buddy/builtins-wasm"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/runtime"
)

// The exports of a channel adapter (docs/CHANNELS.md).
const (
	AdapterParse  = "parse"
	AdapterRender = "render"
)

// Adapter is a channel adapter loaded in the runtime: a plugin that turns a
// platform's updates into messages (parse) and messages into the
// platform's requests (render), each call in a fresh instance under the
// manifest's fuel, memory and deadline. It is linked with no host function
// but the log: it cannot open a connection, read a file, an environment
// variable or the channel's credential. It is not a skill: no model or
// client can call it.
type Adapter struct {
	name string
	sha  string
	mod  *runtime.Module
}

// LoadBuiltinAdapter loads the built-in channel adapter called name
// (builtins-wasm).
func LoadBuiltinAdapter(ctx context.Context, rt *runtime.Runtime, name string) (*Adapter, error) {
	b, ok := builtins.Adapter(name)
	if !ok {
		return nil, errs.New(errs.ErrNotFound, fmt.Sprintf("no built-in channel adapter %q", name))
	}
	return LoadAdapter(ctx, rt, name, b.Wasm, b.Manifest)
}

// LoadAdapterFile loads the channel adapter whose module is at path, its
// skill.toml beside it ([channels.NAME] adapter).
func LoadAdapterFile(ctx context.Context, rt *runtime.Runtime, name, path string) (*Adapter, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, errs.Wrap(errs.ErrConfig, fmt.Sprintf("channels.%s.adapter: reading the module", name), err)
	}
	manifest, err := os.ReadFile(filepath.Join(filepath.Dir(path), "skill.toml"))
	if err != nil {
		return nil, errs.Wrap(errs.ErrConfig, fmt.Sprintf("channels.%s.adapter: reading the skill.toml beside the module", name), err)
	}
	return LoadAdapter(ctx, rt, name, wasm, manifest)
}

// LoadAdapter loads a channel adapter from its module and skill.toml. The
// manifest may declare no capability; the module must export parse and
// render.
func LoadAdapter(ctx context.Context, rt *runtime.Runtime, name string, wasm, manifest []byte) (*Adapter, error) {
	m, err := runtime.ParseManifest(manifest)
	if err != nil {
		return nil, fmt.Errorf("channel adapter %s: %w", name, err)
	}
	c := m.Capabilities
	if c.FilesRead || c.FilesWrite || len(c.Network) > 0 || len(c.Env) > 0 || c.Memory {
		return nil, errs.New(errs.ErrForbidden, fmt.Sprintf("channel adapter %s declares capabilities: an adapter gets none (buddy makes its requests)", name))
	}
	m.Entrypoint = AdapterParse
	mod, err := rt.Load(ctx, wasm, runtime.Spec{Name: name, Manifest: m})
	if err != nil {
		return nil, fmt.Errorf("channel adapter %s: %w", name, err)
	}
	for _, fn := range []string{AdapterParse, AdapterRender} {
		if !slices.Contains(mod.Info().Exports, fn) {
			_ = mod.Close(ctx)
			return nil, errs.New(errs.ErrInvalidInput, fmt.Sprintf("channel adapter %s exports no function %q (a channel adapter exports parse and render)", name, fn))
		}
	}
	sum := sha256.Sum256(wasm)
	return &Adapter{name: name, sha: hex.EncodeToString(sum[:]), mod: mod}, nil
}

// Parse calls the adapter's parse export with input (JSON) in a fresh
// sandbox.
func (a *Adapter) Parse(ctx context.Context, input []byte) ([]byte, error) {
	return a.call(ctx, AdapterParse, input)
}

// Render calls the adapter's render export with input (JSON) in a fresh
// sandbox.
func (a *Adapter) Render(ctx context.Context, input []byte) ([]byte, error) {
	return a.call(ctx, AdapterRender, input)
}

func (a *Adapter) call(ctx context.Context, fn string, input []byte) ([]byte, error) {
	res, err := a.mod.CallExport(ctx, fn, input)
	if err != nil {
		return nil, fmt.Errorf("channel adapter %s: %s: %w", a.name, fn, err)
	}
	return res.Output, nil
}

// Name is the adapter's name; SHA256 the hex sha256 of its module.
func (a *Adapter) Name() string   { return a.name }
func (a *Adapter) SHA256() string { return a.sha }

// Close unloads the adapter.
func (a *Adapter) Close(ctx context.Context) error { return a.mod.Close(ctx) }
