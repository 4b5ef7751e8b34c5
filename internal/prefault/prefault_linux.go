//go:build linux

package prefault

import (
	"syscall"
	"unsafe"
)

// madvPopulateRead is MADV_POPULATE_READ (Linux 5.14).
const madvPopulateRead = 22

// mapsSize bounds what is read of /proc/self/maps: a Go program's is a
// few dozen lines at start-up.
const mapsSize = 32 << 10

func init() { populate() }

// populate prefaults every read-only mapping (code, read-only data) of the
// file that holds this function's code. It imports nothing but syscall and
// unsafe (bytes or strconv would delay it behind their initialisers).
func populate() {
	var buf [mapsSize]byte
	maps, ok := readMaps(buf[:])
	if !ok {
		return
	}
	self := codeAddr(populate)
	var exe string
	forLines(maps, func(m mapping) {
		if m.lo <= self && self < m.hi {
			exe = m.path
		}
	})
	if exe == "" {
		return
	}
	forLines(maps, func(m mapping) {
		if (m.perms == "r-xp" || m.perms == "r--p") && m.path == exe {
			syscall.Syscall(syscall.SYS_MADVISE, m.lo, m.hi-m.lo, madvPopulateRead)
		}
	})
}

// readMaps reads /proc/self/maps whole into buf; ok is false when it
// cannot, or it did not fit.
func readMaps(buf []byte) ([]byte, bool) {
	fd, err := syscall.Open("/proc/self/maps", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if err != nil {
			return nil, false
		}
		if m == 0 {
			return buf[:n], true
		}
		n += m
	}
	return nil, false
}

// codeAddr returns the entry address of f's code: a func value points to
// a word holding it.
func codeAddr(f func()) uintptr {
	return **(**uintptr)(unsafe.Pointer(&f))
}

// mapping is one line of /proc/self/maps: "lo-hi perms offset dev inode
// path".
type mapping struct {
	lo, hi      uintptr
	perms, path string
}

// forLines calls f for each well-formed line of maps.
func forLines(maps []byte, f func(mapping)) {
	for len(maps) > 0 {
		line := maps
		if i := indexByte(maps, '\n'); i >= 0 {
			line, maps = maps[:i], maps[i+1:]
		} else {
			maps = nil
		}
		if m, ok := parseMapsLine(line); ok {
			f(m)
		}
	}
}

func parseMapsLine(line []byte) (mapping, bool) {
	var fields [6][]byte
	n := 0
	for i := 0; i < len(line) && n < len(fields); {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		j := i
		for j < len(line) && (line[j] != ' ' || n == len(fields)-1) {
			j++
		}
		if j > i {
			fields[n] = line[i:j]
			n++
		}
		i = j
	}
	if n < len(fields) {
		return mapping{}, false // an anonymous mapping: no path
	}
	dash := indexByte(fields[0], '-')
	if dash < 0 {
		return mapping{}, false
	}
	lo, ok1 := parseHex(fields[0][:dash])
	hi, ok2 := parseHex(fields[0][dash+1:])
	if !ok1 || !ok2 || hi <= lo {
		return mapping{}, false
	}
	return mapping{lo, hi, string(fields[1]), string(fields[5])}, true
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func parseHex(b []byte) (uintptr, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uintptr
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uintptr(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uintptr(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
