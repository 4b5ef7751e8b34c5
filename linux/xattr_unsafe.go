//go:build linux

package linux

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// listxattrAt lists into buf the extended attributes of the entry name
// of the directory open as dir, not following a link: listxattrat (Linux
// 6.13), which spares the merge a path through /proc per entry. An older
// kernel answers ENOSYS.
func listxattrAt(dir int, name string, buf []byte) (int, error) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return 0, err
	}
	var b unsafe.Pointer
	if len(buf) > 0 {
		b = unsafe.Pointer(&buf[0])
	}
	n, _, e := unix.Syscall6(unix.SYS_LISTXATTRAT, uintptr(dir), uintptr(unsafe.Pointer(p)), unix.AT_SYMLINK_NOFOLLOW, uintptr(b), uintptr(len(buf)), 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
