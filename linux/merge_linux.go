//go:build linux

package linux

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// MergeReport is what merging a run's overlay upper layers back into the
// host's writable roots did.
type MergeReport struct {
	// Files and Bytes count the regular files written to the host.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Removed counts host entries deleted because the command deleted them.
	Removed int `json:"removed"`
	// Conflicts are host paths that changed on the host during the run and
	// that the command changed too: the host's version is kept, the
	// command's is saved aside (Saved, empty when it was a deletion).
	Conflicts []Conflict `json:"conflicts,omitempty"`
	// Skipped are entries that were not merged, with the reason.
	Skipped []string `json:"skipped,omitempty"`
	// Errors are merges that failed; the command's version of the path is
	// saved aside when possible (named in the message).
	Errors []string `json:"errors,omitempty"`
}

// Conflict is a path both the command and someone on the host changed.
type Conflict struct {
	Path  string `json:"path"`
	Saved string `json:"saved,omitempty"`
}

// merger applies an overlayfs upper directory (as the kernel leaves it with
// the userxattr option: whiteouts are 0/0 character devices, opaque
// directories carry user.overlay.opaque=y) to a host directory.
//
// Every host operation is relative to a directory descriptor opened without
// following symlinks, so a path in the upper layer can never lead the merge
// out of the writable root through a symlink on the host.
type merger struct {
	// start is the coarse real time at which the run began: a host entry
	// whose ctime is not before it changed during the run.
	start unix.Timespec
	// keep are host paths the merge never creates, changes or removes
	// (denyWrite paths, protected files, placeholders).
	keep []string
	// The command's version of a conflicting path is saved under
	// asideRel/<host path> below the state directory open as asideFD.
	asideFD   int
	asideRel  string
	asideBase string // the state directory's path, for messages
	rep       MergeReport
	// links maps an upper inode with several names to the host directory
	// (a dup'ed descriptor) and name it was first written to.
	links map[[2]uint64]hostName
}

type hostName struct {
	dirFD int
	name  string
}

func (m *merger) close() {
	for _, l := range m.links {
		unix.Close(l.dirFD)
	}
}

func (m *merger) skip(host, why string) {
	m.rep.Skipped = append(m.rep.Skipped, host+": "+why)
}

func (m *merger) fail(host string, err error) {
	m.rep.Errors = append(m.rep.Errors, fmt.Sprintf("%s: %v", host, err))
}

// kept reports whether the merge must leave host alone: it is a kept path
// or, when under is set, one lies below it.
func (m *merger) kept(host string, under bool) bool {
	for _, k := range m.keep {
		if k == host || (under && fsrules.Within(k, host)) {
			return true
		}
	}
	return false
}

// fileMode is the mode a merged file gets: the command's, without the
// set-user-ID and set-group-ID bits, so a sandbox cannot leave a setuid
// program on the host (its own mounts are nosuid; the host's are not).
func fileMode(st *unix.Stat_t) uint32 {
	return st.Mode & 0o7777 &^ (unix.S_ISUID | unix.S_ISGID)
}

// coarseNow is the clock file timestamps are taken from: a change made
// after it has a ctime not before it.
func coarseNow() unix.Timespec {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts)
	return ts
}

func (m *merger) changedDuringRun(st *unix.Stat_t) bool {
	c := st.Ctim
	return c.Sec > m.start.Sec || (c.Sec == m.start.Sec && c.Nsec >= m.start.Nsec)
}

