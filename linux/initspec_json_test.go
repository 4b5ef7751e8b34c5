//go:build linux

package linux

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Bytes that are not UTF-8 survive the trip to the init, and from it to the
// limits stub, unchanged.
func TestInitCallKeepsBytes(t *testing.T) {
	in := InitCall{Argv: []string{"printf", "a\xffb"}, Env: []string{"X=\xfe\xfd"}, Dir: "/w/\xff", Trace: true}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out InitCall
	if err := json.Unmarshal(b, &out); err != nil || !reflect.DeepEqual(out, in) {
		t.Errorf("round trip: %v %#v", err, out)
	}
	sc := stubCall{Path: "/bin/\xff", Argv: in.Argv, Env: in.Env, Dir: in.Dir}
	if b, err = json.Marshal(sc); err != nil {
		t.Fatal(err)
	}
	var sout stubCall
	if err := json.Unmarshal(b, &sout); err != nil || !reflect.DeepEqual(sout, sc) {
		t.Errorf("stub round trip: %v %#v", err, sout)
	}
}

// The init reads whatever sbx's side of fd 3 holds; a hostile or broken
// stream is an error, never a panic.
func FuzzInitCall(f *testing.F) {
	f.Add([]byte(`{"argv":["dHJ1ZQ=="],"env":[],"dir":"Lw=="}`))
	f.Add([]byte(`{"argv":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c InitCall
		_ = json.Unmarshal(b, &c)
		var s stubCall
		_ = json.Unmarshal(b, &s)
	})
}
