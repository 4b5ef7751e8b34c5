//go:build linux

package linux

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/internal/printable"
	"github.com/sbx-sandbox/sbx/linux/seccomp"
)

// The supervisor performs every connect(2) the command makes (the
// Supervised seccomp program stops each one, SECCOMP_RET_USER_NOTIF). It
// runs in the init, which shares the command's mount and network
// namespaces but not its filter:
//
//   - it copies the address from the caller's memory once, takes a
//     duplicate of the caller's socket (pidfd_getfd), checks that the call
//     is still the one it read (so the pid was not reused), and connects
//     the duplicate itself with its own copy of the address. Nothing the
//     caller changes afterwards (the address, the descriptor table) counts.
//   - a socket of another network namespace (one handed in as stdio) is
//     refused; any other socket that is not AF_UNIX is connected as asked:
//     the sandbox's network namespace has only loopback, reached directly
//     or through the proxy bridge.
//   - an AF_UNIX address: abstract names live in the sandbox's own network
//     namespace and are connected as asked. A path is resolved as the
//     caller would (from the root or the caller's working directory, with
//     /proc/self meaning the caller) to an O_PATH descriptor of the socket
//     file, which pins the inode; the connect then goes to that inode
//     (/proc/self/fd/N) and nowhere else. It is allowed when a socket of
//     the sandbox's network namespace listens on that very inode (the
//     kernel's unix sock_diag lists only the namespace's own sockets) on a
//     file system of the sandbox's own, or when the inode is one of the
//     host sockets the settings allow (as recorded before the command
//     started), or when every Unix socket is allowed. Everything else is
//     refused with EPERM: no connection reaches a host socket.
//
// The peer of a connection made by the supervisor sees the init's pid in
// SO_PEERCRED (the uid and gid are the command's).
type supervisor struct {
	listener int
	// allowed are the host sockets the command may connect to
	// (sandbox.network.allowUnixSockets), by the identity their paths had
	// before the command started: a path the command can rename around
	// later names nothing.
	allowed map[fileID]bool
	// all allows every Unix socket (sandbox.network.allowAllUnixSockets).
	all bool
	// direct are the mount ids of the writable folders bound straight
	// from the host (the toolchain caches), recorded before the command
	// starts: a socket the command binds there shares their superblock,
	// and on btrfs or XFS its inode numbers, with host files, so no match
	// there proves a socket is the sandbox's. Their superblocks are
	// looked up in mounts when a decision needs them (reading the mount
	// table costs ~1 ms, which most runs never need); the command cannot
	// unmount them, so the ids stay theirs.
	direct []uint64
	// netns is the cookie of the sandbox's network namespace: a socket
	// of another namespace (one handed in as stdio) is never connected.
	netns uint64

	// mounts maps mount ids to superblock devices; diag is a netlink
	// sock_diag socket kept open. Both are used by the receiving
	// goroutine only.
	mounts map[uint64]uint64
	diag   int

	// inFlight counts the connects being performed.
	inFlight atomic.Int32

	mu      sync.Mutex
	refused map[string]bool
}

// fileID is a file's identity as stat reports it.
type fileID struct{ dev, ino uint64 }

// maxInFlight bounds the connects the supervisor performs at once (each
// holds a thread and two descriptors of the init, outside the command's
// cgroup); past it a connect fails with EAGAIN.
const maxInFlight = 256

// newSupervisor records, before the command starts, what the decisions
// compare against: the allowed sockets' identities, the superblocks of
// the direct binds, the sandbox's network namespace.
func newSupervisor(listener int, spec *InitSpec) (*supervisor, error) {
	s := &supervisor{listener: listener, diag: -1, all: spec.AllUnixSockets, allowed: map[fileID]bool{}}
	for _, p := range spec.UnixSockets {
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
			s.allowed[fileID{st.Dev, st.Ino}] = true
		}
	}
	for _, p := range spec.Direct {
		var sx unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &sx); err != nil {
			continue // absent: nothing can be bound there
		}
		if sx.Mask&unix.STATX_MNT_ID == 0 {
			return nil, errors.New("the kernel reports no mount id")
		}
		s.direct = append(s.direct, sx.Mnt_id)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	defer unix.Close(fd)
	if s.netns, err = unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE); err != nil {
		return nil, fmt.Errorf("network namespace cookie (Linux 5.14): %w", err)
	}
	return s, nil
}

