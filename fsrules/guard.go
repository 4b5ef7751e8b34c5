package fsrules

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// ChangeKind is what a change does to a host entry.
type ChangeKind uint8

// The kinds of change a run's merge applies.
const (
	Create ChangeKind = iota // a new entry
	Modify                   // new content, mode or times for an existing entry
	Delete                   // the entry is removed
)

func (k ChangeKind) String() string {
	switch k {
	case Create:
		return "create"
	case Modify:
		return "change"
	}
	return "delete"
}

// Change is one change a run would make to the host, as the merge sees it
// in the run's final tree.
type Change struct {
	// Path is the absolute host path; Root the writable root holding it.
	Path, Root string
	Kind       ChangeKind
	// Dir: the entry is (for a delete: was) a directory. NonDir: it is a
	// file, symbolic link or other non-directory (both false for a delete
	// whose type is unknown).
	Dir, NonDir bool
	// Git is the innermost git directory holding Path ("" when none).
	Git string
	// OldConfig and NewConfig are the host's and the command's content of
	// a git config file (Path is Git/config); OldConfig is nil when the
	// host has none. For Git/HEAD, NewConfig is the config the directory
	// has once the HEAD makes it a git directory.
	OldConfig, NewConfig []byte
	// NewIndex is the command's content of an index file at the top of
	// git directory Git (index, sharedindex.*; nil if it could not be
	// read), and IndexSHA256 whether the repository's object names are
	// SHA-256's: see [GitIndexSafe].
	NewIndex    []byte
	IndexSHA256 bool
	// GitHolds, for a new Git/HEAD, names an entry the directory already
	// holds that git would run or follow once it is a git directory (a
	// hook an earlier run left there), or is "".
	GitHolds string
	// RepoLinks are what the repositories nested in the writable root
	// around Path point git at ([RepoLinks]), as the merge found them.
	RepoLinks []Path
	// Link: the new entry is a symbolic link. Special: it is none of a
	// regular file, a directory and a link (a FIFO, a socket).
	Link, Special bool
}

// Refusal is a change the policy does not let reach the host.
type Refusal struct {
	Path string `json:"path"`
	Kind string `json:"change"`
	// Rule is the kind of rule: "sbx", "denyWrite", "denyRead" (a link
	// on a denied path's way), "protected", "home", "git".
	Rule string `json:"rule"`
	Why  string `json:"why"`
	// Saved is where the command's version was put aside ("" for a
	// deletion or a directory).
	Saved string `json:"saved,omitempty"`
}

// Check decides whether a change may reach the host. It returns nil when it
// may, and the refusal otherwise. The checks, in order: sbx's own files
// (never), denyWrite (never), an exact allowWrite of a protected path
// (allowed), protected home paths, protected names at any depth below the
// writable root, .git pointers and links, and git directories' contents.
func (p *Policy) Check(c *Change) *Refusal {
	refuse := func(rule, why string) *Refusal {
		return &Refusal{Path: c.Path, Kind: c.Kind.String(), Rule: rule, Why: why}
	}
	for _, s := range p.Self {
		if Within(c.Path, s.Path) || p.replacesAncestor(c, s.Path) {
			return refuse("sbx", "sbx's own state and settings ("+s.Path+") are never written from a sandbox")
		}
	}
	for _, d := range p.DenyWrite {
		if Within(c.Path, d.Path) || p.replacesAncestor(c, d.Path) {
			return refuse("denyWrite", "denyWrite "+d.Path+" ("+d.Origin+")")
		}
	}
	if r := p.checkNamed(c); r != nil {
		return r
	}
	if g := p.matchDenyGlob(c); g != nil {
		return refuse("denyWrite", "denyWrite "+g.Path+" ("+g.Origin+")")
	}
	for _, a := range p.ExactAllow {
		if Within(c.Path, a) {
			return nil
		}
	}
	if p.Home != "" {
		if Within(c.Path, filepath.Join(p.Home, ".local", "lib")) && pythonStartup(filepath.Base(c.Path)) && c.Kind != Delete {
			return refuse("home", "Python runs "+filepath.Base(c.Path)+" at every start from the user's site-packages")
		}
		for _, h := range homePersistence {
			hp := filepath.Join(p.Home, h)
			if Within(c.Path, hp) || p.replacesAncestor(c, hp) {
				return refuse("home", "~/"+h+" runs code or lets someone in; allowWrite that exact path to let it change")
			}
		}
		for _, l := range p.HomeLinks {
			if Within(c.Path, l.Path) || p.replacesAncestor(c, l.Path) {
				return refuse("home", l.Origin)
			}
		}
	}
	for _, l := range slices.Concat(p.GitLinks, c.RepoLinks) {
		if Within(c.Path, l.Path) || p.replacesAncestor(c, l.Path) {
			return refuse("git", l.Origin)
		}
	}
	for _, l := range p.ProtectedLinks {
		if Within(c.Path, l.Path) || p.replacesAncestor(c, l.Path) {
			return refuse("protected", l.Origin)
		}
	}
	if why := protectedBelow(c.Path, c.Root); why != "" {
		return refuse("protected", why)
	}
	if filepath.Base(c.Path) == ".git" && !c.Dir {
		return refuse("git", "a .git file or link sends git to another directory (its hooks and config)")
	}
	if c.Git == "" || c.Path == c.Git {
		return nil
	}
	rel := strings.TrimPrefix(c.Path, c.Git+"/")
	if c.Link && c.Kind != Delete {
		return refuse("git", "a symbolic link in a git directory: git on the host follows it (a reflog linked to ~/.bashrc)")
	}
	if c.Special && c.Kind != Delete {
		return refuse("git", "a FIFO or socket in a git directory: git on the host (and sbx reading its config) would wait on it for good")
	}
	if rel == "HEAD" && c.Kind != Delete && c.GitHolds != "" {
		return refuse("git", "this HEAD makes "+c.Git+" a git directory, and it holds "+c.GitHolds+", which git on the host would run or follow")
	}
	if rel == "HEAD" && c.Kind != Delete && c.NewConfig != nil {
		if ok, why := GitConfigChange(nil, c.NewConfig); !ok {
			return refuse("git", "this HEAD makes "+c.Git+" a git directory whose config "+why)
		}
	}
	if c.Kind == Delete && !c.Dir && !strings.Contains(rel, "/") && strings.HasSuffix(rel, ".lock") {
		return nil // a stale lock removed (rm .git/index.lock)
	}
	ok, config, why := GitEntry(rel, c.Dir)
	if config {
		if c.Kind == Delete {
			return refuse("git", "a git config file is never removed from a sandbox")
		}
		if ok, why := GitConfigChange(c.OldConfig, c.NewConfig); !ok {
			return refuse("git", why)
		}
		return nil
	}
	if !ok {
		return refuse("git", why)
	}
	if c.Kind != Delete && !c.Dir && IsGitIndexName(rel) {
		if ok, why := GitIndexSafe(c.NewIndex, c.IndexSHA256); !ok {
			return refuse("git", why+" (git on the host writes an index's paths as they stand)")
		}
	}
	return nil
}

