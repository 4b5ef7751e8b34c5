package fsrules

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// Quarantine moves each entry into dir, keeping its absolute path below dir
// (dir/home/u/ws/sub/.bashrc). Nothing is deleted: an entry that cannot be
// renamed across file systems is copied, and the original removed only once
// the copy is complete. It returns the new locations, in order.
func Quarantine(dir string, entries []Entry) ([]string, error) {
	var moved []string
	var errs []error
	for _, e := range entries {
		dst := filepath.Join(dir, e.Path)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			errs = append(errs, err)
			continue
		}
		err := os.Rename(e.Path, dst)
		if errors.Is(err, syscall.EXDEV) {
			err = copyTree(e.Path, dst)
			if err == nil {
				err = os.RemoveAll(e.Path)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("quarantine %s: %w", e.Path, err))
			continue
		}
		moved = append(moved, dst)
	}
	return moved, errors.Join(errs...)
}

// copyTree copies a file, symlink or directory tree, keeping modes.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		t, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(t, dst)
	case fi.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return os.Chmod(dst, fi.Mode().Perm())
	case fi.Mode().IsRegular():
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	return fmt.Errorf("%s: not a regular file, directory or symlink; left in place", src)
}
