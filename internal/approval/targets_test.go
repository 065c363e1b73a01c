package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// resolvingCatalog is a fakeCatalog that also resolves targets: resolve is
// called with the number of resolutions so far.
type resolvingCatalog struct {
	*fakeCatalog
	mu      sync.Mutex
	n       int
	resolve func(n int, c catalog.Call) []catalog.Target
}

func (r *resolvingCatalog) Resolve(_ context.Context, c catalog.Call) ([]catalog.Target, error) {
	r.mu.Lock()
	r.n++
	n := r.n
	r.mu.Unlock()
	return r.resolve(n, c), nil
}

func (r *resolvingCatalog) Invoke(ctx context.Context, c catalog.Call) (*catalog.Result, error) {
	res, err := r.fakeCatalog.Invoke(ctx, c)
	if c.Skill == "read_file" {
		res.Usage.Paths = []string{"/home/u/Documents/tax.pdf"}
	}
	return res, err
}

func (r *resolvingCatalog) Prepare(ctx context.Context, c catalog.Call) (catalog.Prepared, error) {
	return catalog.PrepareChecked(ctx, r, c)
}

func newResolving(resolve func(int, catalog.Call) []catalog.Target) *resolvingCatalog {
	f := newFakeCatalog()
	f.skills["fetch_url"] = catalog.Info{Name: "fetch_url", Permission: catalog.Network, Policy: catalog.Trust, Status: "ready", NetworkAccess: true}
	f.skills["read_file"] = catalog.Info{Name: "read_file", Permission: catalog.ReadOnly, Policy: catalog.Trust, Status: "ready", PrivateData: true}
	f.skills["remember"] = catalog.Info{Name: "remember", Permission: catalog.Mutating, Policy: catalog.Once, Status: "ready"}
	return &resolvingCatalog{fakeCatalog: f, resolve: resolve}
}

// recordingAsker approves (or not) and keeps every request.
type recordingAsker struct {
	mu      sync.Mutex
	approve bool
	reqs    []approval.Request
}

func (a *recordingAsker) Ask(_ context.Context, req approval.Request) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs = append(a.reqs, req)
	return a.approve, nil
}

func urlTarget(addr string) []catalog.Target {
	return []catalog.Target{{Kind: catalog.TargetURL, URL: "https://x.example/", Scheme: "https", Host: "x.example", Port: 443,
		Addresses: []catalog.TargetAddress{{IP: addr, Allowed: true}}}}
}

func TestGateRefusedTargetIsNotAsked(t *testing.T) {
	cat := newResolving(func(int, catalog.Call) []catalog.Target {
		return []catalog.Target{{Kind: catalog.TargetFile, Path: "/etc/passwd", Action: "create", Refused: `write "/etc/passwd": outside the allowed directories`}}
	})
	asker := &recordingAsker{approve: true}
	g := approval.New(cat, approval.Options{Asker: asker})
	_, err := g.Invoke(t.Context(), catalog.Call{Conversation: "c", Skill: "write_file", Arguments: json.RawMessage(`{"path":"/etc/passwd"}`)})
	if !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("err = %v, want forbidden", err)
	}
	if len(asker.reqs) != 0 || cat.calls() != 0 {
		t.Fatalf("asked %d times, ran %d times; want neither", len(asker.reqs), cat.calls())
	}
}

