// Package install installs, upgrades and removes third-party skills: it
// validates the manifest and the module, copies the module into buddy's data
// directory, records its sha256 in the store, and asks for fresh consent when
// an upgrade widens what the skill may do.
//
//	inst := &install.Installer{Store: st, DataDir: dataDir}
//	res, err := inst.Install(ctx, install.Request{WasmPath: "x.wasm", Upgrade: true, Consent: ask})
//	for _, line := range install.Describe(res.Manifest) { fmt.Println(line) }
//
// Nothing already installed is lost or changed by a failed install.
package install

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	builtins "github.com/buddy-run/buddy/builtins-wasm"
	"github.com/buddy-run/buddy/hostfns/allow"
	buddyhttp "github.com/buddy-run/buddy/hostfns/http"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

// MaxModuleBytes caps what install accepts.
const MaxModuleBytes = 64 << 20

// Store is what the installer needs of the store.
type Store interface {
	InsertSkill(ctx context.Context, sk store.InstalledSkill) error
	ReplaceSkill(ctx context.Context, sk store.InstalledSkill) error
	GetSkill(ctx context.Context, name string) (store.InstalledSkill, error)
	DeleteSkill(ctx context.Context, name string) error
}

// Installer installs skills into DataDir/skills and the store.
type Installer struct {
	Store   Store
	DataDir string
}

// Request is one install.
type Request struct {
	WasmPath     string
	ManifestPath string // "" = skill.toml beside the module
	Upgrade      bool   // replace an installed skill of the same name
	// Consent is asked when an upgrade widens the skill's capabilities; nil
	// or false refuses the upgrade.
	Consent func(widened []string) (bool, error)
}

// Result describes what was installed.
type Result struct {
	Skill    store.InstalledSkill
	Manifest *runtime.Manifest
	Info     *runtime.Info
	Upgraded bool
	Previous string   // the version replaced, on upgrade
	Widened  []string // capabilities the upgrade added, in plain words
}

