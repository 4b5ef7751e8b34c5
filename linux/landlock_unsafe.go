//go:build linux

package linux

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LandlockABI returns the kernel's Landlock ABI version, or 0 and the reason
// when Landlock is unavailable.
func LandlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		switch errno {
		case unix.ENOSYS:
			return 0, errors.New("kernel built without Landlock")
		case unix.EOPNOTSUPP:
			return 0, errors.New("landlock is disabled at boot (add landlock to the lsm= kernel parameter)")
		}
		return 0, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	return int(v), nil
}

// writeAccess returns the write rights an ABI version can restrict.
func writeAccess(abi int) uint64 {
	a := uint64(unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR |
		unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= 2 {
		a |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		a |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	return a
}

// restrictWrites limits the calling thread, and the processes it forks
// afterwards, to writing below the given paths. Reads and execution are
// left to the mount namespace, and to readRuleset's domain.
//
// Preconditions: no_new_privs is set on the calling thread, and the
// goroutine is locked to it.
func restrictWrites(abi int, writable []string) error {
	access := writeAccess(abi)
	fd, err := newRuleset(access)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for _, p := range writable {
		if err := addRule(fd, pathAt{dirfd: unix.AT_FDCWD, name: p}, access, nil); err != nil {
			return err
		}
	}
	return restrictSelf(fd)
}

// readRuleset returns a ruleset that, once a process restricts itself
// with it (restrictSelf: the command's, when its call has come), lets it
// read files only below the paths writable, below readRoots and in the
// masks still where they were bound; -1 when spec hides nothing there.
// It is made before the call comes and used only if nothing it lists
// changed meanwhile, else made again when it comes (see preparedRead), so
// that what the host changed around a hidden path while a warm sandbox
// waited is readable. listing is passed to readRoots.
func readRuleset(abi int, spec *InitSpec, listing func(dir string)) (int, error) {
	if len(spec.Hidden) == 0 { // names apply only beside something hidden
		return -1, nil
	}
	const read = unix.LANDLOCK_ACCESS_FS_READ_FILE
	// Every domain denies linking or renaming into another directory
	// (EXDEV) unless it grants LANDLOCK_ACCESS_FS_REFER there, handled or
	// not: this one grants it where the command writes, as the write
	// domain does.
	writable := uint64(read)
	if abi >= 2 {
		writable |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	fd, err := newRuleset(writable)
	if err != nil {
		return -1, err
	}
	err = readRoots(spec.Hidden, spec.HiddenNames, spec.Readable, func(dirfd int, dir, name string) error {
		if dirfd == unix.AT_FDCWD { // a path the plan binds
			return addRule(fd, pathAt{dirfd: dirfd, name: name}, read, nil)
		}
		// An entry listed: not followed should the host have made it a
		// link since (the rule is then on the link, which gives nothing),
		// and one this user may not reach gets no rule (unreadable).
		err := addRule(fd, pathAt{dirfd: dirfd, name: name, dir: dir, noFollow: true}, read, nil)
		if errors.Is(err, unix.EACCES) {
			return nil
		}
		return err
	}, listing)
	for _, p := range spec.Writable {
		if err == nil {
			err = addRule(fd, pathAt{dirfd: unix.AT_FDCWD, name: p}, writable, nil)
		}
	}
	for _, m := range spec.Masks {
		if err == nil {
			err = addRule(fd, pathAt{dirfd: unix.AT_FDCWD, name: m.Path}, read, &m)
		}
	}
	for std := 0; std <= 2 && err == nil; std++ {
		err = addStdioRule(fd, std)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// addStdioRule lets the ruleset fd grant reading the regular file that
// the descriptor std (the command's stdin, stdout or stderr) was opened
// for reading on: `cat /dev/stdin < file` opens it again by its path,
// which may lie where the sandbox shows something else (the host's /tmp).
// Pipes, terminals and sockets need no rule.
func addStdioRule(fd, std int) error {
	var st unix.Stat_t
	flags, err := unix.FcntlInt(uintptr(std), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_ACCMODE == unix.O_WRONLY || unix.Fstat(std, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: unix.LANDLOCK_ACCESS_FS_READ_FILE, Parent_fd: int32(std)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(fd), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
	if errno != 0 && errno != unix.EBADFD {
		return fmt.Errorf("landlock_add_rule for descriptor %d: %w", std, errno)
	}
	return nil
}

// newRuleset makes a Landlock ruleset that handles the file system rights
// access.
func newRuleset(access uint64) (int, error) {
	attr := struct{ handledFS uint64 }{access}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	return int(fd), nil
}

// restrictSelf enforces the ruleset fd on the calling thread (and what it
// forks or execs from now on), on top of the domains it has.
func restrictSelf(fd int) error {
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

// restrictEveryThread applies the ruleset fd to every thread of this
// process (each must carry no_new_privs, which a process started with it
// has on all of them), and so to whichever thread execs next and to every
// thread made later: the limits stub's rules then do not depend on the
// goroutine that execs staying on the thread that restricted itself.
// An error is the first thread's; should another thread's call fail
// where the first succeeded (nothing known makes threads differ here),
// the runtime ends the process with a fatal error, and the command does
// not run either. Not with cgo (sbx is built without it).
func restrictEveryThread(fd int) error {
	if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self on every thread: %w", errno)
	}
	return nil
}

// pathAt is what addRule opens: name, relative to dirfd (a directory
// dir), the final link followed unless noFollow.
type pathAt struct {
	dirfd     int
	name, dir string
	noFollow  bool
}

func (a pathAt) String() string { return filepath.Join(a.dir, a.name) }

// addRule lets the ruleset fd grant rights below at (at it, for a file:
// only the rights that apply to a file). A path gone meanwhile is left
// out: nothing is below it; so is a mask whose path no longer shows it
// (the host replaced the file there, which detached the mask).
func addRule(fd int, at pathAt, rights uint64, mask *MaskFile) error {
	flags := unix.O_PATH | unix.O_CLOEXEC
	if at.noFollow {
		flags |= unix.O_NOFOLLOW
	}
	pfd, err := unix.Openat(at.dirfd, at.name, flags, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("landlock: open %s: %w", at, err)
	}
	defer unix.Close(pfd)
	// Reading files is a right a rule may give a file too: no need to
	// tell a file from a directory for it (a system call per entry).
	const fileRights = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_READ_FILE
	if mask != nil || rights&^fileRights != 0 {
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			return fmt.Errorf("landlock: stat %s: %w", at, err)
		}
		if mask != nil && (uint64(st.Dev) != mask.Dev || st.Ino != mask.Ino) {
			return nil
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			rights &= fileRights
		}
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(pfd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(fd), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("landlock_add_rule %s: %w", at, errno)
	}
	return nil
}
