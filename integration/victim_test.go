//go:build linux

package integration

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// victimCalls are the system calls a victim process tries inside the
// sandbox. Arguments are chosen so that without the filter the kernel
// would answer differently (or succeed), where that is possible.
var victimCalls = map[string]func() error{
	"socket_unix":       func() error { return closeFD(unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)) },
	"socket_unix_dgram": func() error { return closeFD(unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)) },
	// SOCK_RAW is SOCK_DGRAM for AF_UNIX.
	"socket_unix_raw": func() error { return closeFD(unix.Socket(unix.AF_UNIX, unix.SOCK_RAW, 0)) },
	"socket_unix_highbits": func() error {
		return rawFD(unix.Syscall(unix.SYS_SOCKET, 0x1_0000_0001, unix.SOCK_DGRAM, 0))
	},
	"socket_packet": func() error { return closeFD(unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)) },
	"socket_vsock":  func() error { return closeFD(unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)) },
	"socket_alg":    func() error { return closeFD(unix.Socket(unix.AF_ALG, unix.SOCK_SEQPACKET, 0)) },
	"socket_inet":   func() error { return closeFD(unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)) },
	"socket_netlink_netfilter": func() error {
		return closeFD(unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_NETFILTER))
	},
	"socket_netlink_route":    func() error { return closeFD(unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)) },
	"socket_netlink_sockdiag": func() error { return closeFD(unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG)) },
	"socket_netlink_highbits": func() error {
		return raw(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, 0x100000000|unix.NETLINK_NETFILTER)
	},
	"open_tree_attr": func() error { return raw(467, 0, 0, 0, 0, 0) },

	"socketpair_unix": func() error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	},
	"socketpair_unix_raw": func() error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_RAW, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	},
	"socketpair_unix_dgram": func() error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	},
	"io_uring_setup":    func() error { return raw(unix.SYS_IO_URING_SETUP, 1, 0) },
	"io_uring_enter":    func() error { return raw(unix.SYS_IO_URING_ENTER, 0, 0) },
	"io_uring_register": func() error { return raw(unix.SYS_IO_URING_REGISTER, 0, 0) },
	"ptrace":            func() error { return raw(unix.SYS_PTRACE, unix.PTRACE_TRACEME) },
	"process_vm_readv":  func() error { return raw(unix.SYS_PROCESS_VM_READV, uintptr(os.Getpid()), 0, 0, 0, 0, 0) },
	"process_vm_writev": func() error { return raw(unix.SYS_PROCESS_VM_WRITEV, uintptr(os.Getpid()), 0, 0, 0, 0, 0) },
	"pidfd_getfd":       func() error { return raw(unix.SYS_PIDFD_GETFD, 0, 0, 0) },
	"bpf":               func() error { return raw(unix.SYS_BPF, 0, 0, 0) },
	"perf_event_open":   func() error { return raw(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0) },
	"userfaultfd":       func() error { return raw(unix.SYS_USERFAULTFD, 0) },
	"keyctl":            func() error { return raw(unix.SYS_KEYCTL, 0, 0) },
	"add_key":           func() error { return raw(unix.SYS_ADD_KEY, 0, 0, 0, 0, 0) },
	"request_key":       func() error { return raw(unix.SYS_REQUEST_KEY, 0, 0, 0, 0) },
	"mount":             func() error { return unix.Mount("none", "/tmp", "tmpfs", 0, "") },
	"umount2":           func() error { return unix.Unmount("/tmp", 0) },
	"pivot_root":        func() error { return raw(unix.SYS_PIVOT_ROOT, 0, 0) },
	"move_mount":        func() error { return raw(unix.SYS_MOVE_MOUNT, 0, 0, 0, 0, 0) },
	"open_tree":         func() error { return raw(unix.SYS_OPEN_TREE, 0, 0, 0) },
	"fsopen":            func() error { return raw(unix.SYS_FSOPEN, 0, 0) },
	"fsconfig":          func() error { return raw(unix.SYS_FSCONFIG, 0, 0, 0, 0, 0) },
	"fsmount":           func() error { return raw(unix.SYS_FSMOUNT, 0, 0, 0) },
	"fspick":            func() error { return raw(unix.SYS_FSPICK, 0, 0, 0) },
	"mount_setattr":     func() error { return raw(unix.SYS_MOUNT_SETATTR, 0, 0, 0, 0, 0) },
	"unshare_user":      func() error { return unix.Unshare(unix.CLONE_NEWUSER) },
	"unshare_ns":        func() error { return unix.Unshare(unix.CLONE_NEWNS) },
	"unshare_net":       func() error { return unix.Unshare(unix.CLONE_NEWNET) },
	"clone_newuser":     func() error { return rawClone(unix.CLONE_NEWUSER | uintptr(syscall.SIGCHLD)) },
	"clone_newpid":      func() error { return rawClone(unix.CLONE_NEWPID | uintptr(syscall.SIGCHLD)) },
	"clone3":            func() error { return raw(unix.SYS_CLONE3, 0, 0) },
	"setns":             func() error { return raw(unix.SYS_SETNS, 0, 0) },
	"kexec_load":        func() error { return raw(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0) },
	"kexec_file_load":   func() error { return raw(unix.SYS_KEXEC_FILE_LOAD, 0, 0, 0, 0, 0) },
	"init_module":       func() error { return raw(unix.SYS_INIT_MODULE, 0, 0, 0) },
	"finit_module":      func() error { return raw(unix.SYS_FINIT_MODULE, 0, 0, 0) },
	"delete_module":     func() error { return raw(unix.SYS_DELETE_MODULE, 0, 0) },
	"ioctl_tiocsti": func() error {
		c := byte('x')
		return raw(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
	},
	"ioctl_tioclinux": func() error { return raw(unix.SYS_IOCTL, 0, unix.TIOCLINUX, 0) },
	// Set-user-ID and set-group-ID files, in the working directory (the
	// test checks the files from outside afterwards).
	"fchmodat_suid": func() error {
		os.WriteFile("v-fchmodat", nil, 0o755)
		return unix.Fchmodat(unix.AT_FDCWD, "v-fchmodat", 0o4755, 0)
	},
	"fchmodat_plain": func() error {
		os.WriteFile("v-plain", nil, 0o644)
		return unix.Fchmodat(unix.AT_FDCWD, "v-plain", 0o755, 0)
	},
	"fchmod_sgid": func() error {
		f, err := os.Create("v-fchmod")
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Fchmod(int(f.Fd()), 0o2755)
	},
	"fchmodat2_suid": func() error {
		os.WriteFile("v-fchmodat2", nil, 0o755)
		p, _ := unix.BytePtrFromString("v-fchmodat2")
		cwd := unix.AT_FDCWD
		return raw(452, uintptr(cwd), uintptr(unsafe.Pointer(p)), 0o4755, 0)
	},
	"openat_creat_suid":  func() error { return closeFD(unix.Open("v-open", unix.O_CREAT|unix.O_WRONLY, 0o4755)) },
	"openat_creat_plain": func() error { return closeFD(unix.Open("v-open-plain", unix.O_CREAT|unix.O_WRONLY, 0o755)) },
	"mknodat_suid":       func() error { return unix.Mknodat(unix.AT_FDCWD, "v-mknod", unix.S_IFREG|0o4755, 0) },
	"openat2":            func() error { return raw(unix.SYS_OPENAT2, 0, 0, 0, 0) },
}

