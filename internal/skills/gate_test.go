package skills_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// TestGateInFront: the approval flow's cases with the real built-ins, the policies
// computed from buddy.toml, and the approval gate in front of Call the way
// the agent loop and `buddy skill run` put it.
func TestGateInFront(t *testing.T) {
	docs, scratch := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(docs, "notes.txt"), "hello")
	rt := newRuntime(t)
	type step struct {
		conv, skill, input string
		approve            bool
		wantAsk            bool
		wantDenied         bool
	}
	read := `{"path":"notes.txt"}`
	write := `{"path":"out.txt","content":"x"}`
	tests := []struct {
		name     string
		approval string // write_file's approval line, "" = none
		steps    []step
	}{
		{"read_only runs without asking; write_file asks by default", "", []step{
			{"c1", "read_file", read, false, false, false},
			{"c1", "write_file", write, true, true, false},
			{"c1", "write_file", write, true, true, false},
		}},
		{"denied write_file", "", []step{
			{"c1", "write_file", write, false, true, true},
		}},
		{"trust never asks", `approval = "trust"`, []step{
			{"c1", "write_file", write, false, false, false},
			{"c2", "write_file", write, false, false, false},
		}},
		{"once asks once per conversation", `approval = "once"`, []step{
			{"c1", "write_file", write, true, true, false},
			{"c1", "write_file", write, false, false, false},
			{"c2", "write_file", write, true, true, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := parseConfig(t, fmt.Sprintf(`
[skills.read_file]
allowed_directories = [%s]

[skills.write_file]
allowed_directories = [%s]
%s
`, tomlString(docs), tomlString(scratch), tt.approval))
			reg := newRegistry(t, rt, cfg, nil)
			// One gate for the whole conversation; each step answers
			// through the asker's current answer.
			var asked []approval.Request
			answer := false
			gate := approval.New(reg, approval.Options{Asker: approval.AskerFunc(func(_ context.Context, r approval.Request) (bool, error) {
				asked = append(asked, r)
				return answer, nil
			})})
			for i, st := range tt.steps {
				os.Remove(filepath.Join(scratch, "out.txt"))
				asked, answer = nil, st.approve
				err := run(t, gate, st.conv, st.skill, st.input)
				if got := len(asked) > 0; got != st.wantAsk {
					t.Errorf("step %d (%s): asked = %v, want %v", i, st.skill, got, st.wantAsk)
				}
				if st.wantAsk && len(asked) > 0 {
					r := asked[0]
					if r.Skill != st.skill || r.Permission != "mutating" || string(r.Arguments) != st.input {
						t.Errorf("step %d: approval request %+v", i, r)
					}
				}
				_, statErr := os.Stat(filepath.Join(scratch, "out.txt"))
				switch {
				case st.wantDenied:
					if !errors.Is(err, errs.ErrDenied) || err.Error() != "User denied execution of write_file" {
						t.Errorf("step %d: err = %v, want the denial", i, err)
					}
					if statErr == nil {
						t.Errorf("step %d: denied, but the file was written", i)
					}
				case err != nil:
					t.Errorf("step %d: %v", i, err)
				case st.skill == "write_file" && statErr != nil:
					t.Errorf("step %d: approved, but no file: %v", i, statErr)
				}
			}
		})
	}
}

// run is the invocation path every front end uses: the gate, wrapping the
// registry.
func run(t *testing.T, gate *approval.Gate, conv, skill, input string) error {
	t.Helper()
	_, err := gate.Invoke(t.Context(), catalog.Call{Conversation: conv, Skill: skill, Arguments: json.RawMessage(input)})
	return err
}
