//go:build linux

package linux

import (
	"strings"
	"testing"
)

func TestBwrapVersion(t *testing.T) {
	for _, tc := range []struct {
		out    string
		ok     bool
		detail string
	}{
		{"bubblewrap 0.4.1", false, "needs 0.5.0"},
		{"bubblewrap 0.5.0", true, "needs 0.7.0"},
		{"bubblewrap 0.6.1", true, "needs 0.7.0"},
		{"bubblewrap 0.8.0", true, "(bubblewrap 0.8.0)"},
		{"bubblewrap 1.0.0", true, "(bubblewrap 1.0.0)"},
		{"something else", false, "unrecognised"},
	} {
		c := bwrapVersion(Check{Name: "bubblewrap"}, "/usr/bin/bwrap", tc.out)
		if c.OK != tc.ok || !strings.Contains(c.Detail, tc.detail) || (!c.OK && c.Fix == "") {
			t.Errorf("%q: %+v", tc.out, c)
		}
	}
}
