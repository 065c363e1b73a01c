package skills_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

// mutManifest is a mutating skill's manifest at a version.
func mutManifest(version string) string {
	return fmt.Sprintf(`
[skill]
name = "mut"
version = %q
description = "A mutating test skill."
author = "tests"
permission = "mutating"
`, version)
}

// TestPreparedCallChangedWhileAsked: the gate asks about one prepared call
// and runs exactly it. If the skill, its module, its grants, limits or
// policy change while the question is open, the old answer does not run the
// new skill: it is asked again (with why), or refused when it is gone; a
// change that leaves the skill the same (the same module reinstalled, another
// skill's section edited) runs on the answer given.
func TestPreparedCallChangedWhileAsked(t *testing.T) {
	rt := newRuntime(t)
	const section = "[skills.mut]\napproval = \"always\"\n"
	tests := []struct {
		name string
		// change runs while the first question is open.
		change func(t *testing.T, st *store.Store, live *skills.Live, dir string)
		// second is the answer to a second question, if one comes.
		second     bool
		wantAsks   int
		wantReason string // in the second question
		wantOut    string // "" = the call fails
		wantErr    error
		wantNewSHA bool // the second question names the new module
	}{
		{"upgrade to another module, denied", upgrade("counter.wasm", "1.0.2"), false, 2, "module of mut changed", "", errs.ErrDenied, true},
		{"upgrade to another module, approved again", upgrade("counter.wasm", "1.0.2"), true, 2, "module of mut changed", "1", nil, true},
		{"the same module reinstalled", upgrade("echo.wasm", "1.0.1"), true, 1, "", `{"x":"in"}`, nil, false},
		{"removed", func(t *testing.T, st *store.Store, _ *skills.Live, _ string) {
			if err := st.DeleteSkill(t.Context(), "mut"); err != nil {
				t.Fatal(err)
			}
		}, true, 1, "", "", errs.ErrNotFound, false},
		{"policy changed by a reload", reload(rt, "[skills.mut]\napproval = \"once\"\n"), true, 2, "approval policy of mut changed", `{"x":"in"}`, nil, false},
		{"limits changed by a reload", reload(rt, section+"fuel = 12345\n"), false, 2, "grants or limits of mut changed", "", errs.ErrDenied, false},
		{"another skill's section changed by a reload", reload(rt, section+"[skills.other]\napproval = \"trust\"\n"), true, 1, "", `{"x":"in"}`, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, dir := newStore(t), t.TempDir()
			installRow(t, st, dir, "mut", "echo.wasm", mutManifest("1.0.1"))
			live := skills.NewLive(newRegistry(t, rt, parseConfig(t, section), st))
			var reqs []approval.Request
			gate := approval.New(live, approval.Options{Asker: approval.AskerFunc(func(_ context.Context, r approval.Request) (bool, error) {
				reqs = append(reqs, r)
				if len(reqs) == 1 {
					tt.change(t, st, live, dir)
					return true, nil
				}
				return tt.second, nil
			})})
			res, err := gate.Invoke(t.Context(), catalog.Call{Conversation: "c1", Skill: "mut", Arguments: json.RawMessage(`{"x":"in"}`)})
			if len(reqs) != tt.wantAsks {
				t.Fatalf("asked %d times, want %d: %+v (err %v)", len(reqs), tt.wantAsks, reqs, err)
			}
			if reqs[0].ModuleSHA256 == "" || reqs[0].Version != "1.0.1" {
				t.Errorf("the question does not name the module: sha256 %q version %q", reqs[0].ModuleSHA256, reqs[0].Version)
			}
			if tt.wantAsks > 1 {
				if !strings.Contains(reqs[1].Reason, tt.wantReason) {
					t.Errorf("second question's reason = %q, want %q", reqs[1].Reason, tt.wantReason)
				}
				if got := reqs[1].ModuleSHA256 != reqs[0].ModuleSHA256; got != tt.wantNewSHA {
					t.Errorf("second question names a new module = %v, want %v", got, tt.wantNewSHA)
				}
			}
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case string(res.Output) != tt.wantOut:
				t.Fatalf("output = %q, want %q (which module ran)", res.Output, tt.wantOut)
			case tt.wantNewSHA && res.SHA256 != reqs[len(reqs)-1].ModuleSHA256:
				t.Fatalf("ran %s, not the module approved last (%s)", res.SHA256, reqs[len(reqs)-1].ModuleSHA256)
			}
		})
	}
}