// checkNamed refuses a change that would alter how a rule's path resolves
// (see [Named]): a link made at an entry it is resolved through, a change
// to an entry that is a link now, or a file where it needs a directory.
func (p *Policy) checkNamed(c *Change) *Refusal {
	for _, n := range p.Named {
		i := slices.Index(n.Entries, c.Path)
		if i < 0 {
			continue
		}
		why := ""
		switch {
		case slices.Contains(n.Links, c.Path):
			why = "; it is a symbolic link that the rule is resolved through: changed, it would move what the rule covers"
		case c.Link && c.Kind != Delete:
			why = "; a symbolic link there would move what the rule covers (or, dangling, stop every later run)"
		case c.NonDir && c.Kind != Delete && i < len(n.Entries)-1:
			why = "; the rule's path goes through a directory there: a file in its place would stop every later run"
		default:
			continue
		}
		return &Refusal{Path: c.Path, Kind: c.Kind.String(), Rule: n.List, Why: n.List + " " + n.Path + " (" + n.Origin + ")" + why}
	}
	return nil
}

// replacesAncestor reports whether c puts something other than a directory
// at (or removes) a strict ancestor of protected path p that lies inside the
// change's root: a link there would redirect p.
func (p *Policy) replacesAncestor(c *Change, prot string) bool {
	if c.Path == prot || !Within(prot, c.Path) || !Within(c.Path, c.Root) {
		return false
	}
	return c.Kind == Delete || !c.Dir
}

// matchDenyGlob returns the denyWrite pattern that the changed path, or
// one of its ancestors, matches, or names literally (a name holding
// wildcard characters, secret[1].txt, created during the run). (A deleted
// or replaced ancestor of a match is refused through DenyWrite, which holds
// every match at start; a match created during the run is a change of its
// own.)
func (p *Policy) matchDenyGlob(c *Change) *Path {
	for i, g := range p.DenyWriteGlobs {
		for q := c.Path; ; q = filepath.Dir(q) {
			if ok, _ := doublestar.Match(g.Path, q); ok || q == g.Path {
				return &p.DenyWriteGlobs[i]
			}
			if q == "/" || q == "." {
				break
			}
		}
	}
	return nil
}

// protectedBelow names the protected component of path below its writable
// root, or "".
func protectedBelow(path, root string) string {
	if !Within(path, root) || path == root {
		return ""
	}
	rel := strings.TrimPrefix(path, root+"/")
	if root == "/" {
		rel = strings.TrimPrefix(path, "/")
	}
	parent := filepath.Base(root)
	for _, comp := range strings.Split(rel, "/") {
		if prot, dir := isProtectedName(comp); prot {
			what := "a file that runs code later (shell start-up, tool or agent configuration)"
			if dir {
				what = "inside " + comp + "/, configuration that runs code (editor tasks, hooks, MCP servers)"
			}
			return comp + ": " + what + "; allowWrite that exact path to let it change"
		}
		for _, n := range protectedNested {
			if parent == n[0] && comp == n[1] {
				return n[0] + "/" + n[1] + ": configuration that runs code; allowWrite that exact path to let it change"
			}
		}
		parent = comp
	}
	return ""
}
