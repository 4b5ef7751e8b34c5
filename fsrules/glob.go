package fsrules

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// globFollow expands an absolute pattern as doublestar.FilepathGlob does,
// following symbolic links to directories (a deny pattern covers a file
// reached through a linked directory), but walking each directory (by its
// real path) once: two links to ".." a command left in the
// workspace made doublestar's walk grow exponentially, every later call's
// policy compile with it. A pattern without "**" is walked no deeper than
// its segments reach.
func globFollow(pattern string) ([]string, error) {
	if !doublestar.ValidatePathPattern(pattern) {
		return nil, doublestar.ErrBadPattern
	}
	base, rest := doublestar.SplitPattern(filepath.ToSlash(pattern))
	depth := -1 // unbounded
	if !strings.Contains(rest, "**") {
		depth = strings.Count(rest, "/") + 1
	}
	var out []string
	seen := map[string]bool{}
	var walk func(dir string, level int)
	walk = func(dir string, level int) {
		real, err := filepath.EvalSymlinks(dir)
		if err != nil || seen[real] {
			return
		}
		seen[real] = true
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			if doublestar.PathMatchUnvalidated(pattern, p) {
				out = append(out, p)
			}
			if depth >= 0 && level+1 >= depth {
				continue
			}
			isDir := e.IsDir()
			if e.Type()&os.ModeSymlink != 0 {
				fi, err := os.Stat(p)
				isDir = err == nil && fi.IsDir()
			}
			if isDir {
				walk(p, level+1)
			}
		}
	}
	walk(filepath.FromSlash(base), 0)
	return out, nil
}
