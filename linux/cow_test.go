//go:build linux

package linux

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// minorFaults is this process's count of minor page faults.
func minorFaults(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	n, err := strconv.Atoi(f[7]) // minflt, the 10th field
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// After a fork into a new user namespace (no vfork), writing pages sbx
// wrote before takes a copy-on-write fault each; after rearmWrites it
// does not, and the pages keep their content.
func TestRearmWritesAfterFork(t *testing.T) {
	const pages = 256
	mem, err := unix.Mmap(-1, 0, pages*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	writeAll := func(v byte) int {
		before := minorFaults(t)
		for i := 0; i < pages; i++ {
			mem[i*4096] = v
		}
		return minorFaults(t) - before
	}
	fork := func() {
		c := exec.Command("/bin/true")
		c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
		if err := c.Run(); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("cannot start a process in a new user namespace: %v", err)
			}
			t.Skipf("cannot start a process in a new user namespace: %v", err)
		}
	}
	writeAll(1)
	fork()
	if n := writeAll(2); n < pages/2 {
		t.Fatalf("only %d faults writing %d pages after a fork: the test cannot tell", n, pages)
	}
	fork()
	if n := rearmWrites(); n < pages {
		t.Fatalf("rearmWrites went over %d pages, fewer than the %d written (MADV_POPULATE_WRITE needs Linux 5.14)", n, pages)
	}
	for i := 0; i < pages; i++ {
		if mem[i*4096] != 2 {
			t.Fatalf("page %d holds %d after rearmWrites, not 2", i, mem[i*4096])
		}
	}
	if n := writeAll(3); n > pages/8 {
		t.Errorf("%d faults writing %d pages after rearmWrites", n, pages)
	}
	for i := 0; i < pages; i++ {
		if mem[i*4096] != 3 {
			t.Fatalf("page %d holds %d", i, mem[i*4096])
		}
	}
}
