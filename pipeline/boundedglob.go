package pipeline

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxGlobEntries bounds the directory entries the gate reads to expand
// one word's glob: a command can leave links that make a pattern's
// matches grow with every level (300 links to "." made */*/x 90,000
// paths, 7.9 s before the sandbox started).
const maxGlobEntries = 20_000

// boundedGlob is filepath.Glob reading at most budget directory entries
// in all; complete is false when the budget ran out (the matches are then
// not all known).
func boundedGlob(pattern string, budget int) (matches []string, complete bool) {
	b := &globBudget{left: budget}
	m := b.glob(pattern)
	return m, b.left >= 0
}

type globBudget struct{ left int }

func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

func (b *globBudget) glob(pattern string) []string {
	if !hasMeta(pattern) {
		if _, err := os.Lstat(pattern); err != nil {
			return nil
		}
		return []string{pattern}
	}
	dir, file := filepath.Split(pattern)
	dir = cleanGlobDir(dir)
	if !hasMeta(dir) {
		return b.dir(dir, file, nil)
	}
	if dir == pattern { // a pattern that does not shrink (filepath.Glob refuses it)
		return nil
	}
	var out []string
	for _, d := range b.glob(dir) {
		if b.left < 0 {
			return nil
		}
		out = b.dir(d, file, out)
	}
	return out
}

// dir adds the entries of dir that match pattern to matches.
func (b *globBudget) dir(dir, pattern string, matches []string) []string {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return matches
	}
	d, err := os.Open(dir)
	if err != nil {
		return matches
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	if b.left -= len(names); b.left < 0 {
		return matches
	}
	slices.Sort(names)
	for _, n := range names {
		if ok, err := filepath.Match(pattern, n); err == nil && ok {
			matches = append(matches, filepath.Join(dir, n))
		}
	}
	return matches
}

// cleanGlobDir is filepath.Glob's cleanGlobPath: the directory part
// without its trailing separator.
func cleanGlobDir(path string) string {
	switch path {
	case "":
		return "."
	case string(filepath.Separator):
		return path
	default:
		return path[:len(path)-1]
	}
}
