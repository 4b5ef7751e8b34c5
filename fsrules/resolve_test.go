package fsrules

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The compiler's remembering resolver gives what Host.resolve gives, for
// every path of up to three components over a tree of directories, files
// and links (relative, absolute, to a file, dangling, looping, upward),
// in any order the compile asks for them.
func TestResolveMatchesHost(t *testing.T) {
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "d", "e"), 0o755))
	must(os.WriteFile(filepath.Join(root, "d", "f"), nil, 0o644))
	for name, target := range map[string]string{
		"rel": "d", "abs": filepath.Join(root, "d", "e"), "dang": "missing", "loop": "loop",
		"up": "..", "tofile": "d/f", "chain": "rel/e", "d/back": "../d", "d/e/deep": "../../abs",
	} {
		must(os.Symlink(target, filepath.Join(root, name)))
	}
	names := []string{"d", "e", "f", "rel", "abs", "dang", "loop", "up", "tofile", "chain", "back", "deep", "missing", "..", "."}
	var paths []string
	var gen func(prefix string, depth int)
	gen = func(prefix string, depth int) {
		paths = append(paths, prefix)
		if depth == 3 {
			return
		}
		for _, n := range names {
			gen(prefix+"/"+n, depth+1)
		}
	}
	gen(root, 0)
	host := Host{Home: root}
	c := &compiler{host: host, pol: &Policy{}}
	// Backwards too, so deep paths come before their directories.
	for i := range paths {
		for _, p := range []string{paths[i], paths[len(paths)-1-i]} {
			want := fmt.Sprint(host.resolve(p))
			if got := fmt.Sprint(c.resolve(p)); got != want {
				t.Fatalf("%s: got %s, want %s", p, got, want)
			}
		}
	}
	if len(paths) < 3000 {
		t.Fatalf("only %d paths", len(paths))
	}
}