// dir merges the upper directory upper into the host directory open as
// hostFD (whose path is host). An opaque upper directory replaced the host
// directory's contents: host entries it does not list are removed.
func (m *merger) dir(upper string, hostFD int, host string, opaque bool) {
	ents, err := os.ReadDir(upper)
	if err != nil {
		m.fail(host, err)
		return
	}
	if opaque {
		names, err := readNames(hostFD)
		if err != nil {
			m.fail(host, err)
			return
		}
		inUpper := make(map[string]bool, len(ents))
		for _, e := range ents {
			inUpper[e.Name()] = true
		}
		for _, n := range names {
			if !inUpper[n] {
				m.remove(hostFD, n, filepath.Join(host, n))
			}
		}
	}
	for _, e := range ents {
		name := e.Name()
		up, h := filepath.Join(upper, name), filepath.Join(host, name)
		var st unix.Stat_t
		if err := unix.Lstat(up, &st); err != nil {
			m.fail(h, err)
			continue
		}
		// A whiteout removes a whole tree: no kept path may lie below. A
		// directory is merged entry by entry, so only its own path counts.
		isWhiteout := st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
		if m.kept(h, isWhiteout) {
			m.skip(h, "a read-only path of the policy is not merged")
			continue
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if !isWhiteout {
				m.skip(h, "device files are not merged")
				continue
			}
			m.remove(hostFD, name, h)
		case unix.S_IFDIR:
			m.subdir(up, &st, hostFD, name, h)
		case unix.S_IFREG:
			m.file(up, &st, hostFD, name, h)
		case unix.S_IFLNK:
			m.symlink(up, hostFD, name, h)
		case unix.S_IFIFO:
			if m.replaceable(hostFD, name, h) {
				if err := unix.Mkfifoat(hostFD, name, fileMode(&st)); err != nil && !errors.Is(err, unix.EEXIST) {
					m.fail(h, err)
				}
			}
		default:
			m.skip(h, "sockets are not merged")
		}
	}
}

func (m *merger) subdir(up string, st *unix.Stat_t, hostFD int, name, h string) {
	opaque := false
	if v, err := getxattr(up, "user.overlay.opaque"); err == nil && v == "y" {
		opaque = true
	}
	var hst unix.Stat_t
	err := unix.Fstatat(hostFD, name, &hst, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && hst.Mode&unix.S_IFMT != unix.S_IFDIR {
		if !m.remove(hostFD, name, h) {
			m.rep.Conflicts = append(m.rep.Conflicts, Conflict{Path: h})
			return
		}
		err = unix.ENOENT
	}
	if errors.Is(err, unix.ENOENT) {
		if err := unix.Mkdirat(hostFD, name, st.Mode&0o7777); err != nil {
			m.fail(h, err)
			return
		}
	} else if err != nil {
		m.fail(h, err)
		return
	}
	fd, err := unix.Openat(hostFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		m.fail(h, err)
		return
	}
	defer unix.Close(fd)
	m.dir(up, fd, h, opaque)
	if hst.Mode&0o7777 != st.Mode&0o7777 {
		if err := unix.Fchmod(fd, st.Mode&0o7777); err != nil {
			m.fail(h, err)
		}
	}
}

// replaceable clears the way for a new host entry at name: an
// absent entry is fine; an existing one changed on the host during the run
// is kept (a conflict); otherwise it is removed.
func (m *merger) replaceable(hostFD int, name, h string) bool {
	var hst unix.Stat_t
	if err := unix.Fstatat(hostFD, name, &hst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return true
		}
		m.fail(h, err)
		return false
	}
	if m.changedDuringRun(&hst) && hst.Mode&unix.S_IFMT != unix.S_IFDIR {
		m.rep.Conflicts = append(m.rep.Conflicts, Conflict{Path: h})
		return false
	}
	return m.remove(hostFD, name, h)
}

func (m *merger) symlink(up string, hostFD int, name, h string) {
	target, err := os.Readlink(up)
	if err != nil {
		m.fail(h, err)
		return
	}
	if cur, err := readlinkat(hostFD, name); err == nil && cur == target {
		return
	}
	if !m.replaceable(hostFD, name, h) {
		return
	}
	if err := unix.Symlinkat(target, hostFD, name); err != nil {
		m.fail(h, err)
	}
}

