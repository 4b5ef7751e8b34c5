package darwin

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// maxGitLinkScan bounds the entries one git directory's scan for links
// looks at (objects/ too: a renamed directory could bring links anywhere).
const maxGitLinkScan = 500_000

// gitLinkDirs are the git directories a run's links are looked for in:
// each writable root's own .git, when it is a directory, and the git
// directories outside the workspace (a linked worktree's, a submodule's).
func gitLinkDirs(p *fsrules.Policy) []string {
	var out []string
	for _, r := range p.Writable {
		if !r.Dir {
			continue
		}
		if isGitDirRoot(r) {
			out = append(out, r.Path)
			continue
		}
		if fi, err := os.Lstat(filepath.Join(r.Path, ".git")); err == nil && fi.IsDir() {
			out = append(out, filepath.Join(r.Path, ".git"))
		}
	}
	return out
}

// linksIn maps each symbolic link in dirs to its target; cut names the
// directories whose scan stopped at maxGitLinkScan entries.
func linksIn(dirs []string) (links map[string]string, cut []string) {
	links = map[string]string{}
	for _, d := range dirs {
		n := 0
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if n++; n > maxGitLinkScan {
				cut = append(cut, d)
				return filepath.SkipAll
			}
			if e.Type()&fs.ModeSymlink != 0 {
				t, _ := os.Readlink(p)
				links[p] = t
			}
			return nil
		})
	}
	return links, cut
}

// removeNewGitLinks removes the symbolic links in dirs that were not in
// before (or pointed elsewhere), and says so. The profile refuses making
// a link in a git directory, but not renaming in a directory that holds
// one (it cannot tell a rename's destination from mkdir): git on the host
// would write through it (a reflog appended to ~/.zshenv). A link the
// user had before the run (hooks -> ../scripts/hooks) stays.
func removeNewGitLinks(dirs []string, before map[string]string) []string {
	after, cut := linksIn(dirs)
	var out []string
	for _, d := range cut {
		out = append(out, fmt.Sprintf("%s holds more than %d entries: symbolic links the command may have left beyond them were not looked for", d, maxGitLinkScan))
	}
	paths := make([]string, 0, len(after))
	for p := range after {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if t, ok := before[p]; ok && t == after[p] {
			continue
		}
		if err := os.Remove(p); err != nil {
			out = append(out, fmt.Sprintf("a symbolic link the command left in a git directory could not be removed: %s -> %s: %v", p, after[p], err))
			continue
		}
		out = append(out, fmt.Sprintf("removed a symbolic link the command left in a git directory (git on the host would write through it): %s -> %s", p, after[p]))
	}
	return out
}