// Install validates and installs a module. An error wrapping
// store.ErrNotAnnounced comes with the result: the skill is installed, but a
// running buddy serve sees it only once restarted.
func (in *Installer) Install(ctx context.Context, req Request) (*Result, error) {
	if in.Store == nil || in.DataDir == "" {
		// Without a data directory the copy would land in the working directory.
		return nil, errs.New(errs.ErrInternal, "installer needs a store and a data directory")
	}
	wasm, err := readModule(req.WasmPath)
	if err != nil {
		return nil, err
	}
	mpath := req.ManifestPath
	if mpath == "" {
		mpath = filepath.Join(filepath.Dir(req.WasmPath), "skill.toml")
		if _, err := os.Stat(mpath); err != nil {
			return nil, errs.New(errs.ErrConfig, fmt.Sprintf("no skill.toml beside %s: pass --manifest FILE", req.WasmPath))
		}
	}
	manifestText, err := runtime.ReadManifestFile(mpath)
	if err != nil {
		return nil, err
	}
	m, err := runtime.ParseManifest(manifestText)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mpath, err)
	}
	if err := checkName(m.Name); err != nil {
		return nil, err
	}
	info, err := runtime.Inspect(ctx, wasm, m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", req.WasmPath, err)
	}
	capsJSON, _ := json.Marshal(m.Capabilities)

	res := &Result{Manifest: m, Info: info}
	old, err := in.Store.GetSkill(ctx, m.Name)
	switch {
	case err == nil:
		if !req.Upgrade {
			return nil, errs.New(errs.ErrInvalidInput, fmt.Sprintf("%s %s is already installed; pass --upgrade to replace it with %s", m.Name, old.Version, m.Version))
		}
		var oldCaps runtime.Capabilities
		if err := json.Unmarshal([]byte(old.Capabilities), &oldCaps); err != nil {
			// An unreadable record: treat every capability as new.
			oldCaps = runtime.Capabilities{}
		}
		res.Upgraded, res.Previous = true, old.Version
		res.Widened = Widened(oldCaps, m.Capabilities)
		res.Widened = append(res.Widened, widenedCredentials(old.Manifest, m.Credentials)...)
		if w := widenedPermission(old.Manifest, m.Permission); w != "" {
			res.Widened = append(res.Widened, w)
		}
		if len(res.Widened) > 0 {
			ok := false
			if req.Consent != nil {
				if ok, err = req.Consent(res.Widened); err != nil {
					return nil, errs.Wrap(errs.ErrDenied, fmt.Sprintf("upgrade of %s widens its capabilities (%s) and was not approved", m.Name, strings.Join(res.Widened, "; ")), err)
				}
			}
			if !ok {
				return nil, errs.New(errs.ErrDenied, fmt.Sprintf("upgrade of %s widens its capabilities (%s) and was not approved", m.Name, strings.Join(res.Widened, "; ")))
			}
		}
	case errors.Is(err, errs.ErrNotFound):
		if req.Upgrade {
			// --upgrade of something not installed is a plain install.
			req.Upgrade = false
		}
	default:
		return nil, err
	}

	dest, err := in.copyModule(m.Name, info.SHA256, wasm)
	if err != nil {
		return nil, err
	}
	row := store.InstalledSkill{
		Name: m.Name, Version: m.Version, Description: m.Description, Author: m.Author,
		WasmPath: dest, SHA256: info.SHA256, Manifest: string(manifestText),
		Capabilities: string(capsJSON), Status: store.StatusVerified,
	}
	if res.Upgraded {
		err = in.Store.ReplaceSkill(ctx, row)
	} else {
		err = in.Store.InsertSkill(ctx, row)
	}
	// Stored but not announced to running processes: the install stands,
	// so it is finished (old module, audit row) and the error reported.
	unannounced := errors.Is(err, store.ErrNotAnnounced)
	if err != nil && !unannounced {
		// Leave the copy if a row uses it: the one being upgraded, or one
		// that a concurrent install of the same module just recorded.
		if !(res.Upgraded && dest == old.WasmPath) && !in.inUse(ctx, m.Name, dest) {
			os.Remove(dest)
			os.Remove(filepath.Dir(dest)) // only if empty
		}
		if errors.Is(err, store.ErrExists) {
			return nil, errs.New(errs.ErrInvalidInput, fmt.Sprintf("%s was installed meanwhile; pass --upgrade to replace it", m.Name))
		}
		return nil, err
	}
	if res.Upgraded && old.WasmPath != dest && in.owns(old.WasmPath) {
		os.Remove(old.WasmPath)
	}
	if got, err := in.Store.GetSkill(ctx, m.Name); err == nil {
		row = got
	}
	res.Skill = row
	outcome := "installed"
	if res.Upgraded {
		outcome = "upgraded from " + res.Previous
	}
	in.audit(ctx, store.AuditInstall, outcome, row)
	if unannounced {
		return res, err
	}
	return res, nil
}

// Remove uninstalls a skill: its row and its module file (also when the
// error wraps store.ErrNotAnnounced: the removal stands). Its key-value and
// memory namespace is kept (reinstalling it finds its memory again).
func (in *Installer) Remove(ctx context.Context, name string) (store.InstalledSkill, error) {
	if _, ok := builtins.Get(name); ok {
		return store.InstalledSkill{}, errs.New(errs.ErrForbidden, fmt.Sprintf("%s is a built-in: disable it by removing its section from buddy.toml", name))
	}
	row, err := in.Store.GetSkill(ctx, name)
	if err != nil {
		return row, err
	}
	// Stored but not announced to running processes: the removal stands, so
	// it is finished (module file, audit row) and the error reported.
	err = in.Store.DeleteSkill(ctx, name)
	if err != nil && !errors.Is(err, store.ErrNotAnnounced) {
		return row, err
	}
	if in.owns(row.WasmPath) {
		os.Remove(row.WasmPath)
		os.Remove(filepath.Dir(row.WasmPath)) // only if empty
	}
	in.audit(ctx, store.AuditRemove, "removed", row)
	return row, err
}

