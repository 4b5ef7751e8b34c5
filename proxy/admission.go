package proxy

import (
	"net"
)

// maxRefusing bounds the connections past the limit being answered at
// once. When that many answers are under way, Admit waits for one to end
// (each takes at most two seconds): the flood waits in the kernel's
// backlog, and the process holds a bounded number of descriptors and
// goroutines.
const maxRefusing = 64

// Admission bounds concurrent connections. A connection past the bound
// gets an answer naming it (RefuseOverLimit), at most maxRefusing at a
// time.
type Admission struct {
	slots    chan struct{}
	refusing chan struct{}
}

// NewAdmission admits at most n connections at once.
func NewAdmission(n int) *Admission {
	return &Admission{slots: make(chan struct{}, n), refusing: make(chan struct{}, maxRefusing)}
}

// Admit takes a slot for c and reports true (the caller calls Release when
// c is done), or answers c in its own goroutine and reports false.
func (a *Admission) Admit(c net.Conn) bool {
	select {
	case a.slots <- struct{}{}:
		return true
	default:
	}
	a.refusing <- struct{}{}
	go func() {
		defer func() { <-a.refusing }()
		RefuseOverLimit(c, cap(a.slots))
	}()
	return false
}

// Release gives back a slot taken by Admit.
func (a *Admission) Release() { <-a.slots }
