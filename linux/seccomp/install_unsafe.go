//go:build linux

package seccomp

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// InstallThread sets no_new_privs and loads prog on the calling OS thread
// only (no TSYNC). Processes forked from this thread afterwards inherit the
// filter; other threads of the process are not filtered.
//
// Preconditions: the caller has locked its goroutine to the thread with
// runtime.LockOSThread and never unlocks it, so the Go runtime retires the
// filtered thread when the goroutine exits.
func InstallThread(prog []Instruction) error {
	if len(prog) == 0 || len(prog) > 4096 {
		return fmt.Errorf("seccomp: bad program length %d", len(prog))
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	fprog := unix.SockFprog{
		Len:    uint16(len(prog)),
		Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0])),
	}
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: seccomp(SET_MODE_FILTER): %w", errno)
	}
	return nil
}