// inUse reports whether the installed skill name uses the module file path.
func (in *Installer) inUse(ctx context.Context, name, path string) bool {
	cur, err := in.Store.GetSkill(ctx, name)
	return err == nil && cur.WasmPath == path
}

// widenedPermission says, in plain words, that an upgrade now runs without
// asking: it was mutating or network (asked before each call by default) and
// is now read_only (trusted by default). "" otherwise.
func widenedPermission(oldManifest string, now runtime.Permission) string {
	if now != runtime.ReadOnly {
		return ""
	}
	was := runtime.Permission("")
	if m, err := runtime.ParseManifest([]byte(oldManifest)); err == nil {
		was = m.Permission
	}
	if was == runtime.ReadOnly {
		return ""
	}
	if was == "" {
		was = "unknown"
	}
	return fmt.Sprintf("may now run without asking: its permission changes from %s to read_only", was)
}

func (in *Installer) skillsDir() string { return filepath.Join(in.DataDir, "skills") }

// owns reports whether path is a module copy inside the data directory, so
// that remove never deletes a file it did not create.
func (in *Installer) owns(path string) bool {
	rel, err := filepath.Rel(in.skillsDir(), path)
	return err == nil && !strings.HasPrefix(rel, "..") && strings.Count(rel, string(filepath.Separator)) == 1
}

// copyModule writes the module to DataDir/skills/NAME/SHA256.wasm atomically.
func (in *Installer) copyModule(name, sum string, wasm []byte) (string, error) {
	// Private (0700, no one else may write): the registry loads modules
	// from here, and wazero caches native code compiled from them.
	dir := filepath.Join(in.skillsDir(), name)
	for _, d := range []string{in.DataDir, in.skillsDir(), dir} {
		if err := osfile.PrivateDir(d); err != nil {
			return "", err
		}
	}
	dest := filepath.Join(dir, sum+".wasm")
	if err := osfile.WriteAtomic(dest, wasm, 0o600); err != nil {
		return "", errs.Wrap(errs.ErrUnavailable, "writing module copy "+dest, err)
	}
	return dest, nil
}

// readModule reads a module file: a regular file (a FIFO or a device is
// refused, not read) of at most MaxModuleBytes.
func readModule(path string) ([]byte, error) {
	data, err := osfile.ReadBounded(path, MaxModuleBytes)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, errs.New(errs.ErrNotFound, fmt.Sprintf("module file %s does not exist", path))
		}
		return nil, errs.Wrap(errs.ErrInvalidInput, "reading module", err)
	}
	return data, nil
}

func checkName(name string) error {
	if why := builtins.Reserved(name); why != "" {
		return errs.New(errs.ErrForbidden, why)
	}
	return nil
}

// Describe says in plain words what a manifest lets a skill ask for.
func Describe(m *runtime.Manifest) []string {
	var out []string
	switch m.Permission {
	case runtime.ReadOnly:
		out = append(out, "permission read_only: runs without asking")
	case runtime.Mutating:
		out = append(out, "permission mutating: buddy asks before each call unless you trust it")
	case runtime.Network:
		out = append(out, "permission network: buddy asks before each call unless you trust it")
	}
	caps := capLines(m.Capabilities)
	for _, c := range m.Credentials {
		caps = append(caps, "may have buddy send the credential "+c.Name+" to "+strings.Join(c.Hosts, ", ")+" if you grant it (it never sees the value)")
	}
	if len(caps) == 0 {
		out = append(out, "touches nothing outside itself: no files, no network, no environment, no memory")
	}
	out = append(out, caps...)
	r := m.Resources
	out = append(out, fmt.Sprintf("limits: %d fuel, %d MiB of memory, %s per call", r.Fuel, r.MemoryMB, r.Timeout))
	return out
}

