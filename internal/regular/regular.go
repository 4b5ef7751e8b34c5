// Package regular reads small files that someone else may have made (a
// settings file, a git config in a workspace a sandboxed command wrote):
// regular files only, opened without waiting, up to a bound.
package regular

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// NotRegularError is a file Read refused without reading it: not a
// regular file (Size is -1), or larger than the bound (Size).
type NotRegularError struct {
	Path string
	Mode fs.FileMode
	Size int64
}

func (e *NotRegularError) Error() string {
	if e.Size >= 0 {
		return fmt.Sprintf("%s is larger than %d bytes", e.Path, e.Size)
	}
	return fmt.Sprintf("%s is not a regular file (%s)", e.Path, e.Mode.Type())
}

// Read reads a regular file of at most max bytes (links are followed); a
// FIFO, a device or a directory is refused without being read (opened
// non-blocking: a FIFO's open would otherwise wait for a writer).
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Mode: fi.Mode(), Size: -1}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &NotRegularError{Path: path, Mode: fi.Mode(), Size: max}
	}
	return data, nil
}