func (m *merger) file(up string, st *unix.Stat_t, hostFD int, name, h string) {
	key := [2]uint64{st.Dev, st.Ino}
	if st.Nlink > 1 {
		if prev, ok := m.links[key]; ok {
			if m.replaceable(hostFD, name, h) {
				if err := unix.Linkat(prev.dirFD, prev.name, hostFD, name, 0); err != nil {
					m.fail(h, err)
				}
			}
			return
		}
	}
	var hst unix.Stat_t
	err := unix.Fstatat(hostFD, name, &hst, unix.AT_SYMLINK_NOFOLLOW)
	exists := err == nil
	if err != nil && !errors.Is(err, unix.ENOENT) {
		m.fail(h, err)
		return
	}
	if exists {
		if m.changedDuringRun(&hst) {
			m.rep.Conflicts = append(m.rep.Conflicts, Conflict{Path: h, Saved: m.saveAside(up, h, st)})
			return
		}
		if hst.Mode&unix.S_IFMT == unix.S_IFREG && hst.Size == st.Size && hst.Mtim == st.Mtim && sameContent(up, hostFD, name) {
			// Opened for writing (copied up) but not changed.
			if hst.Mode&0o7777 != st.Mode&0o7777 {
				if err := unix.Fchmodat(hostFD, name, fileMode(st), 0); err != nil {
					m.fail(h, err)
				}
			}
			m.remember(key, st, hostFD, name)
			return
		}
		if hst.Mode&unix.S_IFMT == unix.S_IFDIR && !m.remove(hostFD, name, h) {
			m.rep.Conflicts = append(m.rep.Conflicts, Conflict{Path: h, Saved: m.saveAside(up, h, st)})
			return
		}
	}
	if err := m.write(up, st, hostFD, name); err != nil {
		if saved := m.saveAside(up, h, st); saved != "" {
			err = fmt.Errorf("%w (the command's version is saved at %s)", err, saved)
		}
		m.fail(h, err)
		return
	}
	m.rep.Files++
	m.rep.Bytes += st.Size
	m.remember(key, st, hostFD, name)
}

// fileInPlace writes the budget's copy of a writable file root back into
// the host file itself (same inode), when the command changed it.
func (m *merger) fileInPlace(up string, st *unix.Stat_t, dirFD int, name, h string) {
	var hst unix.Stat_t
	if err := unix.Fstatat(dirFD, name, &hst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		m.fail(h, err)
		return
	}
	if hst.Size == st.Size && hst.Mtim == st.Mtim && hst.Mode&0o7777 == st.Mode&0o7777 && sameContent(up, dirFD, name) {
		return
	}
	if m.changedDuringRun(&hst) || hst.Mode&unix.S_IFMT != unix.S_IFREG {
		m.rep.Conflicts = append(m.rep.Conflicts, Conflict{Path: h, Saved: m.saveAside(up, h, st)})
		return
	}
	src, err := os.Open(up)
	if err != nil {
		m.fail(h, err)
		return
	}
	defer src.Close()
	fd, err := unix.Openat(dirFD, name, unix.O_WRONLY|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		m.fail(h, err)
		return
	}
	dst := os.NewFile(uintptr(fd), h)
	_, err = io.Copy(dst, src)
	if err == nil {
		err = unix.Fchmod(fd, fileMode(st))
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.UtimesNanoAt(dirFD, name, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		m.fail(h, err)
		return
	}
	m.rep.Files++
	m.rep.Bytes += st.Size
}

func (m *merger) remember(key [2]uint64, st *unix.Stat_t, hostFD int, name string) {
	if st.Nlink < 2 {
		return
	}
	fd, err := unix.Dup(hostFD)
	if err != nil {
		return
	}
	if m.links == nil {
		m.links = map[[2]uint64]hostName{}
	}
	m.links[key] = hostName{fd, name}
}

// write copies the upper file to a new file beside the host entry and
// renames it over, so the host never sees a half-written file.
func (m *merger) write(up string, st *unix.Stat_t, hostFD int, name string) error {
	src, err := os.Open(up)
	if err != nil {
		return err
	}
	defer src.Close()
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := ".sbx-merge-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(hostFD, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	dst := os.NewFile(uintptr(fd), tmp)
	_, err = io.Copy(dst, src)
	if err == nil {
		err = unix.Fchmod(fd, fileMode(st))
	}
	if err == nil {
		err = unix.UtimesNanoAt(hostFD, tmp, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(hostFD, tmp, hostFD, name)
	}
	if err != nil {
		unix.Unlinkat(hostFD, tmp, 0)
	}
	return err
}

// remove deletes name from the host directory, recursively. Entries changed
// on the host during the run are kept (and so are the directories holding
// them), as are kept paths; it reports whether everything went.
func (m *merger) remove(dirFD int, name, h string) bool {
	if m.kept(h, true) {
		m.skip(h, "a read-only path of the policy is not removed")
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return true
		}
		m.fail(h, err)
		return false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if m.changedDuringRun(&st) {
			m.rep.Conflicts = append(m.rep.Conflicts, Conflict{Path: h})
			return false
		}
		if err := unix.Unlinkat(dirFD, name, 0); err != nil {
			m.fail(h, err)
			return false
		}
		m.rep.Removed++
		return true
	}
	fd, err := unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		m.fail(h, err)
		return false
	}
	names, err := readNames(fd)
	all := err == nil
	if err != nil {
		m.fail(h, err)
	}
	for _, n := range names {
		all = m.remove(fd, n, filepath.Join(h, n)) && all
	}
	unix.Close(fd)
	if !all {
		return false
	}
	if err := unix.Unlinkat(dirFD, name, unix.AT_REMOVEDIR); err != nil {
		m.fail(h, err)
		return false
	}
	m.rep.Removed++
	return true
}

