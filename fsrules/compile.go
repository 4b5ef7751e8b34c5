// Package fsrules compiles filesystem settings into a policy of plain data:
// absolute, clean, symlink-resolved paths that a backend only has to render
// (a bubblewrap argv, an SBPL profile).
//
// Path anchors follow Claude Code's sandbox settings: "/abs" and "//abs" are
// absolute, "~/p" is under the home directory, "./p" and bare "p" are
// relative to the rule's base directory (the project root for project files
// and flags, the settings file's directory otherwise). A trailing "/" or
// "/**" is dropped.
//
// Precedence: denyWrite wins over allowWrite wherever they overlap (a writable
// root inside a denyWrite path stays read-only); allowRead re-opens a path
// inside a denyRead; writable roots are readable. Files that give code
// execution later ([ProtectedFiles], [ProtectedDirs], git hooks and config)
// stay read-only inside writable roots unless an allowWrite names that exact
// path.
package fsrules

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Rule is one path from a settings list or a flag.
type Rule struct {
	Pattern string
	BaseDir string // anchors relative patterns
	Origin  string // where it came from, e.g. "/etc/sbx/managed-settings.json:3:5"
}

// Input is what [Compile] works from.
type Input struct {
	// Workspace is the project root: writable by default.
	Workspace                                  string
	AllowWrite, DenyWrite, DenyRead, AllowRead []Rule
}

// Host gives [Compile] access to the machine, so it can be tested with a
// fake file system.
type Host struct {
	Home string
	// EvalSymlinks resolves symbolic links; nil means filepath.EvalSymlinks.
	EvalSymlinks func(string) (string, error)
	// Lstat describes a path; nil means os.Lstat.
	Lstat func(string) (fs.FileInfo, error)
	// Glob expands a deny pattern containing wildcards; nil means
	// doublestar.FilepathGlob.
	Glob func(pattern string) ([]string, error)
	// ReadFile reads a small file (a .git pointer); nil means os.ReadFile.
	ReadFile func(string) ([]byte, error)
}

// Path is one compiled path.
type Path struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	Dir    bool   `json:"dir,omitempty"`
	Origin string `json:"origin"`
}

// Policy is the compiled filesystem policy. The whole file system is
// readable and read-only except as listed here.
type Policy struct {
	Workspace string `json:"workspace"`
	// Writable roots, from the workspace and allowWrite. Each exists.
	Writable []Path `json:"writable"`
	// ExactAllow are allowWrite paths that name a protected path exactly:
	// they stay writable.
	ExactAllow []string `json:"exactAllow,omitempty"`
	DenyWrite  []Path   `json:"denyWrite,omitempty"`
	DenyRead   []Path   `json:"denyRead,omitempty"`
	AllowRead  []Path   `json:"allowRead,omitempty"`
	Warnings   []string `json:"warnings,omitempty"`
}

// PatternError is returned for a path that cannot be compiled.
type PatternError struct {
	Rule Rule
	Msg  string
}

func (e *PatternError) Error() string {
	return fmt.Sprintf("%s: %q: %s", e.Rule.Origin, e.Rule.Pattern, e.Msg)
}

func (h *Host) evalSymlinks(p string) (string, error) {
	if h.EvalSymlinks != nil {
		return h.EvalSymlinks(p)
	}
	return filepath.EvalSymlinks(p)
}

func (h *Host) lstat(p string) (fs.FileInfo, error) {
	if h.Lstat != nil {
		return h.Lstat(p)
	}
	return os.Lstat(p)
}

func (h *Host) readFile(p string) ([]byte, error) {
	if h.ReadFile != nil {
		return h.ReadFile(p)
	}
	return os.ReadFile(p)
}

func (h *Host) glob(p string) ([]string, error) {
	if h.Glob != nil {
		return h.Glob(p)
	}
	return doublestar.FilepathGlob(p)
}