// upgrade replaces mut's module in the store, as `buddy skill install
// --upgrade --yes` does.
func upgrade(fixtureName, version string) func(t *testing.T, st *store.Store, _ *skills.Live, dir string) {
	return func(t *testing.T, st *store.Store, _ *skills.Live, dir string) {
		wasm := fixture(t, fixtureName)
		path := filepath.Join(dir, "mut-"+version+".wasm")
		writeFile(t, path, string(wasm))
		time.Sleep(time.Millisecond) // a later updated_at
		err := st.ReplaceSkill(t.Context(), store.InstalledSkill{
			Name: "mut", Version: version, Description: "test skill", WasmPath: path, SHA256: sha(wasm),
			Manifest: mutManifest(version), Status: store.StatusVerified,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// reload swaps the live registry for one with a new buddy.toml, as SIGHUP
// does.
func reload(rt *runtime.Runtime, toml string) func(t *testing.T, st *store.Store, live *skills.Live, _ string) {
	return func(t *testing.T, st *store.Store, live *skills.Live, _ string) {
		live.Swap(t.Context(), newRegistry(t, rt, parseConfig(t, toml), st))
	}
}

// countingStore counts the registry's lookups of installed skills (one
// fingerprint query per reconciliation with the store).
type countingStore struct {
	*store.Store
	lookups atomic.Int64
}

func (c *countingStore) SkillsFingerprint(ctx context.Context) (string, error) {
	c.lookups.Add(1)
	return c.Store.SkillsFingerprint(ctx)
}

// TestOneLookupOneValidation: a call on its way down is looked up once and
// its arguments validated once (the gate, the union and the registry share
// one prepared call); an asked call adds one check that the skill is still
// the one asked about, without validating again.
func TestOneLookupOneValidation(t *testing.T) {
	rt := newRuntime(t)
	docs := t.TempDir()
	writeFile(t, filepath.Join(docs, "a.txt"), "a")
	st := &countingStore{Store: newStore(t)}
	cfg := parseConfig(t, fmt.Sprintf("[skills.read_file]\nallowed_directories = [%s]\n\n[skills.write_file]\nallowed_directories = [%s]\n", tomlString(docs), tomlString(docs)))
	reg, err := skills.New(t.Context(), skills.Options{Runtime: rt, Config: cfg, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close(context.WithoutCancel(t.Context())) })
	gate := approval.New(catalog.NewUnion(skills.NewLive(reg), emptyCatalog{}), approval.Options{
		Asker: approval.AskerFunc(func(context.Context, approval.Request) (bool, error) { return true, nil }),
	})
	for _, tt := range []struct {
		skill, args string
		lookups     int64
	}{
		{"read_file", `{"path":"a.txt"}`, 1},
		{"write_file", `{"path":"b.txt","content":"b"}`, 2}, // asked: re-checked after the answer
	} {
		l0, v0 := st.lookups.Load(), skills.Validations()
		if _, err := gate.Invoke(t.Context(), catalog.Call{Conversation: "c", Skill: tt.skill, Arguments: json.RawMessage(tt.args)}); err != nil {
			t.Fatal(err)
		}
		if l, v := st.lookups.Load()-l0, skills.Validations()-v0; l != tt.lookups || v != 1 {
			t.Errorf("%s: %d lookups and %d validations, want %d and 1", tt.skill, l, v, tt.lookups)
		}
	}
}

// emptyCatalog is a SKILL.md catalog with no skills.
type emptyCatalog struct{}

func (emptyCatalog) List(context.Context) ([]catalog.Info, error) { return nil, nil }
func (emptyCatalog) Lookup(_ context.Context, n string) (catalog.Info, error) {
	return catalog.Info{}, errs.New(errs.ErrNotFound, n)
}
func (emptyCatalog) Prepare(_ context.Context, c catalog.Call) (catalog.Prepared, error) {
	return nil, errs.New(errs.ErrNotFound, c.Skill)
}
