package darwin

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/internal/regular"
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

// gitIndexes are the index files of the git directories dirs and of the
// git directories one level inside their worktrees/ and modules/, each
// with its size and modification time.
func gitIndexes(dirs []string) map[string][2]int64 {
	out := map[string][2]int64{}
	for _, d := range dirs {
		for _, pattern := range []string{"index", "index.lock", "sharedindex.*", "worktrees/*/index", "worktrees/*/index.lock",
			"modules/*/index", "modules/*/index.lock", "modules/*/sharedindex.*"} {
			matches, _ := filepath.Glob(filepath.Join(d, pattern))
			for _, m := range matches {
				if fi, err := os.Lstat(m); err == nil && fi.Mode().IsRegular() {
					out[m] = [2]int64{fi.Size(), fi.ModTime().UnixNano()}
				}
			}
		}
	}
	return out
}

// setAsideBadIndexes checks each index in dirs that is new or changed
// since before (see [fsrules.GitIndexSafe]: git trusts the index it
// reads, and the host's `git restore .` writes its paths as they stand)
// and renames one naming a path git never writes to NAME.sbx-refused,
// saying so. The profile cannot look inside what the command writes.
func setAsideBadIndexes(dirs []string, before map[string][2]int64) []string {
	var out []string
	after := gitIndexes(dirs)
	paths := slices.Sorted(maps.Keys(after))
	for _, p := range paths {
		if st, ok := before[p]; ok && st == after[p] {
			continue
		}
		data, err := regular.Read(p, fsrules.MaxGitIndex)
		why := ""
		if err != nil {
			why = "it cannot be read: " + err.Error()
		} else if ok, w := fsrules.GitIndexSafe(data, gitUsesSHA256(filepath.Dir(p))); !ok {
			why = w
		}
		if why == "" {
			continue
		}
		if err := os.Rename(p, p+".sbx-refused"); err != nil {
			out = append(out, fmt.Sprintf("the git index %s cannot be checked or is unsafe (%s), and could not be set aside: %v; do not run git there before removing it", p, why, err))
			continue
		}
		out = append(out, fmt.Sprintf("set aside the git index the command left at %s as %s.sbx-refused: %s (git on the host would write its paths as they stand); `git reset` there rebuilds the index from HEAD", p, p, why))
	}
	return out
}

// gitUsesSHA256 reports whether the git directory g's repository format
// makes its object names SHA-256's: its common directory's config (a
// linked worktree's commondir), as git reads it.
func gitUsesSHA256(g string) bool {
	if cd, err := fsrules.ReadRegular(filepath.Join(g, "commondir")); err == nil {
		common := strings.TrimSpace(string(cd))
		if !filepath.IsAbs(common) {
			common = filepath.Join(g, common)
		}
		g = common
	}
	data, err := fsrules.ReadRegular(filepath.Join(g, "config"))
	return err == nil && fsrules.GitUsesSHA256(data)
}