// Anchor turns a settings pattern into an absolute, clean path (symlinks not
// yet resolved).
func Anchor(pattern, baseDir, home string) (string, error) {
	p := pattern
	if p == "" {
		return "", errors.New("empty path")
	}
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	for _, suffix := range []string{"/**", "/"} {
		if len(p) > len(suffix) && strings.HasSuffix(p, suffix) {
			p = strings.TrimSuffix(p, suffix)
		}
	}
	switch {
	case strings.HasPrefix(p, "//"):
		p = "/" + strings.TrimLeft(p, "/")
	case strings.HasPrefix(p, "/"):
	case p == "~":
		p = home
	case strings.HasPrefix(p, "~/"):
		p = filepath.Join(home, p[2:])
	case strings.HasPrefix(p, "~"):
		return "", errors.New("~user paths are not supported; write the absolute path")
	default:
		if !filepath.IsAbs(baseDir) {
			return "", fmt.Errorf("relative path with no absolute base directory (%q)", baseDir)
		}
		p = filepath.Join(baseDir, p)
	}
	return filepath.Clean(p), nil
}

// resolve returns p with symlinks resolved in its longest existing prefix,
// and whether p itself exists.
func (h *Host) resolve(p string) (string, bool, error) {
	r, err := h.evalSymlinks(p)
	if err == nil {
		return r, true, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	// Walk up to the longest existing prefix. A dangling symlink on the way
	// is followed by hand so a later creation through it is covered.
	dir, rest := filepath.Dir(p), filepath.Base(p)
	if dir == p {
		return p, false, nil
	}
	if fi, lerr := h.lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return p, false, fmt.Errorf("dangling symbolic link %s: remove it or name its target", p)
	}
	rd, _, err := h.resolve(dir)
	if err != nil {
		return "", false, err
	}
	return filepath.Join(rd, rest), false, nil
}

func hasGlob(p string) bool { return strings.ContainsAny(p, "*?[{") }

// compileList anchors and resolves a list of rules. Patterns with wildcards
// are expanded to what exists now when expand is set, and skipped with a
// warning otherwise.
func (c *compiler) compileList(rules []Rule, expand bool, list string) ([]Path, error) {
	var out []Path
	for _, r := range rules {
		abs, err := Anchor(r.Pattern, r.BaseDir, c.host.Home)
		if err != nil {
			return nil, &PatternError{Rule: r, Msg: err.Error()}
		}
		paths := []string{abs}
		if hasGlob(abs) {
			if !expand {
				c.warnf("%s: %s %q has wildcards, which Linux write lists cannot hold; ignored", r.Origin, list, r.Pattern)
				continue
			}
			paths, err = c.host.glob(abs)
			if err != nil {
				return nil, &PatternError{Rule: r, Msg: "bad pattern: " + err.Error()}
			}
			slices.Sort(paths)
			c.warnf("%s: %s %q has wildcards: it covers the %d paths that exist now, not paths created later", r.Origin, list, r.Pattern, len(paths))
		}
		for _, p := range paths {
			rp, exists, err := c.host.resolve(p)
			if err != nil {
				return nil, &PatternError{Rule: r, Msg: err.Error()}
			}
			cp := Path{Path: rp, Exists: exists, Origin: r.Origin}
			if exists {
				if fi, err := c.host.lstat(rp); err == nil {
					cp.Dir = fi.IsDir()
				}
			}
			out = append(out, cp)
		}
	}
	return out, nil
}

type compiler struct {
	host Host
	pol  *Policy
}

func (c *compiler) warnf(format string, args ...any) {
	c.pol.Warnings = append(c.pol.Warnings, fmt.Sprintf(format, args...))
}

// Within reports whether p is base or lies under it.
func Within(p, base string) bool {
	if base == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == base || strings.HasPrefix(p, base+"/")
}

