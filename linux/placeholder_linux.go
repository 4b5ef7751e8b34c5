//go:build linux

package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// placeholderMaker creates placeholders: empty, read-only regular files
// that a read-only bind mount turns into names the sandbox cannot create,
// write or remove. Protected directory names get a file too: it keeps the
// directory from being created just as well.
//
// All placeholders on one file system are hard links to a single inode
// made with O_TMPFILE: allocating an inode per name costs far more than a
// link on many file systems, and the shared inode identifies sbx's own
// placeholders when they are removed.
type placeholderMaker struct {
	master map[uint64]string // device → a placeholder path to link to
}

func (m *placeholderMaker) close() {}

// make creates the placeholder at p and returns its identity.
func (m *placeholderMaker) make(p string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Dir(p), &st); err != nil {
		return "", err
	}
	dev := uint64(st.Dev)
	if m.master == nil {
		m.master = map[uint64]string{}
	}
	if src, ok := m.master[dev]; ok {
		err := os.Link(src, p)
		if err == nil {
			return fsrules.FileID(p), nil
		}
		if errors.Is(err, os.ErrExist) {
			return "", err
		}
		// Fall through: this directory is on another mount, or links are
		// refused; make a new inode.
	}
	if err := newEmptyFile(p); err != nil {
		return "", err
	}
	m.master[dev] = p
	return fsrules.FileID(p), nil
}

// newEmptyFile creates an empty read-only file at p: an anonymous O_TMPFILE
// inode linked in, or an ordinary exclusive create where the file system has
// no O_TMPFILE.
func newEmptyFile(p string) error {
	fd, err := unix.Open(filepath.Dir(p), unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
	if err == nil {
		defer unix.Close(fd)
		err = unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, p, unix.AT_SYMLINK_FOLLOW)
		if err == nil || errors.Is(err, unix.EEXIST) {
			return wrapExist(err, p)
		}
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return err
	}
	return f.Close()
}

func wrapExist(err error, p string) error {
	if err == nil {
		return nil
	}
	return &os.PathError{Op: "link", Path: p, Err: err}
}