// maxRefusedNotices bounds the lines the supervisor writes about refused
// sockets, so a tool probing many paths cannot flood the output.
const maxRefusedNotices = 8

// serve receives the calls until the listener fails or no task carries
// the filter any more, decides each, and hands the connects it allows to
// goroutines, so that no caller waits on another caller's connect.
func (s *supervisor) serve() {
	var n seccomp.Notif
	for {
		if err := seccomp.Recv(s.listener, &n); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			if errors.Is(err, seccomp.ErrNoTasks) {
				return // the command and all it started have exited
			}
			fmt.Fprintf(os.Stderr, "sbx init: connect supervisor: %v (connect calls now fail)\n", err)
			return
		}
		p, errno := s.prepare(n)
		if p == nil {
			// ENOENT: the caller is gone, or took a signal and makes
			// the call again; nothing to answer.
			_ = seccomp.Respond(s.listener, n.ID, 0, errno)
			continue
		}
		if s.inFlight.Add(1) > maxInFlight {
			s.inFlight.Add(-1)
			p.close()
			_ = seccomp.Respond(s.listener, n.ID, 0, unix.EAGAIN)
			continue
		}
		// The connect itself runs on a goroutine of its own: the caller
		// controls its socket's blocking mode and timeouts, so any
		// connect may block, and none may hold the receiver.
		go func(id uint64) {
			_ = seccomp.Respond(s.listener, id, 0, p.run())
			s.inFlight.Add(-1)
		}(n.ID)
	}
}

// pending is a connect the supervisor has decided to perform: sock, a
// duplicate of the caller's socket, to addr, the supervisor's own copy of
// the address (or the path of target, the O_PATH descriptor of the socket
// file the caller named).
type pending struct {
	sock, target int
	addr         []byte
}

// run performs the connect, releases the descriptors and returns the
// connect's errno (0 for success).
func (p *pending) run() unix.Errno {
	errno := rawConnect(p.sock, p.addr)
	p.close()
	return errno
}

func (p *pending) close() {
	unix.Close(p.sock)
	if p.target >= 0 {
		unix.Close(p.target)
	}
}

// prepare reads the stopped connect(fd, addr, addrlen) and decides it:
// the connect to perform, or the errno to answer.
func (s *supervisor) prepare(n seccomp.Notif) (*pending, unix.Errno) {
	fd, addrPtr, addrLen := int(int32(n.Args[0])), uintptr(n.Args[1]), int32(n.Args[2])
	if addrLen < 0 || addrLen > unix.SizeofSockaddrAny+16 { // sockaddr_storage: 128
		return nil, unix.EINVAL
	}
	pidfd, err := openPidfd(int(n.Pid))
	if err != nil {
		return nil, unix.EPERM
	}
	defer unix.Close(pidfd)
	addr := make([]byte, addrLen)
	if addrLen > 0 {
		got, err := unix.ProcessVMReadv(int(n.Pid), []unix.Iovec{{Base: &addr[0], Len: uint64(addrLen)}},
			[]unix.RemoteIovec{{Base: addrPtr, Len: int(addrLen)}}, 0)
		if err != nil || got != int(addrLen) {
			return nil, unix.EFAULT
		}
	}
	sock, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		if errors.Is(err, unix.EBADF) {
			return nil, unix.EBADF
		}
		return nil, unix.EPERM
	}
	p := &pending{sock: sock, target: -1, addr: addr}
	// The pidfd and the memory read belong to the caller only if its call
	// still waits: a pid reused meanwhile fails here.
	if !seccomp.Valid(s.listener, n.ID) {
		p.close()
		return nil, unix.EPERM
	}
	domain, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		p.close()
		return nil, errnoOf(err, unix.ENOTSOCK)
	}
	if !s.ownNamespace(sock) {
		// A socket of the host's namespace (handed in as stdio): its
		// abstract names and addresses are the host's.
		p.close()
		return nil, unix.EPERM
	}
	if domain != unix.AF_UNIX || len(addr) <= 2 || binary.NativeEndian.Uint16(addr) != unix.AF_UNIX || addr[2] == 0 {
		// Another family (the kernel checks the address against the
		// socket), an unnamed address, or an abstract name (in the
		// sandbox's own network namespace): performed as asked.
		return p, 0
	}
	if len(addr) > sizeofSockaddrUnix {
		p.close()
		return nil, unix.EINVAL
	}
	if errno := s.decidePath(int(n.Pid), p, addr[2:]); errno != 0 {
		p.close()
		return nil, errno
	}
	return p, 0
}