// Compile turns settings and flags into a [Policy].
func Compile(in Input, host Host) (*Policy, error) {
	if !filepath.IsAbs(in.Workspace) {
		return nil, fmt.Errorf("fsrules: workspace %q is not absolute", in.Workspace)
	}
	if !filepath.IsAbs(host.Home) {
		return nil, fmt.Errorf("fsrules: home %q is not absolute", host.Home)
	}
	pol := &Policy{}
	c := &compiler{host: host, pol: pol}
	ws, exists, err := host.resolve(filepath.Clean(in.Workspace))
	if err != nil || !exists {
		return nil, fmt.Errorf("fsrules: workspace %s: does not exist", in.Workspace)
	}
	pol.Workspace = ws

	allowWrite, err := c.compileList(in.AllowWrite, false, "allowWrite")
	if err != nil {
		return nil, err
	}
	if pol.DenyWrite, err = c.compileList(in.DenyWrite, true, "denyWrite"); err != nil {
		return nil, err
	}
	if pol.DenyRead, err = c.compileList(in.DenyRead, true, "denyRead"); err != nil {
		return nil, err
	}
	if pol.AllowRead, err = c.compileList(in.AllowRead, false, "allowRead"); err != nil {
		return nil, err
	}
	pol.DenyRead = slices.DeleteFunc(pol.DenyRead, func(p Path) bool { return !p.Exists })
	// An allowRead naming a denied path itself re-opens it (that is how the
	// default credential-file denies are lifted one by one).
	pol.DenyRead = slices.DeleteFunc(pol.DenyRead, func(d Path) bool {
		return slices.ContainsFunc(pol.AllowRead, func(a Path) bool { return a.Path == d.Path })
	})
	pol.AllowRead = slices.DeleteFunc(pol.AllowRead, func(p Path) bool {
		if !p.Exists {
			c.warnf("%s: allowRead %s does not exist; ignored", p.Origin, p.Path)
		}
		return !p.Exists
	})

	writable := append([]Path{{Path: ws, Exists: true, Dir: true, Origin: "workspace"}}, allowWrite...)
	writable = append(writable, c.gitDirsOutside(ws)...)
	for _, w := range writable {
		if !w.Exists {
			c.warnf("%s: allowWrite %s does not exist; ignored", w.Origin, w.Path)
			continue
		}
		if d := coveringDeny(w.Path, pol.DenyWrite); d != nil {
			c.warnf("%s: allowWrite %s lies inside denyWrite %s (%s); it stays read-only", w.Origin, w.Path, d.Path, d.Origin)
			continue
		}
		if isProtectedPath(w.Path) {
			pol.ExactAllow = append(pol.ExactAllow, w.Path)
		}
		if slices.ContainsFunc(pol.Writable, func(p Path) bool { return p.Path == w.Path }) {
			continue
		}
		pol.Writable = append(pol.Writable, w)
	}
	// Deny paths outside every writable root are read-only already.
	pol.DenyWrite = slices.DeleteFunc(pol.DenyWrite, func(d Path) bool {
		return !slices.ContainsFunc(pol.Writable, func(w Path) bool { return Within(d.Path, w.Path) })
	})
	pol.DenyWrite = dedupe(pol.DenyWrite)
	pol.DenyRead = dedupe(pol.DenyRead)
	pol.AllowRead = dedupe(pol.AllowRead)
	return pol, nil
}

func coveringDeny(p string, deny []Path) *Path {
	for i := range deny {
		if Within(p, deny[i].Path) {
			return &deny[i]
		}
	}
	return nil
}

// isProtectedPath reports whether p names a protected entry itself.
func isProtectedPath(p string) bool {
	base := filepath.Base(p)
	if ok, _ := isProtectedName(base); ok {
		return true
	}
	parent := filepath.Base(filepath.Dir(p))
	if parent == ".git" && slices.Contains(gitDirProtected, base) {
		return true
	}
	for _, n := range protectedNested {
		if parent == n[0] && base == n[1] {
			return true
		}
	}
	return false
}

func dedupe(ps []Path) []Path {
	seen := map[string]bool{}
	return slices.DeleteFunc(ps, func(p Path) bool {
		if seen[p.Path] {
			return true
		}
		seen[p.Path] = true
		return false
	})
}

// gitDirsOutside returns the git directory and common directory of a
// workspace whose .git is a pointer file (a linked worktree, a submodule)
// to a directory outside the workspace: git must write there (index,
// objects, refs) for commits to work. Their hooks and config stay
// read-only like any git directory's.
func (c *compiler) gitDirsOutside(ws string) []Path {
	data, err := c.host.readFile(filepath.Join(ws, ".git"))
	if err != nil {
		return nil // no .git, or a directory: nothing outside
	}
	line, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
	if !ok {
		return nil
	}
	gitDir := strings.TrimSpace(line)
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(ws, gitDir)
	}
	var out []Path
	add := func(p string) {
		rp, exists, err := c.host.resolve(filepath.Clean(p))
		if err != nil || !exists || Within(rp, ws) {
			return
		}
		out = append(out, Path{Path: rp, Exists: true, Dir: true, Origin: "git directory of the workspace (" + filepath.Join(ws, ".git") + ")"})
	}
	add(gitDir)
	if common, err := c.host.readFile(filepath.Join(gitDir, "commondir")); err == nil {
		cd := strings.TrimSpace(string(common))
		if !filepath.IsAbs(cd) {
			cd = filepath.Join(gitDir, cd)
		}
		add(cd)
	}
	return out
}
