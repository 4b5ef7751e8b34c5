package fsrules

import (
	"strings"
	"testing"
)

// TestLooksLikeHead: every HEAD git accepts counts (git reads the first
// hash's worth of hex digits and ignores the rest: "<40 hex>x" made a
// directory a repository to git and not to sbx, whose hooks and config
// then arrived unchecked); errs toward yes.
func TestLooksLikeHead(t *testing.T) {
	hex40 := strings.Repeat("ab12", 10)
	tests := []struct {
		head string
		want bool
	}{
		{"ref: refs/heads/main\n", true},
		{"ref:refs/heads/x", true},
		{hex40, true},
		{hex40 + "\n", true},
		{strings.ToUpper(hex40), true},
		{hex40 + "x", true},
		{hex40 + " extra\n", true},
		{hex40 + hex40, true},
		{hex40 + "\r\n", true},
		{strings.Repeat("0", 64), true},
		{"\n" + hex40, true},
		{hex40[:39] + "g", false},
		{hex40[:39], false},
		{"", false},
		{"hello\n", false},
	}
	for _, tt := range tests {
		if got := LooksLikeHead([]byte(tt.head)); got != tt.want {
			t.Errorf("LooksLikeHead(%q) = %v, want %v", tt.head, got, tt.want)
		}
	}
}

func FuzzLooksLikeHead(f *testing.F) {
	f.Add([]byte("ref: refs/heads/main\n"))
	f.Add([]byte(strings.Repeat("a", 40) + "x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		// git's own rule (validate_headref) must imply ours.
		gitAccepts := strings.HasPrefix(string(b), "ref:") && strings.HasPrefix(strings.TrimLeft(string(b)[4:], " \t\n\v\f\r"), "refs/") ||
			len(b) >= 40 && strings.Trim(string(b[:40]), "0123456789abcdefABCDEF") == ""
		if gitAccepts && !LooksLikeHead(b) {
			t.Errorf("git accepts %q as HEAD, LooksLikeHead does not", b)
		}
	})
}
