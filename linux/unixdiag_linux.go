//go:build linux

package linux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// The unix sock_diag protocol (linux/unix_diag.h).
const (
	sockDiagByFamily = 20      // SOCK_DIAG_BY_FAMILY
	udiagShowVFS     = 0x2     // UDIAG_SHOW_VFS
	unixDiagVFS      = 1       // UNIX_DIAG_VFS attribute
	tcpListen        = 10      // TCP_LISTEN, the state of a listening socket
	diagReqLen       = 16 + 24 // nlmsghdr + unix_diag_req
	diagMsgLen       = 16      // unix_diag_msg
)

// listenersInside returns the file identities of every listening Unix
// socket of the init's network namespace (the sandbox's), as the kernel
// records them at bind time. The netlink socket is kept for the next call;
// after an error it is opened again.
func (s *supervisor) listenersInside() (map[vfsID]bool, error) {
	if s.diag < 0 {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
		if err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		s.diag = fd
	}
	out, err := dumpListeners(s.diag)
	if err != nil {
		unix.Close(s.diag)
		s.diag = -1
	}
	return out, err
}

func dumpListeners(fd int) (map[vfsID]bool, error) {
	req := make([]byte, diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], diagReqLen)
	ne.PutUint16(req[4:], sockDiagByFamily)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	req[16] = unix.AF_UNIX
	ne.PutUint32(req[20:], 1<<tcpListen) // udiag_states
	ne.PutUint32(req[28:], udiagShowVFS) // udiag_show
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	out := map[vfsID]bool{}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				return nil, errors.New("sock_diag: the kernel refused the dump")
			}
			if id, ok := parseDiagVFS(m.Data); ok {
				out[id] = true
			}
		}
	}
}

// parseDiagVFS reads the UNIX_DIAG_VFS attribute of one unix_diag_msg.
func parseDiagVFS(msg []byte) (vfsID, bool) {
	if len(msg) < diagMsgLen {
		return vfsID{}, false
	}
	ne := binary.NativeEndian
	attrs := msg[diagMsgLen:]
	for len(attrs) >= 4 {
		l, t := int(ne.Uint16(attrs[0:])), ne.Uint16(attrs[2:])
		if l < 4 || l > len(attrs) {
			break
		}
		if t == unixDiagVFS && l >= 12 {
			// The device is the kernel's dev_t: major << 20 | minor.
			kdev := ne.Uint32(attrs[8:])
			return vfsID{ino: uint64(ne.Uint32(attrs[4:])), dev: unix.Mkdev(kdev>>20, kdev&0xfffff)}, true
		}
		attrs = attrs[min((l+3)&^3, len(attrs)):]
	}
	return vfsID{}, false
}