// sizeofSockaddrUnix is sizeof(struct sockaddr_un): the kernel refuses a
// longer address.
const sizeofSockaddrUnix = 110

// decidePath resolves the Unix socket path (sun_path, up to its first
// NUL) for the caller pid and, if the socket may be connected, points p at
// the inode it found.
func (s *supervisor) decidePath(pid int, p *pending, path []byte) unix.Errno {
	if i := bytes.IndexByte(path, 0); i >= 0 {
		path = path[:i]
	}
	target, err := resolveForCaller(pid, string(path))
	if err != nil {
		return errnoOf(err, unix.ENOENT)
	}
	p.target = target
	var st unix.Stat_t
	if err := unix.Fstat(target, &st); err != nil {
		return errnoOf(err, unix.EPERM)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return unix.ECONNREFUSED
	}
	if ok, why := s.allow(target, &st); !ok {
		s.notice(string(path), why)
		return unix.EPERM
	}
	// The path of the pinned inode: the connect reaches it and no other.
	via := make([]byte, 2, 2+32)
	binary.NativeEndian.PutUint16(via, unix.AF_UNIX)
	p.addr = append(via, "/proc/self/fd/"+strconv.Itoa(target)+"\x00"...)
	return 0
}

// allow decides whether the socket file open as target may be connected.
func (s *supervisor) allow(target int, st *unix.Stat_t) (bool, string) {
	if s.all {
		return true, ""
	}
	if s.allowed[fileID{st.Dev, st.Ino}] {
		return true, ""
	}
	dev, err := s.superblockDev(target)
	if err != nil {
		return false, err.Error()
	}
	direct, err := s.onDirect(dev)
	if err != nil {
		return false, err.Error()
	}
	if direct {
		return false, "a socket on a file system the sandbox shares with the host (the one holding the toolchain cache), which sbx cannot tell from a host socket"
	}
	inside, err := s.listenersInside()
	if err != nil {
		return false, err.Error()
	}
	// sock_diag reports the low 32 bits of the inode number.
	if inside[vfsID{ino: st.Ino & 0xffffffff, dev: dev}] {
		return true, ""
	}
	return false, "a socket outside the sandbox (allow it with sandbox.network.allowUnixSockets)"
}

// notice tells the command's stderr, once per path and a few times at
// most, which socket was refused.
func (s *supervisor) notice(path, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused[path] || len(s.refused) >= maxRefusedNotices {
		return
	}
	if s.refused == nil {
		s.refused = map[string]bool{}
	}
	s.refused[path] = true
	fmt.Fprintf(os.Stderr, "sbx: connect to %s refused: %s\n", printable.Escape(path), why)
}

// ownNamespace reports whether sock belongs to the sandbox's network
// namespace (SO_NETNS_COOKIE, Linux 5.14; no capability needed).
func (s *supervisor) ownNamespace(sock int) bool {
	cookie, err := unix.GetsockoptUint64(sock, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	return err == nil && cookie == s.netns
}

// probeSupervisor checks what the supervisor needs: pidfd_getfd, and a
// filter with a listener on a thread of this process (the thread is
// retired afterwards, filter and all).
func probeSupervisor() error {
	if _, err := unix.PidfdGetfd(-1, 0, 0); errors.Is(err, unix.ENOSYS) {
		return errors.New("no pidfd_getfd (Linux 5.6)")
	}
	if fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err == nil {
		_, cerr := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
		unix.Close(fd)
		if cerr != nil {
			return fmt.Errorf("no SO_NETNS_COOKIE (Linux 5.14): %w", cerr)
		}
	}
	prog, err := seccomp.Native(seccomp.Supervised)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		fd, err := seccomp.InstallThreadListener(prog)
		if err == nil {
			unix.Close(fd)
		}
		done <- err
	}()
	return <-done
}

