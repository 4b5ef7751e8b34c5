//go:build linux && !sbxinner

package linux

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// errNoInner: this build of sbx embeds no sbx-inner (a plain go build or
// go install; scripts/build embeds it).
var errNoInner = errors.New("this build of sbx embeds no sbx-inner (build it with scripts/build)")

// innerExe is the program the sandbox's helper and init run from: a
// sealed memfd holding the embedded sbx-inner (cmd/sbx-inner), made on
// first use and kept for the Executor's life. It is nil when Exe is set,
// when this build embeds none, or when the kernel refuses it (a memfd
// cannot be executed where vm.memfd_noexec is 2): the helper and the
// init are then sbx itself, the same code, each slower to start; why is
// in innerErr.
func (e *Executor) innerExe() (*os.File, error) {
	if e.Exe != "" {
		return nil, errors.New("Executor.Exe is set")
	}
	e.innerOnce.Do(func() { e.inner, e.innerErr = sealedMemfd("sbx-inner", innerELF) })
	return e.inner, e.innerErr
}

// sealedMemfd returns a read-only descriptor of a memfd that holds b and
// can no longer change (no write, no resize, no new seal): what a process
// runs from it is b, whoever else opens it.
func sealedMemfd(name string, b []byte) (*os.File, error) {
	if len(b) == 0 {
		return nil, errNoInner
	}
	flags := unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate(name, flags|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) { // before Linux 6.3, which has no MFD_EXEC
		fd, err = unix.MemfdCreate(name, flags)
	}
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := fillFromExe(f, b); err != nil {
		if _, err := f.WriteAt(b, 0); err != nil {
			f.Close()
			return nil, fmt.Errorf("memfd: %w", err)
		}
	}
	// F_SEAL_EXEC (Linux 6.3) keeps its mode too: no chmod makes it
	// unrunnable for the sandboxes to come.
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	_, err = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals|unix.F_SEAL_EXEC)
	if errors.Is(err, unix.EINVAL) {
		_, err = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd seals: %w", err)
	}
	// An LSM or a noexec policy may refuse to run a memfd that the kernel
	// let sbx make: found here, sbx runs itself instead.
	if err := unix.Faccessat2(int(f.Fd()), "", unix.X_OK, unix.AT_EMPTY_PATH|unix.AT_EACCESS); err != nil && !errors.Is(err, unix.ENOSYS) {
		f.Close()
		return nil, fmt.Errorf("memfd not executable: %w", err)
	}
	// Kept open read-only: no writer of the file is left (a kernel that
	// denies the exec of a file open for writing runs it then too).
	defer f.Close()
	ro, err := os.Open(procFD(int(f.Fd())))
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	return ro, nil
}

// fillFromExe copies b, which lies in sbx's own executable (embedded),
// into f by the kernel from the executable file: reading b itself would
// fault its pages into sbx one by one, a few milliseconds for sbx-inner.
// It fails, for the caller to write b, when b is not found mapped from
// the file or the copy is short or differs from b at either end.
func fillFromExe(f *os.File, b []byte) error {
	off, err := fileOffset(addrOf(b))
	if err != nil {
		return err
	}
	exe, err := os.Open("/proc/self/exe") // the mapped file, even if replaced since
	if err != nil {
		return err
	}
	defer exe.Close()
	for done := 0; done < len(b); {
		n, err := unix.Sendfile(int(f.Fd()), int(exe.Fd()), &off, len(b)-done)
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		done += n
	}
	end := min(len(b), 4096)
	head, tail := make([]byte, end), make([]byte, end)
	if _, err := f.ReadAt(head, 0); err != nil || !bytes.Equal(head, b[:end]) {
		return errors.New("the copy differs at its start")
	}
	if _, err := f.ReadAt(tail, int64(len(b)-end)); err != nil || !bytes.Equal(tail, b[len(b)-end:]) {
		return errors.New("the copy differs at its end")
	}
	return nil
}

// fileOffset finds, in /proc/self/maps, the offset in the executable of
// the byte at addr of a mapping of it.
func fileOffset(addr uintptr) (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(maps)) {
		// start-end perms offset dev inode path
		f := strings.Fields(line)
		if len(f) < 6 || strings.Join(f[5:], " ") != exe {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if !ok || err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		if uint64(addr) >= start && uint64(addr) < end {
			return int64(uint64(addr) - start + off), nil
		}
	}
	return 0, errors.New("not in a mapping of the executable")
}