func TestGateShowsTargets(t *testing.T) {
	want := []catalog.Target{{Kind: catalog.TargetFile, Path: "/sandbox/a.txt", Dir: "/sandbox", Action: "overwrite", Exists: true, Size: 3, Bytes: 5, Diff: "+1 -0 lines"}}
	cat := newResolving(func(int, catalog.Call) []catalog.Target { return want })
	asker := &recordingAsker{approve: true}
	g := approval.New(cat, approval.Options{Asker: asker})
	if _, err := g.Invoke(t.Context(), catalog.Call{Conversation: "c", Skill: "write_file", Arguments: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if len(asker.reqs) != 1 || !catalog.SameTargets(asker.reqs[0].Targets, want) {
		t.Fatalf("requests = %+v, want one with the targets", asker.reqs)
	}
	d := approval.Describe(asker.reqs[0], 0)
	if !strings.HasPrefix(d, "will touch:\n  overwrite /sandbox/a.txt (3 bytes now, 5 bytes after; +1 -0 lines)\n") {
		t.Fatalf("Describe does not start with the targets:\n%s", d)
	}
}

// TestGateReasksWhenTargetsChange: the file appeared (or DNS changed)
// between the answer and the call: the call is asked again with the new
// targets, and refused if they keep changing.
func TestGateReasksWhenTargetsChange(t *testing.T) {
	tests := []struct {
		name   string
		change int // resolutions after which the targets stop changing; 0 = never
		asks   int
		err    error
	}{
		{"stable", 1, 1, nil},
		{"changed once", 2, 2, nil},
		{"keeps changing", 0, 3, errs.ErrDenied},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cat := newResolving(func(n int, c catalog.Call) []catalog.Target {
				if tc.change != 0 && n > tc.change {
					n = tc.change
				}
				return urlTarget("93.184.215." + string(rune('0'+n)))
			})
			cat.skills["fetch_url"] = catalog.Info{Name: "fetch_url", Permission: catalog.Network, Policy: catalog.Always, Status: "ready", NetworkAccess: true}
			asker := &recordingAsker{approve: true}
			g := approval.New(cat, approval.Options{Asker: asker})
			_, err := g.Invoke(t.Context(), catalog.Call{Conversation: "c", Skill: "fetch_url", Arguments: json.RawMessage(`{}`)})
			if !errors.Is(err, tc.err) && !(err == nil && tc.err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if len(asker.reqs) != tc.asks {
				t.Fatalf("asked %d times, want %d", len(asker.reqs), tc.asks)
			}
			if tc.asks > 1 && !strings.Contains(asker.reqs[1].Reason, "changed since it was approved") {
				t.Errorf("second request's reason = %q", asker.reqs[1].Reason)
			}
			if ran := cat.calls(); (tc.err == nil) != (ran == 1) {
				t.Errorf("ran %d times", ran)
			}
		})
	}
}

// TestGateAsksAfterPrivateRead: a conversation that read a file asks before
// a network call even under trust and once, saying why; another
// conversation does not; after_private_read = "allow" does not.
func TestGateAsksAfterPrivateRead(t *testing.T) {
	for _, policy := range []catalog.Policy{catalog.Trust, catalog.Once} {
		t.Run(string(policy), func(t *testing.T) {
			cat := newResolving(func(_ int, c catalog.Call) []catalog.Target {
				if c.Skill == "fetch_url" {
					return urlTarget("93.184.215.14")
				}
				return nil
			})
			cat.skills["fetch_url"] = catalog.Info{Name: "fetch_url", Permission: catalog.Network, Policy: policy, Status: "ready", NetworkAccess: true}
			asker := &recordingAsker{approve: true}
			g := approval.New(cat, approval.Options{Asker: asker})
			fetch := catalog.Call{Conversation: "c1", Skill: "fetch_url", Arguments: json.RawMessage(`{"url":"https://x.example/"}`)}
			if _, err := g.Invoke(t.Context(), fetch); err != nil {
				t.Fatal(err)
			}
			before := len(asker.reqs) // once: 1, trust: 0
			if _, err := g.Invoke(t.Context(), catalog.Call{Conversation: "c1", Skill: "read_file", Arguments: json.RawMessage(`{"path":"tax.pdf"}`)}); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if _, err := g.Invoke(t.Context(), fetch); err != nil {
					t.Fatal(err)
				}
				if got := len(asker.reqs) - before; got != i+1 {
					t.Fatalf("fetch %d after the read: asked %d times, want %d", i+1, got, i+1)
				}
			}
			last := asker.reqs[len(asker.reqs)-1]
			want := "this conversation has read /home/u/Documents/tax.pdf; running fetch_url (https://x.example/) could send it out"
			if last.Reason != want {
				t.Fatalf("reason = %q\nwant     %q", last.Reason, want)
			}
			other := catalog.Call{Conversation: "c2", Skill: "fetch_url", Arguments: fetch.Arguments}
			n := len(asker.reqs)
			if policy == catalog.Trust {
				if _, err := g.Invoke(t.Context(), other); err != nil || len(asker.reqs) != n {
					t.Fatalf("another conversation was asked (%v)", err)
				}
			}
			g.EndConversation("c1")
			if policy == catalog.Trust {
				if _, err := g.Invoke(t.Context(), fetch); err != nil || len(asker.reqs) != n {
					t.Fatalf("an ended conversation kept its taint (%v)", err)
				}
			}

			allow := approval.New(cat, approval.Options{Asker: asker, Settings: func() approval.Settings { return approval.Settings{AllowAfterPrivateRead: true} }})
			_, _ = allow.Invoke(t.Context(), catalog.Call{Conversation: "c3", Skill: "read_file", Arguments: json.RawMessage(`{}`)})
			n = len(asker.reqs)
			if _, err := allow.Invoke(t.Context(), catalog.Call{Conversation: "c3", Skill: "fetch_url", Arguments: fetch.Arguments}); err != nil {
				t.Fatal(err)
			}
			if policy == catalog.Trust && len(asker.reqs) != n {
				t.Fatalf("after_private_read = allow still asked")
			}
		})
	}
}

// TestGateDeniedAfterPrivateRead: a denial of the re-asked fetch stops it.
func TestGateDeniedAfterPrivateRead(t *testing.T) {
	cat := newResolving(func(int, catalog.Call) []catalog.Target { return nil })
	asker := &recordingAsker{approve: false}
	g := approval.New(cat, approval.Options{Asker: asker})
	if _, err := g.Invoke(t.Context(), catalog.Call{Conversation: "c", Skill: "read_file", Arguments: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	_, err := g.Invoke(t.Context(), catalog.Call{Conversation: "c", Skill: "fetch_url", Arguments: json.RawMessage(`{}`)})
	if !errors.Is(err, errs.ErrDenied) || cat.calls() != 1 {
		t.Fatalf("err = %v, ran %d; want denied and only the read run", err, cat.calls())
	}
	if len(asker.reqs) != 1 || !strings.Contains(asker.reqs[0].Reason, "running fetch_url (fetch_url)") {
		t.Fatalf("requests = %+v", asker.reqs)
	}
}
