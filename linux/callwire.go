//go:build linux

package linux

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The command travels to the init (and from it to the limits stub) in a
// wire form of its own, not JSON: every field is a string that execve
// takes as a C string, so none can hold a NUL, and NUL-terminated fields
// carry any other byte unchanged (UTF-8 or not). Decoding it costs a few
// microseconds where JSON with base64 cost 80 (0.3 ms in a cold process,
// between a warm call's arrival and its start). The form:
//
//	sbxcall1 NUL  flags NUL  path NUL  dir NUL
//	N NUL  argv[0] NUL … argv[N-1] NUL
//	M NUL  env[0] NUL … env[M-1] NUL
//
// flags is "t" when the init reports its phases (InitCall.Trace), else
// empty; N and M are decimal. Nothing follows; the sender closes the pipe.
const callMagic = "sbxcall1"

// maxCall bounds a call's wire form (execve's own limit is far lower).
const maxCall = 64 << 20

// callReadSize is the first read of a call: a pipe's default capacity.
const callReadSize = 64 << 10

// errNUL is a command whose argument, variable or directory holds a NUL
// byte: no program can receive it.
var errNUL = errors.New("holds a NUL byte, which no program can receive")

// wireCall is what both wire forms carry.
type wireCall struct {
	path, dir string
	argv, env []string
	trace     bool
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (c InitCall) MarshalBinary() ([]byte, error) {
	return wireCall{dir: c.Dir, argv: c.Argv, env: c.Env, trace: c.Trace}.encode()
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (c *InitCall) UnmarshalBinary(b []byte) error {
	w, err := decodeCall(b)
	if err != nil {
		return err
	}
	if w.path != "" {
		return errors.New("call: a path, which the init's call does not carry")
	}
	*c = InitCall{Argv: w.argv, Env: w.env, Dir: w.dir, Trace: w.trace}
	return nil
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (c stubCall) MarshalBinary() ([]byte, error) {
	return wireCall{path: c.Path, dir: c.Dir, argv: c.Argv, env: c.Env}.encode()
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (c *stubCall) UnmarshalBinary(b []byte) error {
	w, err := decodeCall(b)
	if err != nil {
		return err
	}
	if w.trace {
		return errors.New("call: a trace flag, which the stub's call does not carry")
	}
	*c = stubCall{Path: w.path, Argv: w.argv, Env: w.env, Dir: w.dir}
	return nil
}

func (w wireCall) encode() ([]byte, error) {
	flags := ""
	if w.trace {
		flags = "t"
	}
	fields := append([]string{callMagic, flags, w.path, w.dir, strconv.Itoa(len(w.argv))}, w.argv...)
	fields = append(append(fields, strconv.Itoa(len(w.env))), w.env...)
	n := 0
	for i, f := range fields {
		if strings.IndexByte(f, 0) >= 0 {
			return nil, fmt.Errorf("the command's %s %w", fieldName(i, len(w.argv)), errNUL)
		}
		n += len(f) + 1
	}
	if n > maxCall {
		return nil, fmt.Errorf("the command is larger than %d MiB", maxCall>>20)
	}
	b := make([]byte, 0, n)
	for _, f := range fields {
		b = append(append(b, f...), 0)
	}
	return b, nil
}

// fieldName names field i of the encoded fields, for an error.
func fieldName(i, nargs int) string {
	switch {
	case i == 2:
		return "path"
	case i == 3:
		return "directory"
	case i > 4 && i <= 4+nargs:
		return fmt.Sprintf("argument %d", i-5)
	default:
		return "environment"
	}
}

// decodeCall reads a wire form: every field NUL-terminated, the counts
// canonical decimals that match, nothing after the last.
func decodeCall(b []byte) (wireCall, error) {
	var w wireCall
	if len(b) == 0 || b[len(b)-1] != 0 {
		return w, errors.New("call: not NUL-terminated")
	}
	// One copy: every field is a slice of it. s always ends with a NUL
	// or is empty, so a field is there as long as s is not empty.
	s := string(b)
	short := false
	next := func() string {
		if s == "" {
			short = true
			return ""
		}
		i := strings.IndexByte(s, 0)
		f := s[:i]
		s = s[i+1:]
		return f
	}
	if next() != callMagic {
		return w, errors.New("call: not a call")
	}
	switch next() {
	case "":
	case "t":
		w.trace = true
	default:
		return w, errors.New("call: unknown flags")
	}
	w.path, w.dir = next(), next()
	list := func() []string {
		f := next()
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || strconv.Itoa(n) != f || n > strings.Count(s, "\x00") {
			short = true
			return nil
		}
		l := make([]string, n)
		for i := range l {
			l[i] = next()
		}
		return l
	}
	w.argv = list()
	w.env = list()
	switch {
	case short:
		return wireCall{}, errors.New("call: cut short or a bad count")
	case s != "":
		return wireCall{}, errors.New("call: data after the environment")
	}
	return w, nil
}

// readCall reads a call's wire form to EOF from r into c; false with no
// error means the stream was empty (no command: a warm sandbox thrown
// away).
func readCall(r io.Reader, c interface{ UnmarshalBinary([]byte) error }) (bool, error) {
	// Room for a pipe's worth at once: a call is usually one read, where
	// io.ReadAll's 512-byte start took six for a common environment.
	var buf bytes.Buffer
	buf.Grow(callReadSize)
	_, err := buf.ReadFrom(io.LimitReader(r, maxCall+1))
	b := buf.Bytes()
	switch {
	case err != nil:
		return false, err
	case len(b) == 0:
		return false, nil
	case len(b) > maxCall:
		return false, errors.New("call: too large")
	}
	return true, c.UnmarshalBinary(b)
}

// writeCall writes c's wire form to w.
func writeCall(w io.Writer, c interface{ MarshalBinary() ([]byte, error) }) error {
	b, err := c.MarshalBinary()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
