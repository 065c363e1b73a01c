package server_test

import (
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/store"
)

// expectCounter is the real store, counting the finishing writes the server
// announces (ExpectFinishing) and has not yet said are done.
type expectCounter struct {
	*store.Store
	mu          sync.Mutex
	outstanding int
	announced   int
}

func (e *expectCounter) ExpectFinishing() func() {
	done := e.Store.ExpectFinishing()
	e.mu.Lock()
	e.outstanding++
	e.announced++
	e.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Lock()
			e.outstanding--
			e.mu.Unlock()
		})
		done()
	}
}

func (e *expectCounter) counts() (outstanding, announced int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.outstanding, e.announced
}

// TestQuestionAnnouncesItsDecision: a question asked announces its decision
// to the store while it is open, and every way it ends (approved, denied,
// expired, canceled) says it is done, so the store's transactions are never
// kept short for a question nobody will answer.
func TestQuestionAnnouncesItsDecision(t *testing.T) {
	tests := []struct {
		name string
		end  func(c *client, conv, approvalID string)
	}{
		{"approved", func(c *client, conv, id string) {
			c.send(map[string]any{"type": "approve", "approval_id": id, "approved": true})
		}},
		{"denied", func(c *client, conv, id string) {
			c.send(map[string]any{"type": "approve", "approval_id": id, "approved": false})
		}},
		{"expired", func(c *client, conv, id string) {}},
		{"canceled", func(c *client, conv, id string) {
			c.send(map[string]any{"type": "cancel", "conversation_id": conv})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var counter *expectCounter
			s := newStack(t, stackOpts{writeApproval: "always", timeout: time.Second, server: func(o *server.Options) {
				counter = &expectCounter{Store: o.Store.(*store.Store)}
				o.Store = counter
			}})
			c := s.dial(t)
			conv, _ := c.invokeNew("write_file", `{"path":"a.txt","content":"hi"}`)
			req := c.expect("approval_request")
			if out, n := counter.counts(); out != 1 || n != 1 {
				t.Fatalf("while the question is open: %d announced decisions outstanding (%d in all), want 1", out, n)
			}
			tt.end(c, conv, req.str("id"))
			c.expect("approval_resolved")
			c.expect("tool_result")
			deadline := time.Now().Add(frameWait)
			for {
				out, _ := counter.counts()
				if out == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %d announced decisions still outstanding", tt.name, out)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}
