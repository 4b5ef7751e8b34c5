//go:build linux

package seccomp

import (
	"errors"
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
	_, err := install(prog, 0)
	return err
}

// InstallThreadListener is [InstallThread] for a program with [Notify]
// rules: it returns the filter's notification descriptor (close-on-exec),
// from which the supervisor receives the stopped calls ([Recv]). It fails
// where the kernel has no user notification (before Linux 5.0) or an
// enclosing filter already has a listener (EBUSY: sbx inside another
// supervised sandbox).
func InstallThreadListener(prog []Instruction) (int, error) {
	fd, err := install(prog, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER)
	return int(fd), err
}

func install(prog []Instruction, flags uintptr) (uintptr, error) {
	if len(prog) == 0 || len(prog) > 4096 {
		return 0, fmt.Errorf("seccomp: bad program length %d", len(prog))
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("seccomp: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	fprog := unix.SockFprog{
		Len:    uint16(len(prog)),
		Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0])),
	}
	r, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return 0, fmt.Errorf("seccomp: seccomp(SET_MODE_FILTER): %w", errno)
	}
	return r, nil
}

// Notif is one stopped system call (struct seccomp_notif). Pid is the
// calling thread's id in the supervisor's pid namespace.
type Notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

// notifResp is struct seccomp_notif_resp.
type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// SECCOMP_IOCTL_NOTIF_ID_VALID, _IOW('!', 2, __u64).
const ioctlNotifIDValid = 0x40082102

// ErrNoTasks is Recv's error once no task uses the listener's filter any
// more: none can come (a filter passes only to the children of the tasks
// that carry it), so nothing will be received again.
var ErrNoTasks = errors.New("seccomp: no task uses the filter any more")

// Recv waits for the next stopped call on the listener fd. It fails with
// ENOENT when the call was withdrawn before it could be read (the caller
// was killed or took a signal): receive again then. It fails with
// ErrNoTasks once every task that carried the filter has exited: the
// kernel then answers every receive at once with ENOENT, and a loop that
// received again would spin.
func Recv(fd int, n *Notif) error {
	*n = Notif{}
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(n)))
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		case unix.ENOENT:
			if orphaned(fd) {
				return ErrNoTasks
			}
		}
		return errno
	}
}

// orphaned reports whether the listener is hung up: the kernel signals
// POLLHUP once the filter has no task left.
func orphaned(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n == 1 && fds[0].Revents&unix.POLLHUP != 0
	}
}

// Respond ends the stopped call id: it returns val, or fails with errno
// when errno is not 0. ENOENT means the call is gone (the caller died or
// took a signal, and will make the call again).
func Respond(fd int, id uint64, val int64, errno unix.Errno) error {
	r := notifResp{ID: id, Val: val, Error: -int32(errno)}
	if errno != 0 {
		r.Val = 0
	}
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&r)))
	if e != 0 {
		return e
	}
	return nil
}

// Valid reports whether the call id still waits: after the supervisor has
// opened the caller's pidfd and read its memory, this proves the pid was
// not reused by another process meanwhile.
func Valid(fd int, id uint64) bool {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), ioctlNotifIDValid, uintptr(unsafe.Pointer(&id)))
	return e == 0
}
