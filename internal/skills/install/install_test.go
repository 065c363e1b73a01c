package install_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/skills/install"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

func TestInstall(t *testing.T) {
	e := newEnv(t)
	wasm := fixture(t, "echo.wasm")
	text := manifest("echo", "1.0.0", "read_only", "")
	src := e.module(t, "echo.wasm", text)
	before := time.Now().Add(-time.Second)
	res, err := e.inst.Install(t.Context(), install.Request{WasmPath: src})
	if err != nil {
		t.Fatal(err)
	}

	// The module is copied to DataDir/skills/NAME/<sha>.wasm.
	want := filepath.Join(e.dataDir, "skills", "echo", sha(wasm)+".wasm")
	if res.Skill.WasmPath != want {
		t.Errorf("wasm path %s, want %s", res.Skill.WasmPath, want)
	}
	if got := readFile(t, want); !bytes.Equal(got, wasm) {
		t.Errorf("the copy differs from the module")
	}
	if got := e.files(t); !slices.Equal(got, []string{"echo/", "echo/" + sha(wasm) + ".wasm"}) {
		t.Errorf("files %v (a temporary file left?)", got)
	}
	if !bytes.Equal(readFile(t, src), wasm) {
		t.Errorf("the source module was changed")
	}

	// The row, as stored.
	row := e.row(t, "echo")
	if row != res.Skill {
		t.Errorf("result %+v\nrow    %+v", res.Skill, row)
	}
	if row.SHA256 != sha(wasm) || row.Status != store.StatusVerified || row.Version != "1.0.0" ||
		row.Description != "A test skill." || row.Author != "tests" || row.Manifest != text || row.WasmPath != want {
		t.Errorf("row %+v", row)
	}
	var caps runtime.Capabilities
	if err := json.Unmarshal([]byte(row.Capabilities), &caps); err != nil || !reflect.DeepEqual(caps, runtime.Capabilities{}) {
		t.Errorf("capabilities %q: %v", row.Capabilities, err)
	}
	if row.InstalledAt.Before(before) || !row.UpdatedAt.Equal(row.InstalledAt) {
		t.Errorf("installed at %s, updated at %s", row.InstalledAt, row.UpdatedAt)
	}
	if res.Upgraded || res.Previous != "" || len(res.Widened) != 0 {
		t.Errorf("a fresh install reports an upgrade: %+v", res)
	}
	if res.Info == nil || res.Info.SHA256 != sha(wasm) || res.Manifest.Name != "echo" {
		t.Errorf("info %+v, manifest %+v", res.Info, res.Manifest)
	}

	// What the CLI prints.
	wantLines := []string{
		"permission read_only: runs without asking",
		"touches nothing outside itself: no files, no network, no environment, no memory",
		"limits: 1000000000 fuel, 16 MiB of memory, 5s per call",
	}
	if got := install.Describe(res.Manifest); !slices.Equal(got, wantLines) {
		t.Errorf("Describe =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantLines, "\n"))
	}

	// The registry finds it ready and runs it.
	rt, err := runtime.New(t.Context(), runtime.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.WithoutCancel(t.Context()))
	reg, err := skills.New(t.Context(), skills.Options{Runtime: rt, Config: config.Default(), Store: e.st,
		Deps: hostfns.Deps{KV: e.st, Memories: e.st}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.WithoutCancel(t.Context()))
	out, err := reg.Call(t.Context(), "echo", []byte(`{"a":1}`))
	if err != nil || string(out.Output) != `{"a":1}` {
		t.Errorf("calling the installed skill: %v", err)
	}
}

func TestInstallExplicitManifest(t *testing.T) {
	e := newEnv(t)
	src := e.module(t, "echo.wasm", "") // no skill.toml beside
	mpath := filepath.Join(t.TempDir(), "other.toml")
	if err := os.WriteFile(mpath, []byte(manifest("echo", "2.0.0", "read_only", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := e.inst.Install(t.Context(), install.Request{WasmPath: src, ManifestPath: mpath})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skill.Version != "2.0.0" {
		t.Errorf("version %s", res.Skill.Version)
	}
}

func TestDescribe(t *testing.T) {
	m := runtime.DefaultManifest("gh")
	m.Permission = runtime.Network
	m.Capabilities = runtime.Capabilities{
		FilesRead: true, FilesWrite: true, Network: []string{"*.github.com", "api.example.com:8443", "*"},
		Env: []string{"GITHUB_TOKEN", "LANG"}, Memory: true,
	}
	m.Resources = runtime.Resources{Fuel: 42, MemoryMB: 32, Timeout: 1500 * time.Millisecond}
	want := []string{
		"permission network: buddy asks before each call unless you trust it",
		"may read files in directories you grant it",
		"may create and replace files in directories you grant it",
		"may send HTTP requests to *.github.com (any subdomain of github.com) if you allow it",
		"may send HTTP requests to api.example.com:8443 if you allow it",
		"may send HTTP requests to any domain you allow",
		"its HTTP requests may be GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS, with a body of up to 1 MiB",
		"may read the environment variables GITHUB_TOKEN, LANG if you grant them",
		"may keep its own memory (key-value store and notes) if you grant it",
		"limits: 42 fuel, 32 MiB of memory, 1.5s per call",
	}
	if got := install.Describe(m); !slices.Equal(got, want) {
		t.Errorf("Describe =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	m.Permission = runtime.Mutating
	if got := install.Describe(m)[0]; got != "permission mutating: buddy asks before each call unless you trust it" {
		t.Errorf("mutating: %q", got)
	}
}

func TestInstallManifestProblems(t *testing.T) {
	tests := []struct {
		name     string
		manifest string // "" = none beside the module
		explicit string // a ManifestPath that does not exist
		want     []string
	}{
		{name: "no skill.toml beside", want: []string{"no skill.toml beside", "--manifest"}},
		{name: "TOML syntax error", manifest: "[skill\nname = \"echo\"\n", want: []string{"skill.toml"}},
		{name: "bad version", manifest: manifest("echo", "one", "read_only", ""), want: []string{"skill.version", "semantic version"}},
		{name: "unknown key", manifest: manifest("echo", "1.0.0", "read_only", "\n[capabilities]\nnetwrok = [\"example.com\"]\n"),
			want: []string{"capabilities.netwrok"}},
		{name: "bad permission", manifest: manifest("echo", "1.0.0", "admin", ""), want: []string{"skill.permission"}},
		{name: "bad domain", manifest: manifest("echo", "1.0.0", "network", "\n[capabilities]\nnetwork = [\"https://example.com/\"]\n"),
			want: []string{"capabilities.network[0]"}},
		{name: "missing name", manifest: "[skill]\nversion = \"1.0.0\"\ndescription = \"x\"\npermission = \"read_only\"\n",
			want: []string{"skill.name", "required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			src := e.module(t, "echo.wasm", tt.manifest)
			req := install.Request{WasmPath: src}
			if tt.explicit != "" {
				req.ManifestPath = filepath.Join(t.TempDir(), tt.explicit)
			}
			_, err := e.inst.Install(t.Context(), req)
			wantKind(t, err, errs.ErrConfig, tt.want...)
			e.nothingWritten(t)
		})
	}
}

// TestInstallManifestMissing: a --manifest that does not exist is not_found,
// as for `skill run --manifest`.
func TestInstallManifestMissing(t *testing.T) {
	e := newEnv(t)
	src := e.module(t, "echo.wasm", "")
	_, err := e.inst.Install(t.Context(), install.Request{WasmPath: src, ManifestPath: filepath.Join(t.TempDir(), "missing.toml")})
	wantKind(t, err, errs.ErrNotFound, "missing.toml")
	e.nothingWritten(t)
}

func TestInstallModuleProblems(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		extra   string // manifest additions
		kind    error
		want    []string
	}{
		{"not wasm", "notwasm.wasm", "", errs.ErrInvalidInput, []string{"not a WebAssembly module"}},
		{"truncated", "truncated.wasm", "", errs.ErrInvalidInput, []string{"malformed module"}},
		{"imports an undeclared host function", "undeclared.wasm", "", errs.ErrForbidden,
			[]string{"buddy:host/v1.http_get", "declares no network capability"}},
		{"imports a host function declared for another capability", "undeclared.wasm", "\n[capabilities]\nfiles_read = true\n",
			errs.ErrForbidden, []string{"buddy:host/v1.http_get"}},
		{"imports Extism's own HTTP client", "http_request.wasm", "", errs.ErrForbidden, []string{"extism:host/env.http_request"}},
		{"imports a function of nobody", "undeclared_user.wasm", "", errs.ErrForbidden, []string{"extism:host/user.launch_missiles"}},
		{"imports a kernel function with the wrong signature", "bad_sig.wasm", "", errs.ErrInvalidInput, []string{"signature mismatch"}},
		{"imports a memory", "import_memory.wasm", "", errs.ErrInvalidInput, []string{"memory import"}},
		{"lacks the entrypoint", "echo.wasm", "entrypoint = \"main\"\n", errs.ErrNotFound, []string{`no function "main"`, "run"}},
		{"invalid even before instrumentation", "global_reset.wasm", "", errs.ErrInvalidInput, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			text := manifest("skill_x", "1.0.0", "network", tt.extra)
			_, err := e.inst.Install(t.Context(), install.Request{WasmPath: e.module(t, tt.fixture, text)})
			wantKind(t, err, tt.kind, tt.want...)
			e.nothingWritten(t)
		})
	}
	t.Run("module file does not exist", func(t *testing.T) {
		e := newEnv(t)
		_, err := e.inst.Install(t.Context(), install.Request{WasmPath: filepath.Join(e.src, "nope.wasm")})
		wantKind(t, err, errs.ErrNotFound, "nope.wasm")
		e.nothingWritten(t)
	})
	t.Run("module is a directory", func(t *testing.T) {
		e := newEnv(t)
		_, err := e.inst.Install(t.Context(), install.Request{WasmPath: e.src})
		wantKind(t, err, errs.ErrInvalidInput, "not a regular file")
		e.nothingWritten(t)
	})
}

func TestInstallReservedNames(t *testing.T) {
	for _, name := range []string{"read_file", "write_file", "fetch_url", "memory_read", "memory_write", "remember", "recall", "memory"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			for _, upgrade := range []bool{false, true} {
				_, err := e.inst.Install(t.Context(), install.Request{
					WasmPath: e.module(t, "echo.wasm", manifest(name, "1.0.0", "read_only", "")),
					Upgrade:  upgrade,
				})
				wantKind(t, err, errs.ErrForbidden, name)
			}
			e.nothingWritten(t)
		})
	}
}

func TestInstallNeedsDataDir(t *testing.T) {
	e := newEnv(t)
	src := e.module(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", ""))
	wd := t.TempDir()
	t.Chdir(wd)
	inst := &install.Installer{Store: e.st}
	_, err := inst.Install(t.Context(), install.Request{WasmPath: src})
	wantKind(t, err, errs.ErrInternal)
	if entries, _ := os.ReadDir(wd); len(entries) != 0 {
		t.Errorf("install wrote into the working directory: %v", entries)
	}
	e.nothingWritten(t)
}

// TestReinstallWithoutUpgrade: installing a skill of an installed name is
// refused and changes nothing.
func TestReinstallWithoutUpgrade(t *testing.T) {
	e := newEnv(t)
	first := e.install(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", ""))
	filesBefore := e.files(t)
	for _, fx := range []string{"counter.wasm", "echo.wasm"} { // another module, and the same one
		_, err := e.inst.Install(t.Context(), install.Request{
			WasmPath: e.module(t, fx, manifest("echo", "1.1.0", "network", "\n[capabilities]\nnetwork = [\"example.com\"]\n")),
		})
		wantKind(t, err, errs.ErrInvalidInput, "already installed", "--upgrade")
		if row := e.row(t, "echo"); row != first.Skill {
			t.Errorf("row changed:\n%+v\n%+v", row, first.Skill)
		}
		if !bytes.Equal(readFile(t, first.Skill.WasmPath), fixture(t, "echo.wasm")) {
			t.Errorf("module changed")
		}
		if got := e.files(t); !slices.Equal(got, filesBefore) {
			t.Errorf("files %v, want %v", got, filesBefore)
		}
	}
}

// TestUpgradeNotWidening: an upgrade that asks for nothing new replaces the
// skill without asking, keeps installed_at and removes the old module.
func TestUpgradeNotWidening(t *testing.T) {
	e := newEnv(t)
	caps := "\n[capabilities]\nnetwork = [\"*.github.com\"]\nenv = [\"LANG\", \"TZ\"]\nmemory = true\n"
	first := e.install(t, "echo.wasm", manifest("echo", "1.0.0", "network", caps))
	time.Sleep(2 * time.Millisecond)
	c := &consent{ok: false}
	// Narrower: a host within the old wildcard, fewer variables, no memory.
	narrower := "\n[capabilities]\nnetwork = [\"api.github.com\"]\nenv = [\"TZ\"]\n"
	res, err := e.inst.Install(t.Context(), install.Request{
		WasmPath: e.module(t, "counter.wasm", manifest("echo", "1.1.0", "network", narrower)),
		Upgrade:  true, Consent: c.fn,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.asked) != 0 {
		t.Errorf("consent asked for %v", c.asked)
	}
	if !res.Upgraded || res.Previous != "1.0.0" || len(res.Widened) != 0 {
		t.Errorf("upgraded %v, previous %q, widened %v", res.Upgraded, res.Previous, res.Widened)
	}
	row := e.row(t, "echo")
	counter := fixture(t, "counter.wasm")
	if row.Version != "1.1.0" || row.SHA256 != sha(counter) || row.Status != store.StatusVerified {
		t.Errorf("row %+v", row)
	}
	if !row.InstalledAt.Equal(first.Skill.InstalledAt) {
		t.Errorf("installed_at %s, want the first install's %s", row.InstalledAt, first.Skill.InstalledAt)
	}
	if !row.UpdatedAt.After(first.Skill.UpdatedAt) {
		t.Errorf("updated_at %s not after %s", row.UpdatedAt, first.Skill.UpdatedAt)
	}
	if _, err := os.Stat(first.Skill.WasmPath); !os.IsNotExist(err) {
		t.Errorf("the old module %s is still there (%v)", first.Skill.WasmPath, err)
	}
	if !bytes.Equal(readFile(t, row.WasmPath), counter) {
		t.Errorf("the new module is not the upgrade")
	}
	if got := e.files(t); !slices.Equal(got, []string{"echo/", "echo/" + sha(counter) + ".wasm"}) {
		t.Errorf("files %v", got)
	}
}

// TestUpgradeSameModule: an upgrade that changes only the manifest keeps the
// (shared) module file.
func TestUpgradeSameModule(t *testing.T) {
	e := newEnv(t)
	first := e.install(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", ""))
	res, err := e.inst.Install(t.Context(), install.Request{
		WasmPath: e.module(t, "echo.wasm", manifest("echo", "1.0.1", "read_only", "")), Upgrade: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skill.WasmPath != first.Skill.WasmPath || res.Skill.Version != "1.0.1" {
		t.Errorf("row %+v", res.Skill)
	}
	if !bytes.Equal(readFile(t, res.Skill.WasmPath), fixture(t, "echo.wasm")) {
		t.Errorf("module changed")
	}
}

// TestUpgradeOfNothingInstalled: --upgrade of a skill not installed installs it.
func TestUpgradeOfNothingInstalled(t *testing.T) {
	e := newEnv(t)
	res, err := e.inst.Install(t.Context(), install.Request{
		WasmPath: e.module(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", "")), Upgrade: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Upgraded {
		t.Errorf("reported as an upgrade")
	}
	e.row(t, "echo")
}

// TestUpgradeWidening: an upgrade that asks for more needs fresh consent,
// given the list in plain words; without it nothing changes.
func TestUpgradeWidening(t *testing.T) {
	base := "\n[capabilities]\nfiles_read = true\nnetwork = [\"api.github.com\"]\nenv = [\"LANG\"]\n"
	tests := []struct {
		name   string
		perm   string
		caps   string
		widens []string
	}{
		{"adds network", "network", base, []string{"may now send HTTP requests to api.github.com if you allow it"}},
		{"adds files_write", "network", "\n[capabilities]\nfiles_read = true\nfiles_write = true\nnetwork = [\"api.github.com\"]\nenv = [\"LANG\"]\n",
			[]string{"may now create and replace files in directories you grant it"}},
		{"adds a domain", "network", "\n[capabilities]\nfiles_read = true\nnetwork = [\"api.github.com\", \"example.com\"]\nenv = [\"LANG\"]\n",
			[]string{"may now send HTTP requests to example.com if you allow it"}},
		{"a broader domain pattern", "network", "\n[capabilities]\nfiles_read = true\nnetwork = [\"*.github.com\"]\nenv = [\"LANG\"]\n",
			[]string{"may now send HTTP requests to *.github.com (any subdomain of github.com) if you allow it"}},
		{"any domain", "network", "\n[capabilities]\nfiles_read = true\nnetwork = [\"*\"]\nenv = [\"LANG\"]\n",
			[]string{"may now send HTTP requests to any domain you allow"}},
		{"adds env", "network", "\n[capabilities]\nfiles_read = true\nnetwork = [\"api.github.com\"]\nenv = [\"GITHUB_TOKEN\", \"LANG\"]\n",
			[]string{"may now read the environment variables GITHUB_TOKEN"}},
		{"adds memory", "network", base + "memory = true\n",
			[]string{"may now keep its own memory"}},
		{"several at once", "network", "\n[capabilities]\nfiles_read = true\nfiles_write = true\nnetwork = [\"*.github.com\"]\nenv = [\"LANG\", \"HOME\"]\nmemory = true\n",
			[]string{
				"may now create and replace files in directories you grant it",
				"may now send HTTP requests to *.github.com (any subdomain of github.com) if you allow it",
				"may now read the environment variables HOME",
				"may now keep its own memory",
			}},
		{"adds a credential", "network", base + "[credentials.github]\nhosts = [\"api.github.com\"]\n",
			[]string{"may now have buddy send the credential github to api.github.com"}},
		{"sends a credential to more hosts", "network", "\n[capabilities]\nfiles_read = true\nnetwork = [\"*.github.com\"]\nenv = [\"LANG\"]\n[credentials.github]\nhosts = [\"*.github.com\"]\n",
			[]string{"may now send HTTP requests to *.github.com (any subdomain of github.com) if you allow it",
				"may now have buddy send the credential github to *.github.com too"}},
		{"becomes read_only: runs without asking", "read_only", "\n[capabilities]\nfiles_read = true\nenv = [\"LANG\"]\n",
			[]string{"may now run without asking: its permission changes from network to read_only"}},
	}
	// v1's capabilities, when not base.
	from := map[string]string{"adds network": "\n[capabilities]\nfiles_read = true\nenv = [\"LANG\"]\n",
		"sends a credential to more hosts": base + "[credentials.github]\nhosts = [\"api.github.com\"]\n"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setup := func(t *testing.T) (*env, *install.Result, string) {
				e := newEnv(t)
				v1, ok := from[tt.name]
				if !ok {
					v1 = base
				}
				first := e.install(t, "echo.wasm", manifest("echo", "1.0.0", "network", v1))
				return e, first, e.module(t, "counter.wasm", manifest("echo", "2.0.0", tt.perm, tt.caps))
			}
			unchanged := func(t *testing.T, e *env, first *install.Result) {
				t.Helper()
				if row := e.row(t, "echo"); row != first.Skill {
					t.Errorf("row changed:\n%+v\n%+v", row, first.Skill)
				}
				if got, want := e.files(t), []string{"echo/", "echo/" + first.Skill.SHA256 + ".wasm"}; !slices.Equal(got, want) {
					t.Errorf("files %v, want %v", got, want)
				}
			}
			t.Run("consent refused", func(t *testing.T) {
				e, first, src := setup(t)
				c := &consent{ok: false}
				_, err := e.inst.Install(t.Context(), install.Request{WasmPath: src, Upgrade: true, Consent: c.fn})
				wantKind(t, err, errs.ErrDenied, "widens its capabilities", "not approved")
				if len(c.asked) != 1 || !slices.Equal(c.asked[0], tt.widens) {
					t.Errorf("consent asked %q, want %q", c.asked, tt.widens)
				}
				unchanged(t, e, first)
			})
			t.Run("no one to ask", func(t *testing.T) {
				e, first, src := setup(t)
				_, err := e.inst.Install(t.Context(), install.Request{WasmPath: src, Upgrade: true})
				wantKind(t, err, errs.ErrDenied, tt.widens[0])
				unchanged(t, e, first)
			})
			t.Run("consent fails", func(t *testing.T) {
				e, first, src := setup(t)
				cause := errors.New("stdin is not a terminal")
				c := &consent{err: cause}
				_, err := e.inst.Install(t.Context(), install.Request{WasmPath: src, Upgrade: true, Consent: c.fn})
				wantKind(t, err, errs.ErrDenied, "not approved")
				if !errors.Is(err, cause) {
					t.Errorf("err = %v does not keep its cause", err)
				}
				unchanged(t, e, first)
			})
			t.Run("consent given", func(t *testing.T) {
				e, first, src := setup(t)
				c := &consent{ok: true}
				res, err := e.inst.Install(t.Context(), install.Request{WasmPath: src, Upgrade: true, Consent: c.fn})
				if err != nil {
					t.Fatal(err)
				}
				if len(c.asked) != 1 || !slices.Equal(res.Widened, tt.widens) {
					t.Errorf("asked %d times; widened %q, want %q", len(c.asked), res.Widened, tt.widens)
				}
				row := e.row(t, "echo")
				if row.Version != "2.0.0" || row.SHA256 != sha(fixture(t, "counter.wasm")) || !row.InstalledAt.Equal(first.Skill.InstalledAt) {
					t.Errorf("row %+v", row)
				}
				if _, err := os.Stat(first.Skill.WasmPath); !os.IsNotExist(err) {
					t.Errorf("old module still there")
				}
			})
		})
	}
}

// TestUpgradeUnreadableRecord: an installed row whose capabilities cannot be
// read counts as having none: everything the upgrade declares is new.
func TestUpgradeUnreadableRecord(t *testing.T) {
	e := newEnv(t)
	wasm := filepath.Join(t.TempDir(), "old.wasm")
	if err := os.WriteFile(wasm, fixture(t, "echo.wasm"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.st.InsertSkill(t.Context(), store.InstalledSkill{
		Name: "echo", Version: "0.1.0", WasmPath: wasm, SHA256: sha(fixture(t, "echo.wasm")),
		Manifest: "garbage", Capabilities: "{not json",
	}); err != nil {
		t.Fatal(err)
	}
	c := &consent{ok: true}
	res, err := e.inst.Install(t.Context(), install.Request{
		WasmPath: e.module(t, "counter.wasm", manifest("echo", "1.0.0", "read_only", "\n[capabilities]\nfiles_read = true\n")),
		Upgrade:  true, Consent: c.fn,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"may now read files in directories you grant it",
		"may now run without asking: its permission changes from unknown to read_only",
	}
	if !slices.Equal(res.Widened, want) {
		t.Errorf("widened %q, want %q", res.Widened, want)
	}
	// The old module was not buddy's copy: it is left alone.
	if _, err := os.Stat(wasm); err != nil {
		t.Errorf("a module outside the data directory was deleted: %v", err)
	}
}

func TestWidened(t *testing.T) {
	caps := func(edit func(*runtime.Capabilities)) runtime.Capabilities {
		var c runtime.Capabilities
		if edit != nil {
			edit(&c)
		}
		return c
	}
	tests := []struct {
		name       string
		prev, next runtime.Capabilities
		want       []string
	}{
		{"nothing to nothing", caps(nil), caps(nil), nil},
		{"same", caps(func(c *runtime.Capabilities) {
			c.FilesRead, c.Network, c.Env, c.Memory = true, []string{"example.com"}, []string{"LANG"}, true
		}),
			caps(func(c *runtime.Capabilities) {
				c.FilesRead, c.Network, c.Env, c.Memory = true, []string{"example.com"}, []string{"LANG"}, true
			}), nil},
		{"everything dropped", caps(func(c *runtime.Capabilities) {
			c.FilesRead, c.FilesWrite, c.Network, c.Env, c.Memory = true, true, []string{"*"}, []string{"LANG"}, true
		}), caps(nil), nil},
		{"adds files_read", caps(nil), caps(func(c *runtime.Capabilities) { c.FilesRead = true }),
			[]string{"may now read files in directories you grant it"}},
		{"adds files_write", caps(func(c *runtime.Capabilities) { c.FilesRead = true }), caps(func(c *runtime.Capabilities) { c.FilesRead, c.FilesWrite = true, true }),
			[]string{"may now create and replace files in directories you grant it"}},
		{"adds network", caps(nil), caps(func(c *runtime.Capabilities) { c.Network = []string{"example.com"} }),
			[]string{"may now send HTTP requests to example.com if you allow it"}},
		{"exact within the old wildcard", caps(func(c *runtime.Capabilities) { c.Network = []string{"*.github.com"} }),
			caps(func(c *runtime.Capabilities) { c.Network = []string{"api.github.com", "raw.github.com"} }), nil},
		{"wildcard over the old exact host", caps(func(c *runtime.Capabilities) { c.Network = []string{"api.github.com"} }),
			caps(func(c *runtime.Capabilities) { c.Network = []string{"*.github.com"} }),
			[]string{"may now send HTTP requests to *.github.com (any subdomain of github.com) if you allow it"}},
		{"deeper wildcard within the old one", caps(func(c *runtime.Capabilities) { c.Network = []string{"*.github.com"} }),
			caps(func(c *runtime.Capabilities) { c.Network = []string{"*.api.github.com"} }), nil},
		{"apex is not within the wildcard", caps(func(c *runtime.Capabilities) { c.Network = []string{"*.github.com"} }),
			caps(func(c *runtime.Capabilities) { c.Network = []string{"github.com"} }),
			[]string{"may now send HTTP requests to github.com if you allow it"}},
		{"any port over one port", caps(func(c *runtime.Capabilities) { c.Network = []string{"example.com:443"} }),
			caps(func(c *runtime.Capabilities) { c.Network = []string{"example.com"} }),
			[]string{"may now send HTTP requests to example.com if you allow it"}},
		{"one port within any port", caps(func(c *runtime.Capabilities) { c.Network = []string{"example.com"} }),
			caps(func(c *runtime.Capabilities) { c.Network = []string{"example.com:443"} }), nil},
		{"* over a list", caps(func(c *runtime.Capabilities) { c.Network = []string{"example.com"} }),
			caps(func(c *runtime.Capabilities) { c.Network = []string{"*"} }),
			[]string{"may now send HTTP requests to any domain you allow"}},
		{"anything within *", caps(func(c *runtime.Capabilities) { c.Network = []string{"*"} }),
			caps(func(c *runtime.Capabilities) { c.Network = []string{"*.github.com", "example.com:8080"} }), nil},
		{"adds env", caps(func(c *runtime.Capabilities) { c.Env = []string{"LANG"} }),
			caps(func(c *runtime.Capabilities) { c.Env = []string{"HOME", "LANG", "TOKEN"} }),
			[]string{"may now read the environment variables HOME, TOKEN"}},
		{"adds memory", caps(nil), caps(func(c *runtime.Capabilities) { c.Memory = true }),
			[]string{"may now keep its own memory"}},
		{"all at once, in order", caps(nil), caps(func(c *runtime.Capabilities) {
			c.FilesRead, c.FilesWrite, c.Network, c.Env, c.Memory = true, true, []string{"a.example.com", "b.example.com"}, []string{"X"}, true
		}), []string{
			"may now read files in directories you grant it",
			"may now create and replace files in directories you grant it",
			"may now send HTTP requests to a.example.com if you allow it",
			"may now send HTTP requests to b.example.com if you allow it",
			"may now read the environment variables X",
			"may now keep its own memory",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := install.Widened(tt.prev, tt.next); !slices.Equal(got, tt.want) {
				t.Errorf("Widened =\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	e := newEnv(t)
	res := e.install(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", ""))
	e.install(t, "counter.wasm", manifest("counter", "1.0.0", "read_only", ""))
	row, err := e.inst.Remove(t.Context(), "echo")
	if err != nil {
		t.Fatal(err)
	}
	if row != res.Skill {
		t.Errorf("removed row %+v", row)
	}
	if _, err := e.st.GetSkill(t.Context(), "echo"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("row still there: %v", err)
	}
	if got := e.files(t); !slices.Equal(got, []string{"counter/", "counter/" + sha(fixture(t, "counter.wasm")) + ".wasm"}) {
		t.Errorf("files %v: echo's module or directory left, or counter's removed", got)
	}
	// Removed, it can be installed again.
	e.install(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", ""))

	t.Run("built-in", func(t *testing.T) {
		for _, name := range []string{"read_file", "recall"} {
			_, err := e.inst.Remove(t.Context(), name)
			wantKind(t, err, errs.ErrForbidden, "built-in")
		}
	})
	t.Run("unknown", func(t *testing.T) {
		_, err := e.inst.Remove(t.Context(), "nope")
		wantKind(t, err, errs.ErrNotFound, "nope")
	})
	t.Run("a module outside the data directory is left alone", func(t *testing.T) {
		outside := filepath.Join(t.TempDir(), "mine.wasm")
		if err := os.WriteFile(outside, fixture(t, "echo.wasm"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := e.st.InsertSkill(t.Context(), store.InstalledSkill{Name: "mine", WasmPath: outside}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.inst.Remove(t.Context(), "mine"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(outside); err != nil {
			t.Errorf("deleted a file buddy did not create: %v", err)
		}
	})
}

// TestCorruptStore: a database file that is not one is a clear config error,
// and neither it nor the data directory is touched.
func TestCorruptStore(t *testing.T) {
	dataDir := t.TempDir()
	db := filepath.Join(dataDir, "buddy.db")
	junk := bytes.Repeat([]byte("this is not a SQLite database\n"), 200)
	if err := os.WriteFile(db, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := store.Open(t.Context(), db, store.Options{})
	wantKind(t, err, errs.ErrConfig, db)
	if got := readFile(t, db); !bytes.Equal(got, junk) {
		t.Errorf("the corrupt file was changed")
	}
	// Only the corrupt file and the setup lock beside it: no WAL, no journal.
	entries, _ := os.ReadDir(dataDir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"buddy.db", "buddy.db.lock"}) {
		t.Errorf("data directory holds %v", names)
	}
}

// fakeStore is a real store whose methods a test may replace.
type fakeStore struct {
	*store.Store
	insert  func(ctx context.Context, sk store.InstalledSkill) error
	replace func(ctx context.Context, sk store.InstalledSkill) error
	delete  func(ctx context.Context, name string) error
}

func (f *fakeStore) DeleteSkill(ctx context.Context, name string) error {
	if f.delete != nil {
		return f.delete(ctx, name)
	}
	return f.Store.DeleteSkill(ctx, name)
}

func (f *fakeStore) InsertSkill(ctx context.Context, sk store.InstalledSkill) error {
	if f.insert != nil {
		return f.insert(ctx, sk)
	}
	return f.Store.InsertSkill(ctx, sk)
}

func (f *fakeStore) ReplaceSkill(ctx context.Context, sk store.InstalledSkill) error {
	if f.replace != nil {
		return f.replace(ctx, sk)
	}
	return f.Store.ReplaceSkill(ctx, sk)
}

// TestChangeStoredNotAnnounced: when the store commits a change but cannot
// announce it to running processes (store.ErrNotAnnounced), the change
// stands: install, upgrade and removal finish (module files, audit rows) and
// report the error.
func TestChangeStoredNotAnnounced(t *testing.T) {
	e := newEnv(t)
	unannounced := func(err error) error {
		if err != nil {
			return err
		}
		return errs.Wrap(errs.ErrUnavailable, "done, but", fmt.Errorf("%w: stamp", store.ErrNotAnnounced))
	}
	fs := &fakeStore{Store: e.st,
		insert: func(ctx context.Context, sk store.InstalledSkill) error {
			return unannounced(e.st.InsertSkill(ctx, sk))
		},
		replace: func(ctx context.Context, sk store.InstalledSkill) error {
			return unannounced(e.st.ReplaceSkill(ctx, sk))
		},
		delete: func(ctx context.Context, name string) error { return unannounced(e.st.DeleteSkill(ctx, name)) },
	}
	inst := &install.Installer{Store: fs, DataDir: e.dataDir}
	first, err := inst.Install(t.Context(), install.Request{WasmPath: e.module(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", ""))})
	if !errors.Is(err, store.ErrNotAnnounced) || first == nil {
		t.Fatalf("install: %v, %v; want the result and ErrNotAnnounced", first, err)
	}
	if got, want := e.files(t), []string{"echo/", "echo/" + first.Skill.SHA256 + ".wasm"}; !slices.Equal(got, want) {
		t.Fatalf("after install: files %v, want %v", got, want)
	}
	up, err := inst.Install(t.Context(), install.Request{
		WasmPath: e.module(t, "counter.wasm", manifest("echo", "1.1.0", "read_only", "")), Upgrade: true,
	})
	if !errors.Is(err, store.ErrNotAnnounced) || up == nil || e.row(t, "echo").Version != "1.1.0" {
		t.Fatalf("upgrade: %v, %v", up, err)
	}
	if got, want := e.files(t), []string{"echo/", "echo/" + up.Skill.SHA256 + ".wasm"}; !slices.Equal(got, want) {
		t.Fatalf("after upgrade: files %v, want %v (the old module removed)", got, want)
	}
	if _, err := inst.Remove(t.Context(), "echo"); !errors.Is(err, store.ErrNotAnnounced) {
		t.Fatalf("remove: %v", err)
	}
	if f := e.files(t); len(f) != 0 {
		t.Fatalf("after remove: files %v", f)
	}
	rows, err := e.st.Audit(t.Context(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, r := range rows {
		outcomes = append(outcomes, r.Outcome)
	}
	if want := []string{"installed", "upgraded from 1.0.0", "removed"}; !slices.Equal(outcomes, want) {
		t.Fatalf("audit outcomes %q, want %q", outcomes, want)
	}
}

// TestInsertFailureLeavesNothing: when recording the skill fails, the module
// copy is removed.
func TestInsertFailureLeavesNothing(t *testing.T) {
	e := newEnv(t)
	diskFull := errors.New("database or disk is full")
	fs := &fakeStore{Store: e.st, insert: func(context.Context, store.InstalledSkill) error {
		return errs.Wrap(errs.ErrUnavailable, "installing skill", diskFull)
	}}
	inst := &install.Installer{Store: fs, DataDir: e.dataDir}
	_, err := inst.Install(t.Context(), install.Request{WasmPath: e.module(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", ""))})
	if !errors.Is(err, diskFull) {
		t.Fatalf("err = %v", err)
	}
	e.nothingWritten(t)
}

// TestStoreClosed: with the store closed, install fails and leaves nothing.
func TestStoreClosed(t *testing.T) {
	e := newEnv(t)
	src := e.module(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", ""))
	e.st.Close(context.Background())
	_, err := e.inst.Install(t.Context(), install.Request{WasmPath: src})
	if err == nil {
		t.Fatal("install into a closed store succeeded")
	}
	if f := e.files(t); len(f) != 0 {
		t.Errorf("files left: %v", f)
	}
}

// TestReplaceFailureKeepsTheOld: a failed upgrade keeps the installed skill
// and its module, and removes the new copy.
func TestReplaceFailureKeepsTheOld(t *testing.T) {
	e := newEnv(t)
	first := e.install(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", ""))
	fs := &fakeStore{Store: e.st, replace: func(context.Context, store.InstalledSkill) error {
		return errs.New(errs.ErrUnavailable, "disk I/O error")
	}}
	inst := &install.Installer{Store: fs, DataDir: e.dataDir}
	for _, fx := range []string{"counter.wasm", "echo.wasm"} {
		_, err := inst.Install(t.Context(), install.Request{
			WasmPath: e.module(t, fx, manifest("echo", "1.1.0", "read_only", "")), Upgrade: true,
		})
		wantKind(t, err, errs.ErrUnavailable)
		if row := e.row(t, "echo"); row != first.Skill {
			t.Errorf("%s: row changed", fx)
		}
		if got, want := e.files(t), []string{"echo/", "echo/" + first.Skill.SHA256 + ".wasm"}; !slices.Equal(got, want) {
			t.Errorf("%s: files %v, want %v", fx, got, want)
		}
	}
}

// TestInstalledMeanwhile: when another install of the same module records
// the skill between our check and our insert, ours fails and must not delete
// the module file the other one's row points at.
func TestInstalledMeanwhile(t *testing.T) {
	e := newEnv(t)
	fs := &fakeStore{Store: e.st}
	fs.insert = func(ctx context.Context, sk store.InstalledSkill) error {
		// The other installer wins the race with the same bytes, same path.
		if err := e.st.InsertSkill(ctx, sk); err != nil {
			return err
		}
		return e.st.InsertSkill(ctx, sk)
	}
	inst := &install.Installer{Store: fs, DataDir: e.dataDir}
	_, err := inst.Install(t.Context(), install.Request{WasmPath: e.module(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", ""))})
	wantKind(t, err, errs.ErrInvalidInput, "installed meanwhile", "--upgrade")
	row := e.row(t, "echo")
	if got := readFile(t, row.WasmPath); !bytes.Equal(got, fixture(t, "echo.wasm")) {
		t.Errorf("the winner's module is gone or changed")
	}
}

// TestConcurrentInstalls: of several installs of one skill at once, one wins,
// the others are told to upgrade, and the winner's module is intact.
func TestConcurrentInstalls(t *testing.T) {
	e := newEnv(t)
	const n = 6
	srcs := make([]string, n)
	for i := range srcs {
		srcs[i] = e.module(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", ""))
	}
	errc := make(chan error, n)
	for _, src := range srcs {
		go func() {
			_, err := e.inst.Install(t.Context(), install.Request{WasmPath: src})
			errc <- err
		}()
	}
	wins := 0
	for range n {
		err := <-errc
		switch {
		case err == nil:
			wins++
		case errors.Is(err, errs.ErrInvalidInput):
		default:
			t.Errorf("install: %v", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d installs won, want 1", wins)
	}
	row := e.row(t, "echo")
	if got := readFile(t, row.WasmPath); sha(got) != row.SHA256 {
		t.Errorf("the installed module does not match its sha256")
	}
}
