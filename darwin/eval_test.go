package darwin

import (
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// access is one operation the tests ask a profile about: op is a Seatbelt
// operation (file-write-create, file-write-unlink, file-write-data,
// file-read-data, network-outbound …), path its path, vtype the vnode
// type ("REGULAR-FILE" when empty).
type access struct {
	op, path, vtype string
}

// decide evaluates the profile's rules for a the way Seatbelt does as far
// as these tests need: the last rule whose operation and filters match
// decides; (deny default) otherwise. Filters: literal, subpath, regex,
// vnode-type, require-all, require-any, require-not; a rule with a filter
// this evaluator does not know never matches, and the test fails.
func decide(t *testing.T, forms []*sexpr, a access) bool {
	t.Helper()
	if a.vtype == "" {
		a.vtype = "REGULAR-FILE"
	}
	allowed := false
	for _, f := range forms {
		if len(f.list) < 2 || (f.list[0].atom != "allow" && f.list[0].atom != "deny") {
			continue
		}
		var ops []string
		var filters []*sexpr
		for _, e := range f.list[1:] {
			switch {
			case e.atom != "":
				ops = append(ops, e.atom)
			case len(e.list) > 0 && e.list[0].atom == "with":
			default:
				filters = append(filters, e)
			}
		}
		if !opMatches(ops, a.op) {
			continue
		}
		match := len(filters) == 0
		for _, fl := range filters {
			if filterMatches(t, fl, a) {
				match = true
				break
			}
		}
		if match {
			allowed = f.list[0].atom == "allow"
		}
	}
	return allowed
}

var regexCache sync.Map

// compiled compiles a profile regex once (POSIX: "." matches a newline).
func compiled(re string) *regexp.Regexp {
	if r, ok := regexCache.Load(re); ok {
		return r.(*regexp.Regexp)
	}
	r := regexp.MustCompile("(?s)" + re)
	regexCache.Store(re, r)
	return r
}

func opMatches(ops []string, op string) bool {
	for _, o := range ops {
		if o == op || o == "default" || strings.HasSuffix(o, "*") && strings.HasPrefix(op, strings.TrimSuffix(o, "*")) {
			return true
		}
	}
	return false
}

func filterMatches(t *testing.T, f *sexpr, a access) bool {
	t.Helper()
	if len(f.list) == 0 {
		t.Fatalf("not a filter: %+v", f)
	}
	args := f.list[1:]
	str := func() string {
		if len(args) != 1 || !args[0].isStr {
			t.Fatalf("filter %s wants one string", f.list[0].atom)
		}
		return args[0].str
	}
	switch f.list[0].atom {
	case "literal":
		return a.path == str()
	case "subpath":
		s := str()
		return a.path == s || strings.HasPrefix(a.path, strings.TrimSuffix(s, "/")+"/")
	case "regex":
		return compiled(str()).MatchString(a.path)
	case "vnode-type":
		return len(args) == 1 && args[0].atom == a.vtype
	case "require-all":
		for _, c := range args {
			if !filterMatches(t, c, a) {
				return false
			}
		}
		return true
	case "require-any":
		for _, c := range args {
			if filterMatches(t, c, a) {
				return true
			}
		}
		return false
	case "require-not":
		return !filterMatches(t, args[0], a)
	case "remote", "local":
		// (remote ip "host:port"), (remote unix-socket [path filter]);
		// an IP access's path is "host:port", a socket's its path.
		switch {
		case len(args) >= 1 && args[0].atom == "unix-socket":
			return a.vtype == "SOCKET" && (len(args) == 1 || filterMatches(t, args[1], a))
		case len(args) == 2 && args[0].atom == "ip":
			return a.vtype == "IP" && ipMatches(args[1].str, a.path)
		}
		t.Fatalf("unknown network filter %v", args)
	}
	// Operations these tests do not ask about use other filters.
	return false
}

// ipMatches matches "host:port" against a pattern whose host or port may
// be "*".
func ipMatches(pattern, addr string) bool {
	ph, pp, _ := strings.Cut(pattern, ":")
	h, port, _ := strings.Cut(addr, ":")
	return (ph == "*" || ph == h) && (pp == "*" || pp == port)
}

// fakeFS is a file system for fsrules.Compile: directories, and files with
// their content.
type fakeFS struct {
	dirs  map[string]bool
	files map[string]string
}

type fakeInfo struct {
	name string
	mode fs.FileMode
}

func (i fakeInfo) Name() string       { return i.name }
func (i fakeInfo) Size() int64        { return 0 }
func (i fakeInfo) Mode() fs.FileMode  { return i.mode }
func (i fakeInfo) ModTime() time.Time { return time.Time{} }
func (i fakeInfo) IsDir() bool        { return i.mode.IsDir() }
func (i fakeInfo) Sys() any           { return nil }

func (h *fakeFS) lstat(p string) (fs.FileInfo, error) {
	if h.dirs[p] {
		return fakeInfo{filepath.Base(p), fs.ModeDir}, nil
	}
	if _, ok := h.files[p]; ok {
		return fakeInfo{filepath.Base(p), 0}, nil
	}
	return nil, fs.ErrNotExist
}

func (h *fakeFS) eval(p string) (string, error) {
	if _, err := h.lstat(p); err != nil {
		return "", &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	return p, nil
}

func (h *fakeFS) readFile(p string) ([]byte, error) {
	c, ok := h.files[p]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return []byte(c), nil
}
