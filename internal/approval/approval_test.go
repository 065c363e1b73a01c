package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// asker is a fake Asker built from a function field; it records every question.
type asker struct {
	mu    sync.Mutex
	asked []approval.Request
	fn    func(ctx context.Context, req approval.Request) (bool, error)
}

func (a *asker) Ask(ctx context.Context, req approval.Request) (bool, error) {
	a.mu.Lock()
	a.asked = append(a.asked, req)
	a.mu.Unlock()
	if a.fn == nil {
		return true, nil
	}
	return a.fn(ctx, req)
}

func (a *asker) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.asked)
}

func approveAll() *asker { return &asker{} }

func denyAll() *asker {
	return &asker{fn: func(context.Context, approval.Request) (bool, error) { return false, nil }}
}

func req(conv, skill, policy string) approval.Request {
	return approval.Request{
		Conversation: conv, Skill: skill, Permission: "mutating", Policy: catalog.Policy(policy),
		Arguments: json.RawMessage(`{"path":"notes.txt","content":"hi"}`),
	}
}

func TestPolicies(t *testing.T) {
	type call struct {
		conv, skill string
		wantAsked   int // the asker's total count after this call
	}
	tests := []struct {
		name   string
		policy string
		calls  []call
	}{
		{"trust never asks", "trust", []call{
			{"c1", "write_file", 0}, {"c1", "write_file", 0}, {"c2", "fetch_url", 0},
		}},
		{"always asks every time", "always", []call{
			{"c1", "write_file", 1}, {"c1", "write_file", 2}, {"c1", "write_file", 3}, {"c2", "write_file", 4},
		}},
		{"once asks the first time per conversation and skill", "once", []call{
			{"c1", "write_file", 1},
			{"c1", "write_file", 1}, // same conversation, same skill: not again
			{"c1", "write_file", 1},
			{"c2", "write_file", 2}, // another conversation asks again
			{"c2", "write_file", 2},
			{"c1", "fetch_url", 3}, // another skill asks again
			{"c1", "fetch_url", 3},
			{"", "write_file", 4}, // the CLI's one-shot conversation is a conversation too
			{"c1", "write_file", 4},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := approveAll()
			g := approval.NewGate(a)
			for i, c := range tt.calls {
				if err := g.Approve(t.Context(), req(c.conv, c.skill, tt.policy)); err != nil {
					t.Fatalf("call %d (%s, %s): %v", i, c.conv, c.skill, err)
				}
				if got := a.count(); got != c.wantAsked {
					t.Fatalf("call %d (%s, %s): asked %d times in all, want %d", i, c.conv, c.skill, got, c.wantAsked)
				}
			}
		})
	}
}

