// Package conns holds what the proxy and the sandbox's network bridge both
// do with the connections they accept: bound how many are open at once
// (Admission), tell an accept error that passes (Temporary), and hand a
// connection's descriptor to the proxy (HandOff, Linux). It imports no
// more than the standard library, so that the small binary that runs in
// the sandbox's namespaces (cmd/sbx-inner) stays small.
package conns

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
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

// Temporary reports whether an accept error passes: out of descriptors,
// buffers or memory, or a connection aborted before it was accepted.
func Temporary(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// RefuseOverLimit answers a connection past MaxConns in its own protocol
// (SOCKS5: no acceptable method; HTTP: 503 naming the limit) and closes it.
func RefuseOverLimit(c net.Conn, limit int) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	var b [1]byte
	if n, _ := c.Read(b[:]); n == 1 && b[0] == 5 {
		c.Write([]byte{5, 0xff})
		return
	}
	msg := fmt.Sprintf("sbx proxy: more than %d connections at once from the sandbox; try again when some have closed\n", limit)
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(msg), msg)
}
