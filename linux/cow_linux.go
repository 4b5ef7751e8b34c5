//go:build linux

package linux

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14).
const madvPopulateWrite = 23

// rearmWrites makes this process's resident anonymous pages writable
// again after a child forked from it has exec'd, in one pass of the
// kernel. The transaction helper starts in a new user namespace, which
// rules out vfork: the fork write-protects every page of sbx for
// copy-on-write, and each page sbx writes next takes a fault, even with
// the child long gone. A long-lived sbx (serve, MCP) forks once per call,
// and the next call would pay those faults (about 400, 15 µs each on a
// nested virtual machine); it calls this while the caller thinks. It
// changes no content and maps no page that was not resident; on a kernel
// without MADV_POPULATE_WRITE it does nothing. It returns how many pages
// it went over.
func rearmWrites() int {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	pages := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		lo, hi, ok := anonWritable(sc.Bytes())
		if !ok {
			continue
		}
		n, ok := rearmRange(lo, hi)
		pages += n
		if !ok {
			return pages
		}
	}
	return pages
}

// anonWritable parses one line of /proc/self/maps and returns the range
// of a private, writable, anonymous mapping.
func anonWritable(line []byte) (lo, hi uintptr, ok bool) {
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[1]) != "rw-p" || string(f[4]) != "0" {
		return 0, 0, false
	}
	a, b, found := bytes.Cut(f[0], []byte("-"))
	if !found {
		return 0, 0, false
	}
	l, err1 := strconv.ParseUint(string(a), 16, 64)
	h, err2 := strconv.ParseUint(string(b), 16, 64)
	if err1 != nil || err2 != nil || h <= l {
		return 0, 0, false
	}
	return uintptr(l), uintptr(h), true
}

// rearmRange populates for writing the resident runs of pages in
// [lo, hi); ok is false when the kernel lacks MADV_POPULATE_WRITE.
func rearmRange(lo, hi uintptr) (pages int, ok bool) {
	size := uintptr(os.Getpagesize())
	n := int((hi - lo) / size)
	vec := make([]byte, n)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, lo, hi-lo, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, true // unmapped since it was listed
	}
	for i := 0; i < n; {
		if vec[i]&1 == 0 {
			i++
			continue
		}
		j := i
		for j < n && vec[j]&1 != 0 {
			j++
		}
		_, _, e := unix.Syscall(unix.SYS_MADVISE, lo+uintptr(i)*size, uintptr(j-i)*size, madvPopulateWrite)
		if e == unix.EINVAL {
			return pages, false
		}
		pages += j - i
		i = j
	}
	return pages, true
}
