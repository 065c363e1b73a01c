package skills_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/skills"
)

// fakeJobs records the schedule host function's requests.
type fakeJobs struct {
	mu   sync.Mutex
	reqs []string
}

func (f *fakeJobs) Schedule(_ context.Context, req []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, string(req))
	var r struct{ Action, At string }
	_ = json.Unmarshal(req, &r)
	if r.At == "yesterday" {
		return nil, errs.New(errs.ErrInvalidInput, `at "yesterday" is neither an RFC 3339 time nor +DURATION`)
	}
	return []byte(`{"job":{"id":"j_1","kind":"reminder"}}`), nil
}

// TestScheduleSkillAsks: the built-in schedule skill is mutating, so a
// call asks for approval (always, by default) before the scheduler sees
// it; denied, nothing is scheduled; its grant is the schedule host function
// and nothing else; the scheduler's errors keep their kind.
func TestScheduleSkillAsks(t *testing.T) {
	rt := newRuntime(t)
	cfg := parseConfig(t, "[skills.schedule]\n")
	jobs := &fakeJobs{}
	reg, err := skills.New(t.Context(), skills.Options{Runtime: rt, Config: cfg, Deps: hostfns.Deps{Jobs: jobs}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	sk, err := reg.Get("schedule")
	if err != nil {
		t.Fatal(err)
	}
	if sk.Manifest.Permission != "mutating" || sk.Approval != catalog.Always || !sk.Grants.Schedule ||
		len(sk.Grants.Read)+len(sk.Grants.Write)+len(sk.Grants.Domains) != 0 || sk.Grants.Namespace != "" {
		t.Fatalf("schedule: permission %s, policy %s, grants %+v", sk.Manifest.Permission, sk.Approval, sk.Grants)
	}
	var asked []approval.Request
	answer := false
	gate := approval.New(reg, approval.Options{Asker: approval.AskerFunc(func(_ context.Context, r approval.Request) (bool, error) {
		asked = append(asked, r)
		return answer, nil
	})})
	add := `{"action":"add","kind":"reminder","at":"+10m","text":"call the plumber"}`
	if err := run(t, gate, "c1", "schedule", add); !errors.Is(err, errs.ErrDenied) {
		t.Fatalf("denied call = %v", err)
	}
	if len(asked) != 1 || asked[0].Skill != "schedule" || asked[0].Permission != catalog.Mutating || len(jobs.reqs) != 0 {
		t.Fatalf("asked %+v, scheduler saw %q", asked, jobs.reqs)
	}
	answer = true
	res, err := gate.Invoke(t.Context(), catalog.Call{Conversation: "c1", Skill: "schedule", Arguments: json.RawMessage(add)})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 || len(jobs.reqs) != 1 || string(res.Output) != `{"job":{"id":"j_1","kind":"reminder"}}` {
		t.Fatalf("asked %d times, scheduler saw %q, output %s", len(asked), jobs.reqs, res.Output)
	}
	var sent map[string]any
	if err := json.Unmarshal([]byte(jobs.reqs[0]), &sent); err != nil || sent["action"] != "add" || sent["text"] != "call the plumber" || sent["at"] != "+10m" {
		t.Fatalf("request %q", jobs.reqs[0])
	}
	err = run(t, gate, "c1", "schedule", `{"action":"add","kind":"reminder","at":"yesterday","text":"x"}`)
	if !errors.Is(err, errs.ErrInvalidInput) {
		t.Fatalf("a bad time = %v, want invalid_input", err)
	}
}
