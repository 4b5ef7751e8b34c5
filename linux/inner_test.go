//go:build linux

package linux

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// someSource is embedded as sbx-inner is in sbx: its bytes lie in the
// test binary's read-only data, mapped from the executable file, over
// several pages.
//
//go:embed merge_linux.go
var someSource string

func embedded() []byte { return unsafe.Slice(unsafe.StringData(someSource), len(someSource)) }

func TestSealedMemfdHoldsTheBytesAndCannotChange(t *testing.T) {
	heap := bytes.Repeat([]byte("sbx"), 100_000) // written: in no mapping of the executable
	for name, b := range map[string][]byte{"heap": heap, "embedded": embedded()} {
		t.Run(name, func(t *testing.T) {
			f, err := sealedMemfd("sbx-test", b)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			path := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, b) {
				t.Fatalf("the memfd holds %d bytes (%v), want the %d given", len(got), err, len(b))
			}
			if _, err := f.WriteAt([]byte("x"), 0); err == nil {
				t.Error("the descriptor given is writable")
			}
			// A descriptor opened for writing (as another process of the
			// user could) can change nothing either.
			g, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if _, err := g.Write([]byte("x")); !errors.Is(err, unix.EPERM) {
				t.Errorf("write: %v, want EPERM", err)
			}
			if err := g.Truncate(1); !errors.Is(err, unix.EPERM) {
				t.Errorf("truncate: %v, want EPERM", err)
			}
			if _, err := unix.FcntlInt(g.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_EXEC); !errors.Is(err, unix.EPERM) {
				t.Errorf("a new seal: %v, want EPERM", err)
			}
			// Where the kernel has F_SEAL_EXEC (6.3), its mode is sealed.
			if seals, _ := unix.FcntlInt(g.Fd(), unix.F_GET_SEALS, 0); seals&unix.F_SEAL_EXEC != 0 {
				if err := g.Chmod(0o644); !errors.Is(err, unix.EPERM) {
					t.Errorf("chmod: %v, want EPERM", err)
				}
			} else if kernelAtLeast(6, 3) {
				t.Errorf("no F_SEAL_EXEC on a kernel that has it (seals %#x)", seals)
			}
		})
	}
}

func TestFillFromExeCopiesFromTheExecutable(t *testing.T) {
	b := embedded()
	off, err := fileOffset(addrOf(b))
	if err != nil {
		t.Fatalf("fileOffset of embedded bytes: %v", err)
	}
	exe, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	if off+int64(len(b)) > int64(len(exe)) || !bytes.Equal(exe[off:off+int64(len(b))], b) {
		t.Fatalf("offset %d of the executable does not hold the embedded bytes", off)
	}
	f, err := os.Create(t.TempDir() + "/copy")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := fillFromExe(f, b); err != nil {
		t.Fatalf("fillFromExe: %v", err)
	}
	if got, _ := os.ReadFile(f.Name()); !bytes.Equal(got, b) {
		t.Fatal("the copy differs")
	}
	// Bytes on the heap are in no mapping of the executable: refused,
	// for the caller to write them.
	if err := fillFromExe(f, bytes.Clone(b)); err == nil {
		t.Error("fillFromExe took a heap slice for part of the executable")
	}
}

// kernelAtLeast reports whether the running kernel is at least major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var ma, mi int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi)
	return ma > major || ma == major && mi >= minor
}
