package pipeline

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// boundedGlob matches as filepath.Glob does within its budget, and says
// when the budget ran out: links a command left (300 links to ".") made
// */*/x expand to 90,000 paths.
func TestBoundedGlob(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"a/x.txt", "a/b/x.txt", "c/y.txt", "x.txt", "[lit]/x.txt"} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		os.WriteFile(filepath.Join(root, p), nil, 0o644)
	}
	for _, pat := range []string{"*/x.txt", "*/*/x.txt", "*.txt", "?/y.txt", "[ac]/*", "a/b/x.txt", "nope/*", "\\[lit]/*"} {
		want, _ := filepath.Glob(filepath.Join(root, pat))
		got, complete := boundedGlob(filepath.Join(root, pat), maxGlobEntries)
		if !complete || !slices.Equal(got, want) {
			t.Errorf("%s: %v (complete %v), filepath.Glob %v", pat, got, complete, want)
		}
	}
	farm := t.TempDir()
	for i := range 300 {
		if err := os.Symlink(".", filepath.Join(farm, "l"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	m, complete := boundedGlob(filepath.Join(farm, "*/*/x"), maxGlobEntries)
	if complete || len(m) != 0 {
		t.Errorf("a link farm: %d matches, complete %v; want the budget to run out", len(m), complete)
	}
	if m, complete := boundedGlob(filepath.Join(farm, "l1/l*"), maxGlobEntries); !complete || len(m) != 300 {
		t.Errorf("one directory of the farm: %d matches, complete %v", len(m), complete)
	}
}
