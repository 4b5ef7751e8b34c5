//go:build linux

package conns

import (
	"net"

	"golang.org/x/sys/unix"
)

// HandOff passes c's descriptor to the proxy over peer (a SOCK_SEQPACKET
// connection to a HandoffListener). The caller still closes c: the proxy
// has its own copy.
func HandOff(peer *net.UnixConn, c *net.TCPConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := raw.Control(func(fd uintptr) {
		_, _, werr = peer.WriteMsgUnix([]byte{0}, unix.UnixRights(int(fd)), nil)
	}); err != nil {
		return err
	}
	return werr
}
