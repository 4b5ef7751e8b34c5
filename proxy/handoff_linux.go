//go:build linux

package proxy

import (
	"net"
	"os"
	"sync"
	"time"

	"github.com/sbx-sandbox/sbx/proxy/conns"
	"golang.org/x/sys/unix"
)

// HandoffListener is a [net.Listener] of connections whose descriptors
// arrive over a SOCK_SEQPACKET Unix socket, one per message (SCM_RIGHTS):
// the sandbox's init accepts the command's TCP connections on the
// sandbox's loopback and hands them over, so the proxy reads and writes
// the command's own socket, with no relay in between (a socket works
// across network namespaces). Only connected TCP stream sockets are taken;
// any other descriptor is closed.
type HandoffListener struct {
	*chanListener // Accept: the connections handed over
	ln            *net.UnixListener
	once          sync.Once
	mu            sync.Mutex
	peers         map[*net.UnixConn]bool
}

// ListenHandoff listens for handing-over peers at path.
func ListenHandoff(path string) (*HandoffListener, error) {
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	h := &HandoffListener{chanListener: newChanListener(), ln: ln, peers: map[*net.UnixConn]bool{}}
	go h.acceptPeers()
	return h, nil
}

func (h *HandoffListener) acceptPeers() {
	var backoff time.Duration
	for {
		p, err := h.ln.AcceptUnix()
		if err != nil {
			if !conns.Temporary(err) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		h.mu.Lock()
		select {
		case <-h.done:
			h.mu.Unlock()
			p.Close()
			return
		default:
		}
		h.peers[p] = true
		h.mu.Unlock()
		go h.receive(p)
	}
}

// receive takes the descriptors one peer hands over until it hangs up.
func (h *HandoffListener) receive(p *net.UnixConn) {
	defer func() {
		h.mu.Lock()
		delete(h.peers, p)
		h.mu.Unlock()
		p.Close()
	}()
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := p.ReadMsgUnix(b[:], oob)
		if err != nil || n == 0 && oobn == 0 {
			return
		}
		for _, fd := range rights(oob[:oobn]) {
			c := streamConn(fd)
			if c == nil {
				continue
			}
			if !h.deliver(c) {
				c.Close()
				return
			}
		}
	}
}

// rights are the descriptors of the SCM_RIGHTS messages in oob.
func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

// streamConn makes fd a connection if it is a connected TCP stream socket
// (IPv4 or IPv6, not a listener); it closes fd either way.
func streamConn(fd int) net.Conn {
	unix.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "handoff")
	defer f.Close()
	typ, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	dom, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	acc, err3 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if err1 != nil || err2 != nil || err3 != nil || typ != unix.SOCK_STREAM || acc != 0 || dom != unix.AF_INET && dom != unix.AF_INET6 {
		return nil
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil
	}
	return c
}

// Close stops listening and hangs up on every peer.
func (h *HandoffListener) Close() error {
	h.once.Do(func() {
		h.mu.Lock()
		h.chanListener.Close()
		for p := range h.peers {
			p.Close()
		}
		h.mu.Unlock()
		h.ln.Close()
	})
	return nil
}

// Addr is the listening socket's address.
func (h *HandoffListener) Addr() net.Addr { return h.ln.Addr() }
