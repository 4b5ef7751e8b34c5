//go:build linux

package linux

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawConnect connects fd to the address bytes exactly as given (any
// family, any length), returning the call's errno (0 for success).
func rawConnect(fd int, addr []byte) unix.Errno {
	var p unsafe.Pointer
	if len(addr) > 0 {
		p = unsafe.Pointer(&addr[0])
	}
	_, _, errno := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(p), uintptr(len(addr)))
	return errno
}