// saveAside copies the command's version of the regular file up, meant
// for host path h, to <aside>/<h> and returns that path; "" when it could
// not.
func (m *merger) saveAside(up, h string, st *unix.Stat_t) string {
	if m.asideFD <= 0 || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return ""
	}
	rel := filepath.Join(m.asideRel, strings.TrimPrefix(h, "/"))
	dirFD, err := mkdirAllAt(m.asideFD, filepath.Dir(rel))
	if err != nil {
		return ""
	}
	defer unix.Close(dirFD)
	src, err := os.Open(up)
	if err != nil {
		return ""
	}
	defer src.Close()
	fd, err := unix.Openat(dirFD, filepath.Base(rel), unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return ""
	}
	dst := os.NewFile(uintptr(fd), rel)
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err != nil || cerr != nil {
		return ""
	}
	return filepath.Join(m.asideBase, rel)
}

// mkdirAllAt creates the directories of rel below dirFD, never following a
// symlink, and returns the last one open.
func mkdirAllAt(dirFD int, rel string) (int, error) {
	fd, err := unix.Dup(dirFD)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(filepath.Clean(rel), "/") {
		if c == "" || c == "." {
			continue
		}
		if err := unix.Mkdirat(fd, c, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return -1, err
		}
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// readNames lists a directory open as fd (without moving fd's offset for
// anyone else: it reads through a fresh descriptor).
func readNames(fd int) ([]string, error) {
	nfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(nfd), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}

func readlinkat(dirFD int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirFD, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func getxattr(path, attr string) (string, error) {
	buf := make([]byte, 64)
	n, err := unix.Lgetxattr(path, attr, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// sameContent compares an upper file with a host file byte for byte.
func sameContent(up string, hostFD int, name string) bool {
	a, err := os.Open(up)
	if err != nil {
		return false
	}
	defer a.Close()
	fd, err := unix.Openat(hostFD, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	b := os.NewFile(uintptr(fd), name)
	defer b.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return (ea == io.EOF || ea == io.ErrUnexpectedEOF) && (eb == io.EOF || eb == io.ErrUnexpectedEOF)
		}
	}
}
