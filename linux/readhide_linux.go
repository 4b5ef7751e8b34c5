//go:build linux

package linux

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// readRoots returns the paths below which Landlock lets the command read
// files when the paths hidden must stay unreadable whatever the host puts
// there: in every directory above a hidden path, each entry that neither
// is one nor holds one, and the readable paths that hold none (a mask
// among them: the rule is on the mask's file, not on what the host may
// put at its path). A file
// the host makes or renames into such a directory during the run (over a
// mask, which the kernel then detaches) is below no root: unreadable.
// Symbolic links are left out: what one points to is read through its
// own path. Paths are taken as the sandbox sees them (called in it).
func readRoots(hidden, readable []string) ([]string, error) {
	above := map[string]bool{}
	isHidden := map[string]bool{}
	for _, h := range hidden {
		h = resolvedParent(h)
		isHidden[h] = true
		for d := filepath.Dir(h); !above[d]; d = filepath.Dir(d) {
			above[d] = true
			if d == "/" {
				break
			}
		}
	}
	var roots []string
	for _, r := range readable {
		if r = resolvedParent(r); !above[r] {
			roots = append(roots, r)
		}
	}
	for d := range above {
		entries, err := os.ReadDir(d)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			// What the host makes there later is below no root; so is
			// what the caller may not list (nor, most likely, read).
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			p := filepath.Join(d, e.Name())
			if e.Type() != fs.ModeSymlink && !above[p] && !isHidden[p] {
				roots = append(roots, p)
			}
		}
	}
	slices.Sort(roots)
	return roots, nil
}

// resolvedParent is p with the symbolic links of its directory resolved
// (the part that exists), as the mounts at p were made.
func resolvedParent(p string) string {
	dir, base := filepath.Split(filepath.Clean(p))
	if base == "" {
		return "/"
	}
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(r, base)
	}
	return filepath.Join(resolvedParent(dir), base)
}
