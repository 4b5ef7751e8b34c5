//go:build linux

package linux

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// copySparse copies in to out (both at offset 0, out empty) keeping in's
// holes as holes: a sparse file made in the sandbox takes on the host the
// disk it took there, not its apparent size. Where the file system cannot
// tell data from holes, it copies everything.
func copySparse(out, in *os.File) error {
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	for off := int64(0); off < size; {
		data, err := in.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return copyAll(out, in)
		}
		hole, err := in.Seek(data, unix.SEEK_HOLE)
		if err != nil {
			return copyAll(out, in)
		}
		if _, err := in.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := out.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(out, in, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return out.Truncate(size)
}

// copyAll copies the whole of in to out from the start.
func copyAll(out, in *os.File) error {
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(out, in)
	return err
}
