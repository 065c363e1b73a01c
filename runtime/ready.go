package runtime

import "sync"

// readyStack holds a module's prepared instances, newest first: a call takes
// the one prepared last, whose memory the pool handed back last (it is
// last-in, first-out too) and which was zeroed and restored last — under
// AfterUse by the CPU that makes the next call, so that it is still in that
// CPU's caches and TLB. The others wait as spares for calls that overlap.
type readyStack struct {
	mu    sync.Mutex
	insts []*instance
	max   int
}

func newReadyStack(n int) *readyStack { return &readyStack{max: max(n, 0)} }

// take pops the newest instance, or nil.
func (s *readyStack) take() *instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.insts)
	if n == 0 {
		return nil
	}
	p := s.insts[n-1]
	s.insts[n-1] = nil
	s.insts = s.insts[:n-1]
	return p
}

// put pushes p; false when the stack is full (p is then the caller's).
func (s *readyStack) put(p *instance) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.insts) >= s.max {
		return false
	}
	s.insts = append(s.insts, p)
	return true
}

// len is how many instances are ready; cap how many the module keeps.
func (s *readyStack) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.insts)
}

func (s *readyStack) cap() int { return s.max }