func TestAskerSeesTheRequest(t *testing.T) {
	a := approveAll()
	g := approval.NewGate(a)
	r := req("conv-7", "write_file", "always")
	if err := g.Approve(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	got := a.asked[0]
	if got.Conversation != r.Conversation || got.Skill != r.Skill || got.Permission != r.Permission ||
		got.Policy != r.Policy || string(got.Arguments) != string(r.Arguments) {
		t.Errorf("asker got %+v, want %+v", got, r)
	}
}

func TestDenial(t *testing.T) {
	for _, policy := range []string{"always", "once"} {
		t.Run(policy, func(t *testing.T) {
			a := denyAll()
			g := approval.NewGate(a)
			err := g.Approve(t.Context(), req("c1", "write_file", policy))
			if !errors.Is(err, errs.ErrDenied) {
				t.Fatalf("err = %v, want denied", err)
			}
			if got, want := err.Error(), "User denied execution of write_file"; got != want {
				t.Errorf("message = %q, want %q", got, want)
			}
			if k := errs.KindOf(err); k != errs.KindDenied {
				t.Errorf("kind = %s, want denied", k)
			}
			// A denial under "once" is not remembered as an approval.
			_ = g.Approve(t.Context(), req("c1", "write_file", policy))
			if a.count() != 2 {
				t.Errorf("asked %d times after two denied calls, want 2", a.count())
			}
		})
	}
}

func TestOnceApprovalAfterDenial(t *testing.T) {
	answers := []bool{false, true}
	a := &asker{}
	a.fn = func(context.Context, approval.Request) (bool, error) {
		ok := answers[0]
		answers = answers[1:]
		return ok, nil
	}
	g := approval.NewGate(a)
	r := req("c1", "write_file", "once")
	if err := g.Approve(t.Context(), r); !errors.Is(err, errs.ErrDenied) {
		t.Fatalf("first call: %v, want denied", err)
	}
	if err := g.Approve(t.Context(), r); err != nil {
		t.Fatalf("second call: %v, want approved", err)
	}
	if err := g.Approve(t.Context(), r); err != nil {
		t.Fatalf("third call: %v", err)
	}
	if a.count() != 2 {
		t.Errorf("asked %d times, want 2 (denied, then approved once for the conversation)", a.count())
	}
}

func TestAskerErrorIsADenialKeepingItsCause(t *testing.T) {
	errNoAnswer := errors.New("no answer within 60s")
	tests := []struct {
		name  string
		cause error
	}{
		{"timeout of the approval", errNoAnswer},
		{"approval deadline of the context", context.DeadlineExceeded},
		{"no one to ask", fmt.Errorf("no client connected: %w", errNoAnswer)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &asker{fn: func(context.Context, approval.Request) (bool, error) { return false, tt.cause }}
			for _, policy := range []string{"always", "once"} {
				err := approval.NewGate(a).Approve(t.Context(), req("c1", "write_file", policy))
				if !errors.Is(err, errs.ErrDenied) {
					t.Fatalf("%s: err = %v, want denied", policy, err)
				}
				if !errors.Is(err, tt.cause) {
					t.Errorf("%s: err = %v does not keep its cause %v", policy, err, tt.cause)
				}
				if got, want := err.Error(), "User denied execution of write_file: "+tt.cause.Error(); got != want {
					t.Errorf("%s: message = %q, want %q", policy, got, want)
				}
			}
		})
	}
}

