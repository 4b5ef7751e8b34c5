package fsrules

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"time"
)

// Trace records every question [Compile] asks of the host through a
// [Host] (and a caller through Trace.Glob and Trace.Getenv), with its
// answer, so that the questions can be asked again later ([Trace.Same]).
// Compile reads nothing else (no clock, no environment, no file but
// through its Host), so when every answer is the same it would return the
// same policy: a long-lived session reuses its last policy then instead of
// compiling it again for each call.
//
// For that to hold, what the recorded Host returns is no more than what is
// compared: a file's name and mode (type and permission bits; no size,
// time or system data), a directory entry's name and type (its Info is an
// error), a file's whole content, a link's target, a glob's whole list,
// and each error's text and types. A Trace is not safe for concurrent
// recording; Same may run in several goroutines once recording is done.
type Trace struct {
	answers  map[question]answer
	order    []question
	unstable bool // a question was answered two ways during the compile
}

type question struct {
	op  byte // 'e'valSymlinks, 'l'stat, 'f'ile, 'd'ir, 'r'eadlink, 'g'lob, 'G'lob of a caller, 'v'ariable
	arg string
}

type answer struct {
	sum [sha256.Size]byte
	ask func() [sha256.Size]byte // asks again
}

// NewTrace returns an empty Trace.
func NewTrace() *Trace { return &Trace{answers: map[question]answer{}} }

// Same asks every recorded question again and reports whether each answer
// is the one recorded.
func (t *Trace) Same() bool {
	if t == nil || t.unstable {
		return false
	}
	for _, q := range t.order {
		a := t.answers[q]
		if a.ask() != a.sum {
			return false
		}
	}
	return true
}

func (t *Trace) note(q question, sum [sha256.Size]byte, ask func() [sha256.Size]byte) {
	if a, ok := t.answers[q]; ok {
		if a.sum != sum {
			t.unstable = true
		}
		return
	}
	t.answers[q] = answer{sum, ask}
	t.order = append(t.order, q)
}

// Host returns h with every question recorded in t.
func (t *Trace) Host(h Host) Host {
	return Host{
		Home: h.Home,
		EvalSymlinks: func(p string) (string, error) {
			r, err := h.evalSymlinks(p)
			t.note(question{'e', p}, sumOf(r, err), func() [sha256.Size]byte { return sumOf(h.evalSymlinks(p)) })
			return r, err
		},
		Lstat: func(p string) (fs.FileInfo, error) {
			fi, err := h.lstat(p)
			seen := seenOf(fi, err)
			t.note(question{'l', p}, sumOf(seen, err), func() [sha256.Size]byte {
				fi, err := h.lstat(p)
				return sumOf(seenOf(fi, err), err)
			})
			if err != nil {
				return nil, err
			}
			return seen, nil
		},
		Glob:     record(t, 'g', h.glob),
		ReadFile: record(t, 'f', h.readFile),
		ReadDir: func(p string) ([]fs.DirEntry, error) {
			ents, err := h.readDir(p)
			seen := seenEntries(ents)
			t.note(question{'d', p}, sumOf(seen, err), func() [sha256.Size]byte {
				ents, err := h.readDir(p)
				return sumOf(seenEntries(ents), err)
			})
			return seen, err
		},
		Readlink: record(t, 'r', h.readlink),
	}
}

// Glob returns glob (a file system glob of a caller that builds
// Compile's input) with its questions recorded in t.
func (t *Trace) Glob(glob func(string) ([]string, error)) func(string) ([]string, error) {
	return record(t, 'G', glob)
}

// Getenv returns get with its questions recorded in t (nil stays nil).
func (t *Trace) Getenv(get func(string) string) func(string) string {
	if get == nil {
		return nil
	}
	return func(name string) string {
		v := get(name)
		t.note(question{'v', name}, sumOf(v, nil), func() [sha256.Size]byte { return sumOf(get(name), nil) })
		return v
	}
}

func record[T any](t *Trace, op byte, f func(string) (T, error)) func(string) (T, error) {
	return func(p string) (T, error) {
		v, err := f(p)
		t.note(question{op, p}, sumOf(v, err), func() [sha256.Size]byte { return sumOf(f(p)) })
		return v, err
	}
}

// sumOf digests an answer: its value, and its error's text and the type
// of each error it wraps.
func sumOf(v any, err error) [sha256.Size]byte {
	h := sha256.New()
	put := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	switch v := v.(type) {
	case []byte:
		put(string(v))
	case string:
		put(v)
	case []string:
		for _, s := range v {
			put(s)
		}
	case []fs.DirEntry:
		for _, e := range v {
			put(e.Name())
			put(e.Type().String())
		}
	case *seenInfo:
		if v != nil {
			put(v.N)
			put(v.M.String())
		}
	default:
		put(fmt.Sprintf("%#v", v))
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		put(reflect.TypeOf(e).String())
	}
	if err != nil {
		put(err.Error())
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// seenInfo is what Compile learns of a file through a recorded Host.
type seenInfo struct {
	N string
	M fs.FileMode
}

func seenOf(fi fs.FileInfo, err error) *seenInfo {
	if err != nil || fi == nil {
		return nil
	}
	return &seenInfo{fi.Name(), fi.Mode()}
}

func (s *seenInfo) Name() string       { return s.N }
func (s *seenInfo) Size() int64        { return 0 }
func (s *seenInfo) Mode() fs.FileMode  { return s.M }
func (s *seenInfo) ModTime() time.Time { return time.Time{} }
func (s *seenInfo) IsDir() bool        { return s.M.IsDir() }
func (s *seenInfo) Sys() any           { return nil }

// seenEntry is what Compile learns of a directory entry through a recorded
// Host.
type seenEntry struct {
	N string
	T fs.FileMode
}

func seenEntries(ents []fs.DirEntry) []fs.DirEntry {
	out := make([]fs.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = &seenEntry{e.Name(), e.Type()}
	}
	return out
}

func (e *seenEntry) Name() string      { return e.N }
func (e *seenEntry) IsDir() bool       { return e.T.IsDir() }
func (e *seenEntry) Type() fs.FileMode { return e.T }
func (e *seenEntry) Info() (fs.FileInfo, error) {
	return nil, errors.New("fsrules: a recorded directory entry has no Info (Compile must not need it)")
}
