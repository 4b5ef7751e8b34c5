//go:build linux

package linux

import (
	"encoding/json"
	"slices"
	"testing"
)

// Bytes that are not UTF-8 survive the trip to the init unchanged.
func TestInitSpecKeepsBytes(t *testing.T) {
	in := InitSpec{Argv: []string{"printf", "a\xffb"}, Env: []string{"X=\xfe\xfd"}, Dir: "/w/\xff", Writable: []string{"/w"}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out InitSpec
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Argv, in.Argv) || !slices.Equal(out.Env, in.Env) || out.Dir != in.Dir || !slices.Equal(out.Writable, in.Writable) {
		t.Errorf("round trip: %q %q %q %q", out.Argv, out.Env, out.Dir, out.Writable)
	}
}