func TestApprovalTimeoutIsADenial(t *testing.T) {
	// An asker that waits for an answer that never comes, under the
	// approval timeout's deadline.
	a := &asker{fn: func(ctx context.Context, _ approval.Request) (bool, error) {
		<-ctx.Done()
		return false, ctx.Err()
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	err := approval.NewGate(a).Approve(ctx, req("c1", "fetch_url", "always"))
	if !errors.Is(err, errs.ErrDenied) || errs.KindOf(err) != errs.KindDenied {
		t.Fatalf("err = %v (kind %s), want denied", err, errs.KindOf(err))
	}
}

func TestNoAskerIsADenial(t *testing.T) {
	g := approval.NewGate(nil)
	err := g.Approve(t.Context(), req("c1", "write_file", "always"))
	if !errors.Is(err, errs.ErrDenied) {
		t.Fatalf("err = %v, want denied", err)
	}
	if err := g.Approve(t.Context(), req("c1", "read_file", "trust")); err != nil {
		t.Fatalf("trust with no asker: %v", err)
	}
}

func TestCanceled(t *testing.T) {
	tests := []struct {
		name string
		fn   func(ctx context.Context, cancel context.CancelFunc) (bool, error)
	}{
		{"asker returns ctx.Err()", func(ctx context.Context, cancel context.CancelFunc) (bool, error) {
			cancel()
			<-ctx.Done()
			return false, ctx.Err()
		}},
		{"asker wraps ctx.Err()", func(ctx context.Context, cancel context.CancelFunc) (bool, error) {
			cancel()
			return false, fmt.Errorf("waiting for the user: %w", ctx.Err())
		}},
		{"asker has its own error", func(ctx context.Context, cancel context.CancelFunc) (bool, error) {
			cancel()
			return false, errors.New("websocket closed")
		}},
		{"asker answers no", func(ctx context.Context, cancel context.CancelFunc) (bool, error) {
			cancel()
			return false, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, policy := range []string{"always", "once"} {
				ctx, cancel := context.WithCancel(t.Context())
				a := &asker{fn: func(ctx context.Context, _ approval.Request) (bool, error) { return tt.fn(ctx, cancel) }}
				err := approval.NewGate(a).Approve(ctx, req("c1", "write_file", policy))
				cancel()
				if !errors.Is(err, errs.ErrCanceled) {
					t.Fatalf("%s: err = %v, want canceled", policy, err)
				}
				if errors.Is(err, errs.ErrDenied) {
					t.Errorf("%s: err = %v is also a denial", policy, err)
				}
			}
		})
	}
}

func TestUnknownPolicy(t *testing.T) {
	for _, policy := range []string{"", "sometimes", "Always"} {
		a := approveAll()
		err := approval.NewGate(a).Approve(t.Context(), req("c1", "write_file", policy))
		if !errors.Is(err, errs.ErrInternal) {
			t.Errorf("policy %q: err = %v, want internal", policy, err)
		}
		if a.count() != 0 {
			t.Errorf("policy %q: the asker was asked", policy)
		}
	}
}

// TestOnceConcurrentCallsAskOnce: parallel tool calls of one skill in one
// conversation under "once" wait for the first question instead of asking
// the user again.
func TestOnceConcurrentCallsAskOnce(t *testing.T) {
	release := make(chan struct{})
	a := &asker{fn: func(ctx context.Context, _ approval.Request) (bool, error) {
		<-release
		return true, nil
	}}
	g := approval.NewGate(a)
	const n = 8
	errc := make(chan error, n)
	for range n {
		go func() { errc <- g.Approve(t.Context(), req("c1", "write_file", "once")) }()
	}
	// Let the callers pile up behind the first question, then answer it.
	deadline := time.Now().Add(5 * time.Second)
	for a.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	for range n {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if a.count() != 1 {
		t.Errorf("asked %d times, want 1", a.count())
	}
}

// TestOnceWaiterCanceled: a call waiting behind another's question stops when
// its own context is canceled.
func TestOnceWaiterCanceled(t *testing.T) {
	release := make(chan struct{})
	a := &asker{fn: func(ctx context.Context, _ approval.Request) (bool, error) {
		select {
		case <-release:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}}
	g := approval.NewGate(a)
	first := make(chan error, 1)
	go func() { first <- g.Approve(t.Context(), req("c1", "write_file", "once")) }()
	for a.count() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(t.Context())
	second := make(chan error, 1)
	go func() { second <- g.Approve(ctx, req("c1", "write_file", "once")) }()
	cancel()
	if err := <-second; !errors.Is(err, errs.ErrCanceled) {
		t.Errorf("waiting call: %v, want canceled", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("first call: %v", err)
	}
}

// TestConcurrentChecks runs many checks at once under -race: "once" asks at
// most once per (conversation, skill), "always" every time, "trust" never.
func TestConcurrentChecks(t *testing.T) {
	var asked atomic.Int64
	perKey := sync.Map{}
	a := approval.AskerFunc(func(ctx context.Context, r approval.Request) (bool, error) {
		asked.Add(1)
		if r.Policy == "once" {
			n, _ := perKey.LoadOrStore(r.Conversation+"/"+r.Skill, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
		return true, nil
	})
	g := approval.NewGate(a)
	convs := []string{"a", "b", "c", "d"}
	skills := []string{"write_file", "fetch_url", "remember"}
	var wg sync.WaitGroup
	const rounds = 20
	var always atomic.Int64
	for i := range rounds {
		for _, c := range convs {
			for _, s := range skills {
				policy := []string{"once", "always", "trust"}[i%3]
				if policy == "always" {
					always.Add(1)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := g.Approve(t.Context(), req(c, s, policy)); err != nil {
						t.Error(err)
					}
				}()
			}
		}
	}
	wg.Wait()
	perKey.Range(func(k, v any) bool {
		if n := v.(*atomic.Int64).Load(); n != 1 {
			t.Errorf("%v asked %d times under once, want 1", k, n)
		}
		return true
	})
	onceKeys := int64(len(convs) * len(skills))
	if got, want := asked.Load(), always.Load()+onceKeys; got != want {
		t.Errorf("asked %d times, want %d (every always call plus one per once key)", got, want)
	}
}
