//go:build linux

package linux

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bindReadOnly bind-mounts each path onto itself, recursively, and makes the
// new mount read-only, keeping the flags the kernel locks in a user
// namespace (nosuid, nodev, noexec, atime).
//
// A path the init may not even look up (EACCES: a directory of another
// user on the way, and the init has no capability over files) is one the
// command, with the same uid and no capability at all, cannot reach
// either: it is skipped instead of failing the run. Should the host open
// the way during the run, the post-run scan still quarantines what the
// command planted there.
func bindReadOnly(paths []string) error {
	for _, p := range paths {
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			if errors.Is(err, unix.EACCES) {
				continue
			}
			return fmt.Errorf("bind %s: %w", p, err)
		}
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			return fmt.Errorf("statfs %s: %w", p, err)
		}
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
		for _, f := range []struct{ st, ms uintptr }{
			{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
			{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
		} {
			if uintptr(st.Flags)&f.st != 0 {
				flags |= f.ms
			}
		}
		if err := unix.Mount("", p, "", flags, ""); err != nil {
			return fmt.Errorf("make %s read-only: %w", p, err)
		}
	}
	return nil
}

// dropCapabilities empties the bounding, ambient, inheritable, permitted and
// effective capability sets of every thread of the init. Afterwards no
// process in the sandbox holds or can regain a capability, even as uid 0.
// It needs a binary built without cgo (AllThreadsSyscall).
func dropCapabilities() error {
	allThreads := func(what string, trap, a1, a2, a3 uintptr) error {
		if _, _, errno := syscall.AllThreadsSyscall(trap, a1, a2, a3); errno != 0 {
			if errno == syscall.ENOTSUP {
				return fmt.Errorf("%s: sbx must be built with CGO_ENABLED=0 to drop capabilities on every thread", what)
			}
			return fmt.Errorf("%s: %w", what, errno)
		}
		return nil
	}
	// Only what is in the bounding set needs dropping (bubblewrap leaves
	// CAP_SYS_ADMIN and CAP_SETPCAP); each all-threads call stops the world,
	// so skip the rest. CAP_SETPCAP goes last: dropping needs it.
	for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
		in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, c, 0, 0, 0)
		if errors.Is(err, syscall.EINVAL) {
			break // past the kernel's last capability
		}
		if err != nil {
			return fmt.Errorf("read bounding set: %w", err)
		}
		if in == 0 || c == unix.CAP_SETPCAP {
			continue
		}
		if err := allThreads("drop bounding capability", unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0); err != nil {
			return err
		}
	}
	if err := allThreads("drop CAP_SETPCAP", unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, unix.CAP_SETPCAP, 0); err != nil {
		return err
	}
	if err := allThreads("clear ambient capabilities", unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return allThreads("capset", unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
}
