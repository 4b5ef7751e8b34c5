//go:build linux

package linux

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Bytes that are not UTF-8 survive the trip to the init, and from it to the
// limits stub, unchanged; so do empty fields and lists.
func TestCallWireKeepsBytes(t *testing.T) {
	calls := []InitCall{
		{Argv: []string{"printf", "a\xffb"}, Env: []string{"X=\xfe\xfd"}, Dir: "/w/\xff", Trace: true},
		{Argv: []string{"true"}, Env: []string{}, Dir: "/"},
		{Argv: []string{"", "", "sbxcall1"}, Env: []string{"=", "A="}, Dir: ""},
	}
	for _, in := range calls {
		b, err := in.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var out InitCall
		if ok, err := readCall(bytes.NewReader(b), &out); !ok || err != nil || !reflect.DeepEqual(out, in) {
			t.Errorf("round trip of %#v: %v %v %#v", in, ok, err, out)
		}
		sc := stubCall{Path: "/bin/\xff", Argv: in.Argv, Env: in.Env, Dir: in.Dir}
		if b, err = sc.MarshalBinary(); err != nil {
			t.Fatal(err)
		}
		var sout stubCall
		if err := sout.UnmarshalBinary(b); err != nil || !reflect.DeepEqual(sout, sc) {
			t.Errorf("stub round trip: %v %#v", err, sout)
		}
	}
}

// A NUL byte cannot reach a program: the call is refused before it is
// sent, naming where the NUL is.
func TestCallWireRefusesNUL(t *testing.T) {
	tests := []struct {
		c    InitCall
		want string
	}{
		{InitCall{Argv: []string{"echo", "a\x00b"}, Dir: "/"}, "argument 1"},
		{InitCall{Argv: []string{"true"}, Env: []string{"A=\x00"}, Dir: "/"}, "environment"},
		{InitCall{Argv: []string{"true"}, Dir: "/\x00"}, "directory"},
	}
	for _, tt := range tests {
		_, err := tt.c.MarshalBinary()
		if !errors.Is(err, errNUL) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error naming %s", tt.c.Argv, err, tt.want)
		}
	}
}

// Broken forms are errors; an empty stream is no command.
func TestCallWireBroken(t *testing.T) {
	good, err := InitCall{Argv: []string{"true"}, Env: []string{"A=b"}, Dir: "/"}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{
		good[:len(good)-1],                                 // not NUL-terminated
		good[:len(good)-4],                                 // the last variable cut off
		append(bytes.Clone(good), 'x', 0),                  // data after
		[]byte("sbxcall2\x00\x00\x00/\x000\x000\x00"),      // another form
		[]byte("sbxcall1\x00q\x00\x00/\x000\x000\x00"),     // unknown flags
		[]byte("sbxcall1\x00\x00\x00/\x009\x00a\x000\x00"), // count past the end
		[]byte("sbxcall1\x00\x00\x00/\x00-1\x000\x00"),     // negative count
		[]byte("sbxcall1\x00\x00\x00/\x00"),                // no lists
	} {
		var c InitCall
		if ok, err := readCall(bytes.NewReader(b), &c); err == nil {
			t.Errorf("%q: accepted (%v) as %#v", b, ok, c)
		}
	}
	// A field the type does not carry is refused, not dropped.
	var ic InitCall
	if err := ic.UnmarshalBinary([]byte("sbxcall1\x00\x00/p\x00/\x001\x00true\x000\x00")); err == nil {
		t.Errorf("the init's call took a path: %#v", ic)
	}
	var sc stubCall
	if err := sc.UnmarshalBinary([]byte("sbxcall1\x00t\x00/p\x00/\x001\x00true\x000\x00")); err == nil {
		t.Errorf("the stub's call took a trace flag: %#v", sc)
	}
	var c InitCall
	if ok, err := readCall(bytes.NewReader(nil), &c); ok || err != nil {
		t.Errorf("empty stream: %v %v", ok, err)
	}
}

// The init reads whatever sbx's side of fd 3 holds; a broken stream is an
// error, never a panic, and what decodes encodes back to the same bytes.
func FuzzCallWire(f *testing.F) {
	good, _ := InitCall{Argv: []string{"true"}, Env: []string{"A=b"}, Dir: "/", Trace: true}.MarshalBinary()
	f.Add(good)
	f.Add([]byte("sbxcall1\x00\x00\x00/\x000\x000\x00"))
	f.Add([]byte("sbxcall1\x00\x00/p\x00/\x002\x00a\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := decodeCall(b)
		if err != nil {
			return
		}
		again, err := w.encode()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%q decoded to %#v, which encodes to %q (%v)", b, w, again, err)
		}
	})
}
