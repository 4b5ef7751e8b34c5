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

	"github.com/sbx-sandbox/sbx/proxy"
)

// startBridge listens on the sandbox's own loopback (127.0.0.1 and ::1) on
// the proxy ports and relays every connection to the proxy's Unix socket,
// which is bound into the sandbox. It runs in the init, before the seccomp
// filter exists (the command cannot create AF_UNIX sockets, the init can),
// and its listeners exist before the command starts: no readiness polling.
func startBridge(b *BridgeSpec) error {
	if b == nil {
		return nil
	}
	admit := proxy.NewAdmission(maxRelays)
	for _, port := range []int{b.HTTPPort, b.SOCKSPort} {
		ln4, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		go serveBridge(ln4, b.Socket, admit)
		// IPv6 loopback is best effort: a kernel without IPv6 has none.
		if ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(port))); err == nil {
			go serveBridge(ln6, b.Socket, admit)
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

func serveBridge(ln net.Listener, socket string, admit *proxy.Admission) {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if !proxy.Temporary(err) {
				return
			}
			// Out of descriptors for a moment: keep serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if !admit.Admit(c) {
			continue
		}
		go func() {
			defer admit.Release()
			defer c.Close()
			up, err := net.Dial("unix", socket)
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
