//go:build linux

package linux

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/sbx-sandbox/sbx/proxy/conns"
)

// startBridge listens on the sandbox's own loopback (127.0.0.1 and ::1) on
// the proxy ports and hands every connection's descriptor to the proxy
// (its hand-over socket, bound into the sandbox), so the proxy works on
// the command's own socket; where that fails, it relays the connection to
// the proxy's Unix socket. It runs in the init, before the seccomp
// filter exists (the command cannot create AF_UNIX sockets, the init can),
// and its listeners exist before the command starts: no readiness polling.
func startBridge(b *BridgeSpec) error {
	if b == nil {
		return nil
	}
	br := &bridge{socket: b.Socket, admit: conns.NewAdmission(maxRelays)}
	if b.Handoff != "" {
		// The proxy takes the command's sockets themselves; relaying stays
		// the way for a connection that cannot be handed over.
		if c, err := net.Dial("unixpacket", b.Handoff); err == nil {
			br.peer = c.(*net.UnixConn)
		}
	}
	for _, port := range []int{b.HTTPPort, b.SOCKSPort} {
		ln4, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		go br.serve(ln4)
		// IPv6 loopback is best effort: a kernel without IPv6 has none.
		if ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(port))); err == nil {
			go br.serve(ln6)
		} else if !errors.Is(err, syscall.EADDRNOTAVAIL) && !errors.Is(err, syscall.EAFNOSUPPORT) {
			return fmt.Errorf("bridge: %w", err)
		}
	}
	return nil
}

// maxRelays bounds the bridge's open relays (two sockets and, while data
// flows, a splice pipe each way in the init): twice the proxy's own default
// bound, so that past it the proxy, not the bridge, is the one that
// answers.
const maxRelays = 1024

// bridge passes the command's proxy connections on: handed over to the
// proxy (peer), or relayed to its socket.
type bridge struct {
	socket string
	peer   *net.UnixConn
	admit  *conns.Admission
}

func (br *bridge) serve(ln net.Listener) {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if !conns.Temporary(err) {
				return
			}
			// Out of descriptors for a moment: keep serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if br.peer != nil && conns.HandOff(br.peer, c.(*net.TCPConn)) == nil {
			c.Close() // the proxy has its own descriptor
			continue
		}
		if !br.admit.Admit(c) {
			continue
		}
		go func() {
			defer br.admit.Release()
			defer c.Close()
			up, err := net.Dial("unix", br.socket)
			if err != nil {
				return // the proxy is gone: no network
			}
			defer up.Close()
			done := make(chan struct{})
			go func() {
				io.Copy(up, c)
				up.(*net.UnixConn).CloseWrite()
				close(done)
			}()
			io.Copy(c, up)
			c.(*net.TCPConn).CloseWrite()
			<-done
		}()
	}
}