func raw(nr uintptr, args ...uintptr) error {
	var a [6]uintptr
	copy(a[:], args)
	_, _, errno := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	if errno != 0 {
		return errno
	}
	return nil
}

func rawFD(fd, _ uintptr, errno syscall.Errno) error {
	if errno != 0 {
		return errno
	}
	unix.Close(int(fd))
	return nil
}

func closeFD(fd int, err error) error {
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// rawClone forks with the given flags; a child that is created exits at once.
func rawClone(flags uintptr) error {
	pid, _, errno := unix.RawSyscall6(unix.SYS_CLONE, flags, 0, 0, 0, 0, 0)
	if errno != 0 {
		return errno
	}
	if pid == 0 {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	var ws unix.WaitStatus
	unix.Wait4(int(pid), &ws, 0, nil)
	return nil
}

// victim performs the named system calls and prints "name errno" lines.
func victim(names []string) int {
	for _, n := range names {
		f, ok := victimCalls[n]
		if !ok {
			fmt.Printf("%s UNKNOWN\n", n)
			continue
		}
		err := f()
		var errno syscall.Errno
		switch {
		case err == nil:
			fmt.Printf("%s OK\n", n)
		case errors.As(err, &errno):
			fmt.Printf("%s %s\n", n, unix.ErrnoName(errno))
		default:
			fmt.Printf("%s %v\n", n, err)
		}
	}
	return 0
}