// openPidfd opens a pidfd for the calling thread tid: as a thread pidfd
// (Linux 6.9), else for its thread group.
func openPidfd(tid int) (int, error) {
	fd, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD)
	if err == nil || !errors.Is(err, unix.EINVAL) {
		return fd, err
	}
	if fd, err := unix.PidfdOpen(tid, 0); err == nil {
		return fd, nil
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return -1, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			tgid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return -1, err
			}
			return unix.PidfdOpen(tgid, 0)
		}
	}
	return -1, fmt.Errorf("no Tgid in /proc/%d/status", tid)
}

// resolveForCaller opens path as the caller pid's connect would look it
// up (following links): an absolute path from the root (the init's is the
// command's: the command cannot chroot), with /proc/self and
// /proc/thread-self meaning the caller; a relative one from the caller's
// working directory. The result is an O_PATH descriptor. Whatever a link
// leads to, the decision is made on the inode reached.
func resolveForCaller(pid int, path string) (int, error) {
	if path == "" {
		return -1, unix.ENOENT
	}
	dir := unix.AT_FDCWD
	if path[0] == '/' {
		for _, self := range []string{"/proc/self", "/proc/thread-self"} {
			if path == self || strings.HasPrefix(path, self+"/") {
				path = "/proc/" + strconv.Itoa(pid) + path[len(self):]
				break
			}
		}
	} else {
		cwd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/cwd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		defer unix.Close(cwd)
		dir = cwd
	}
	for {
		fd, err := unix.Openat2(dir, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC})
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		return fd, err
	}
}

// vfsID is a file's identity as the kernel's unix sock_diag reports it:
// the inode number and the device of its superblock.
type vfsID struct {
	ino uint64
	dev uint64
}

// onDirect reports whether dev is the superblock of a direct bind's
// mount. superblockDev has read the mount table, which holds them all.
func (s *supervisor) onDirect(dev uint64) (bool, error) {
	for _, id := range s.direct {
		d, ok := s.mounts[id]
		if !ok {
			return false, fmt.Errorf("mount %d (a folder bound from the host) not in /proc/self/mountinfo", id)
		}
		if d == dev {
			return true, nil
		}
	}
	return false, nil
}

// superblockDev returns the device of the superblock of fd's mount (the
// third field of its mountinfo line). stat's st_dev is not it on
// overlayfs, which reports other devices for files. The command cannot
// mount, so the table read once stays true; a mount id not in it makes it
// read again.
func (s *supervisor) superblockDev(fd int) (uint64, error) {
	var sx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &sx); err != nil {
		return 0, fmt.Errorf("statx: %w", err)
	}
	if sx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, errors.New("the kernel reports no mount id")
	}
	if dev, ok := s.mounts[sx.Mnt_id]; ok {
		return dev, nil
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0, err
	}
	s.mounts = parseMountDevs(string(info))
	if dev, ok := s.mounts[sx.Mnt_id]; ok {
		return dev, nil
	}
	return 0, fmt.Errorf("mount %d not in /proc/self/mountinfo", sx.Mnt_id)
}

// parseMountDevs maps each mount id of a mountinfo table to its
// superblock's device.
func parseMountDevs(info string) map[uint64]uint64 {
	out := map[uint64]uint64{}
	for _, line := range strings.Split(info, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		id, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		var major, minor uint32
		if _, err := fmt.Sscanf(f[2], "%d:%d", &major, &minor); err != nil {
			continue
		}
		out[id] = unix.Mkdev(major, minor)
	}
	return out
}

// errnoOf returns err's errno, or def when err carries none.
func errnoOf(err error, def unix.Errno) unix.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return def
}
