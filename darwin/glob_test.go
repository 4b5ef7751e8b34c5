package darwin

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

func TestGlobRegex(t *testing.T) {
	tests := []struct {
		glob      string
		match, no []string
	}{
		{"/w/**/.env", []string{"/w/.env", "/w/a/b/.env", "/w/a/.env/inside"}, []string{"/w/.envrc", "/x/.env", "/w/a.env"}},
		{"/w/conf/*.yaml", []string{"/w/conf/a.yaml", "/w/conf/.yaml", "/w/conf/a.yaml/x"}, []string{"/w/conf/a/b.yaml", "/w/conf/a.yml"}},
		{"/w/f?.txt", []string{"/w/f1.txt"}, []string{"/w/f12.txt", "/w/f/.txt"}},
		{"/w/{a,b}/x", []string{"/w/a/x", "/w/b/x"}, []string{"/w/c/x", "/w/a,b/x"}},
		{"/w/[!a]x", []string{"/w/bx"}, []string{"/w/ax"}},
		{"/w/a.b+(c)", []string{"/w/a.b+(c)"}, []string{"/w/aXb+(c)", "/w/a.bb(c)"}},
		{"/w/é*", []string{"/w/été"}, []string{"/w/ete"}},
		// Either case: APFS folds it, and a new name is matched as written.
		{"/w/[a-c]x.PEM", []string{"/w/Bx.pem", "/W/bX.Pem"}, []string{"/w/dx.pem", "/w/Dx.pem"}},
		{"/w/[!a]x", []string{"/w/bX"}, []string{"/w/AX"}},
		// A comma is an alternative only inside real braces: an escaped
		// brace once counted, making the rest of the pattern a second,
		// unanchored alternative.
		{`/w/\{,x`, []string{"/w/{,x"}, []string{"/w/ax", "/other/x"}},
		{"/w/[{],x", []string{"/w/{,x"}, []string{"/w/ax", "/q/x"}},
	}
	for _, tt := range tests {
		re := regexp.MustCompile("(?s)" + globRegex(tt.glob))
		for _, p := range tt.match {
			if !re.MatchString(p) {
				t.Errorf("%s (%s) does not match %s", tt.glob, re, p)
			}
		}
		for _, p := range tt.no {
			if re.MatchString(p) {
				t.Errorf("%s (%s) matches %s", tt.glob, re, p)
			}
		}
	}
}

// FuzzGlobRegex checks that the profile's regex denies at least what the
// pattern matches (the merge on Linux uses doublestar itself).
func FuzzGlobRegex(f *testing.F) {
	for _, s := range [][2]string{{"/w/**/.env", "/w/a/.env"}, {"/w/*.y?ml", "/w/a.yaml"}, {"/w/{a,b}/[!c]", "/w/a/d"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, glob, path string) {
		// Policies hold absolute, clean patterns (no trailing "/") and paths.
		if !strings.HasPrefix(glob, "/") || strings.HasSuffix(glob, "/") || path != filepath.Clean(path) || !filepath.IsAbs(path) || !doublestar.ValidatePattern(glob) {
			return
		}
		ok, err := doublestar.Match(glob, path)
		if err != nil || !ok {
			return
		}
		re, err := regexp.Compile("(?s)" + globRegex(glob)) // POSIX: . matches a newline
		if err != nil {
			t.Skipf("not an RE2 regex (%v); sandbox-exec's dialect differs", err)
		}
		if !re.MatchString(path) {
			t.Errorf("%q matches %q but its regex %s does not", glob, path, re)
		}
	})
}
