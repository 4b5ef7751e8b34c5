//go:build linux

package linux

import (
	"errors"
	"fmt"
	"path/filepath"
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

// restrict limits the calling thread, and the processes it forks
// afterwards, to writing below spec.Writable; with spec.Hidden, also to
// reading files only below those, below readRoots and in the masks that
// are still where they were bound. Execution, and reads when nothing is
// hidden, are left to the mount namespace.
//
// Preconditions: no_new_privs is set on the calling thread, and the
// goroutine is locked to it.
func restrict(abi int, spec *InitSpec) error {
	access := writeAccess(abi)
	if len(spec.Hidden) > 0 {
		access |= unix.LANDLOCK_ACCESS_FS_READ_FILE
	}
	attr := struct{ handledFS uint64 }{access}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	for _, p := range spec.Writable {
		if err := addRule(int(fd), unix.AT_FDCWD, p, p, access, nil); err != nil {
			return err
		}
	}
	if len(spec.Hidden) > 0 {
		err := readRoots(spec.Hidden, spec.Readable, func(dirfd int, dir, name string) error {
			return addRule(int(fd), dirfd, name, filepath.Join(dir, name), unix.LANDLOCK_ACCESS_FS_READ_FILE, nil)
		})
		if err != nil {
			return err
		}
	}
	for _, m := range spec.Masks {
		if err := addRule(int(fd), unix.AT_FDCWD, m.Path, m.Path, unix.LANDLOCK_ACCESS_FS_READ_FILE, &m); err != nil {
			return err
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

// addRule lets the ruleset fd grant rights below name, relative to dirfd
// (at it, for a file: only the rights that apply to a file); errors name
// it shown. A path gone
// meanwhile is left out: nothing is below it; so is a mask whose path no
// longer shows it (the host replaced the file there, which detached the
// mask).
func addRule(fd, dirfd int, name, shown string, rights uint64, mask *MaskFile) error {
	pfd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("landlock: open %s: %w", shown, err)
	}
	defer unix.Close(pfd)
	// Reading files is a right a rule may give a file too: no need to
	// tell a file from a directory for it (a system call per entry).
	const fileRights = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_READ_FILE
	if mask != nil || rights&^fileRights != 0 {
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			return fmt.Errorf("landlock: stat %s: %w", shown, err)
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
		return fmt.Errorf("landlock_add_rule %s: %w", shown, errno)
	}
	return nil
}