func capLines(c runtime.Capabilities) []string {
	var out []string
	if c.FilesRead {
		out = append(out, "may read files in directories you grant it")
	}
	if c.FilesWrite {
		out = append(out, "may create and replace files in directories you grant it")
	}
	for _, d := range c.Network {
		out = append(out, "may "+describeDomain(d))
	}
	if len(c.Network) > 0 {
		out = append(out, networkMethods)
	}
	if len(c.Env) > 0 {
		out = append(out, "may read the environment variables "+strings.Join(c.Env, ", ")+" if you grant them")
	}
	if c.Memory {
		out = append(out, "may keep its own memory (key-value store and notes) if you grant it")
	}
	return out
}

// describeDomain says what a declared network pattern lets a skill do.
// Every network grant links http_request as well as http_get, so the words
// name requests of any method, not only GETs.
func describeDomain(d string) string {
	p, err := allow.Parse(d, allow.Manifest)
	switch {
	case err != nil:
		return "send HTTP requests to " + d
	case p.Any():
		return "send HTTP requests to any domain you allow"
	case p.Wildcard():
		return "send HTTP requests to *." + p.Host() + " (any subdomain of " + p.Host() + ") if you allow it"
	}
	return "send HTTP requests to " + p.String() + " if you allow it"
}

// networkMethods is the line Describe adds for a skill that declares the
// network: what its requests may be.
var networkMethods = "its HTTP requests may be " + buddyhttp.RequestsInWords()

// Widened lists, in plain words, what next may do that prev could not.
func Widened(prev, next runtime.Capabilities) []string {
	var out []string
	if next.FilesRead && !prev.FilesRead {
		out = append(out, "may now read files in directories you grant it")
	}
	if next.FilesWrite && !prev.FilesWrite {
		out = append(out, "may now create and replace files in directories you grant it")
	}
	for _, d := range next.Network {
		p, err := allow.Parse(d, allow.Manifest)
		if err != nil {
			continue
		}
		covered := false
		for _, o := range prev.Network {
			if q, err := allow.Parse(o, allow.Manifest); err == nil && allow.Within(p, q) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, "may now "+describeDomain(d))
		}
	}
	var env []string
	for _, e := range next.Env {
		if !slices.Contains(prev.Env, e) {
			env = append(env, e)
		}
	}
	if len(env) > 0 {
		out = append(out, "may now read the environment variables "+strings.Join(env, ", "))
	}
	if next.Memory && !prev.Memory {
		out = append(out, "may now keep its own memory")
	}
	return out
}

// widenedCredentials lists, in plain words, the credentials next declares
// that the installed manifest did not, or now to more hosts.
func widenedCredentials(oldManifest string, next []runtime.Credential) []string {
	var prev []runtime.Credential
	if m, err := runtime.ParseManifest([]byte(oldManifest)); err == nil {
		prev = m.Credentials
	}
	var out []string
	for _, c := range next {
		i := slices.IndexFunc(prev, func(p runtime.Credential) bool { return p.Name == c.Name })
		if i < 0 {
			out = append(out, "may now have buddy send the credential "+c.Name+" to "+strings.Join(c.Hosts, ", "))
			continue
		}
		var wider []string
		for _, h := range c.Hosts {
			p, err := allow.Parse(h, allow.Manifest)
			if err != nil {
				continue
			}
			covered := false
			for _, o := range prev[i].Hosts {
				if q, err := allow.Parse(o, allow.Manifest); err == nil && allow.Within(p, q) {
					covered = true
				}
			}
			if !covered {
				wider = append(wider, h)
			}
		}
		if len(wider) > 0 {
			out = append(out, "may now have buddy send the credential "+c.Name+" to "+strings.Join(wider, ", ")+" too")
		}
	}
	return out
}

// SHA256 is the hex sha256 of b.
func SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
