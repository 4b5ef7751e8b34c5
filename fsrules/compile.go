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
// execution later ([ProtectedFiles], [ProtectedDirs], [HomePersistence], git
// hooks and config) never change on the host unless an allowWrite names that
// exact path, and sbx's own files never do: [Policy.Check] decides each
// change a run would make.
package fsrules

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sbx-sandbox/sbx/internal/regular"
)

// Rule is one path from a settings list or a flag.
type Rule struct {
	Pattern string
	BaseDir string // anchors relative patterns
	Origin  string // where it came from, e.g. "/etc/sbx/managed-settings.json:3:5"
	// Shallow, for a Self directory, skips looking for links inside it
	// (sbx's state directory: nothing in it is read as settings).
	Shallow bool
	// Optional marks sbx's own default rules: a dangling link on the way
	// (a ~/.config that points nowhere) is taken as the path's absence,
	// not as an error that stops every run.
	Optional bool
}

// Input is what [Compile] works from.
type Input struct {
	// Workspace is the project root: writable by default.
	Workspace                                  string
	AllowWrite, DenyWrite, DenyRead, AllowRead []Rule
	// DenyReadNames are denyRead patterns given by directory and name
	// pattern (sbx's .env* defaults); denyRead rules whose wildcards are
	// all in their last part are added to them (see Policy.DenyReadNames).
	DenyReadNames []NamePattern
	// Self are sbx's own files (its state, every settings file it or
	// Claude Code reads): never written from a sandbox, whatever allowWrite
	// says.
	Self []Rule
	// Caches are sbx-owned directories (absolute, existing) the sandbox
	// writes directly, without the merge: the toolchains' caches of
	// sandboxed runs, shared by them and never with the host's.
	Caches []string
	// HomeRoot lets the home directory (or an ancestor of it) be a
	// writable root; without it such a root is an error. / never is.
	HomeRoot bool
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
	// globFollow (doublestar's matching, links followed, each directory
	// walked once).
	Glob func(pattern string) ([]string, error)
	// ReadFile reads a small file (a .git pointer, a git config); nil
	// means ReadRegular.
	ReadFile func(string) ([]byte, error)
	// ReadDir lists a directory (the home's, for links); nil means
	// os.ReadDir.
	ReadDir func(string) ([]fs.DirEntry, error)
	// Readlink reads a symbolic link's target; nil means os.Readlink.
	Readlink func(string) (string, error)
}

// NamePattern is the entries of the directory Dir whose names match the
// doublestar pattern Name (one path element).
type NamePattern struct {
	Dir    string `json:"dir"`
	Name   string `json:"name"`
	Origin string `json:"origin"`
}

// Path is one compiled path.
type Path struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	Dir    bool   `json:"dir,omitempty"`
	Origin string `json:"origin"`
}

// Named is a path of a filesystem rule (denyRead, denyWrite, allowRead,
// allowWrite) as the rule names it, or a home persistence path reached
// through a link. The rule applies to what the path resolves to when sbx
// starts, so the way it resolves must not change from a sandbox:
// [Policy.Check] refuses a symbolic link made at any entry the path is
// resolved through, any change to one that is a link now (re-pointed,
// removed or replaced, it would move what the rule covers, or, left
// dangling, stop every later run), and a file where a directory on the
// way must be (every later run would stop).
type Named struct {
	List   string `json:"list"` // denyRead, denyWrite, allowRead, allowWrite, home, git or protected
	Path   string `json:"path"` // absolute, as written
	Origin string `json:"origin"`
	// Entries are the host paths of the entries Path is resolved through
	// that lie in a writable root (each entry's directory resolved), in
	// order; Links are those that are symbolic links at start.
	Entries []string `json:"entries"`
	Links   []string `json:"links,omitempty"`
}

// Policy is the compiled filesystem policy. The whole file system is
// readable and read-only except as listed here.
type Policy struct {
	Workspace string `json:"workspace"`
	// Home is the home directory: its persistence paths are protected.
	Home string `json:"home"`
	// Writable roots, from the workspace and allowWrite. Each exists.
	Writable []Path `json:"writable"`
	// ExactAllow are allowWrite paths that name a protected path exactly:
	// they stay writable.
	ExactAllow []string `json:"exactAllow,omitempty"`
	DenyWrite  []Path   `json:"denyWrite,omitempty"`
	// DenyWriteGlobs are denyWrite patterns with wildcards, absolute: the
	// paths matching them at start are in DenyWrite; [Policy.Check] refuses
	// every later change that matches one (or lies inside a match).
	DenyWriteGlobs []Path `json:"denyWriteGlobs,omitempty"`
	DenyRead       []Path `json:"denyRead,omitempty"`
	// DenyReadNames are the denyRead patterns whose wildcards are all in
	// their last part (sbx's .env* defaults among them): what matches at
	// start is in DenyRead; an entry made later in Dir whose name matches
	// stays unreadable too (macOS: a rule on the pattern; Linux: Landlock,
	// outside the writable roots).
	DenyReadNames []NamePattern `json:"denyReadNames,omitempty"`
	// DenyReadMissing are the denyRead paths that did not exist at start
	// (a credential file of a tool not logged in yet): nothing hides them,
	// but what the host makes there during a run stays unreadable (macOS:
	// a rule on the path; Linux: Landlock, where the kernel has it).
	DenyReadMissing []Path `json:"denyReadMissing,omitempty"`
	AllowRead       []Path `json:"allowRead,omitempty"`
	// Self are sbx's own files and directories: see [Input.Self].
	Self []Path `json:"self,omitempty"`
	// Named are the paths of the filesystem rules as the rules name them,
	// and the home's persistence paths reached through a link, for the
	// entries inside writable roots that each is resolved through: see
	// [Named].
	Named []Named `json:"named,omitempty"`
	// HomeLinks are the targets of the home's persistence paths that are
	// symbolic links (or lie under one) into a writable root, such as
	// ~/.bashrc -> ~/dotfiles/bashrc with ~/dotfiles the workspace: they
	// are protected as the paths themselves are. Origin names the path.
	HomeLinks []Path `json:"homeLinks,omitempty"`
	// GitLinks are what the configuration of the workspace's git
	// directories points git at inside a writable root (a core.hooksPath
	// directory, included config files, a program a config value runs, a
	// hooks/ link's target): protected as hooks and config are. Origin
	// names the key and file.
	GitLinks []Path `json:"gitLinks,omitempty"`
	// ProtectedLinks are the targets of protected names that are links at
	// the top of a writable root (.vscode -> vsreal): protected as the
	// names are.
	ProtectedLinks []Path `json:"protectedLinks,omitempty"`
	// GitAbove is the work tree top of the repository holding the
	// workspace, when it lies above it (sbx run in a subfolder of a
	// repository): on Linux the workspace is a mount of its own, where
	// git's discovery would stop, so the command's git is told to cross it.
	GitAbove string `json:"gitAbove,omitempty"`
	// Caches are written directly: see [Input.Caches].
	Caches   []Path   `json:"caches,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
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
	return ReadRegular(p)
}

// MaxSmallFile bounds what ReadRegular reads.
const MaxSmallFile = 16 << 20

// ReadRegular reads p, a file a sandboxed command may have made (a git
// config, a .git pointer, a HEAD), following links: opened without
// waiting (a FIFO's open would block until a writer came, and with it the
// policy's compile and the merge), refused unless it is a regular file
// (*regular.NotRegularError), and at most MaxSmallFile bytes.
func ReadRegular(p string) ([]byte, error) { return regular.Read(p, MaxSmallFile) }

func (h *Host) readDir(p string) ([]fs.DirEntry, error) {
	if h.ReadDir != nil {
		return h.ReadDir(p)
	}
	return os.ReadDir(p)
}

func (h *Host) readlink(p string) (string, error) {
	if h.Readlink != nil {
		return h.Readlink(p)
	}
	return os.Readlink(p)
}

func (h *Host) glob(p string) ([]string, error) {
	if h.Glob != nil {
		return h.Glob(p)
	}
	return globFollow(p)
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
			// A deny rule naming a path whose name holds wildcard
			// characters (secret[1].txt) denies that path too: literal
			// first, then what the pattern matches.
			if _, err := c.lstat(abs); err == nil && strings.HasPrefix(list, "deny") && !slices.Contains(paths, abs) {
				paths = append(paths, abs)
			}
			slices.Sort(paths)
			dir, name := filepath.Split(abs)
			switch {
			case list == "denyWrite":
				// Paths created later are refused at the merge.
				c.pol.DenyWriteGlobs = append(c.pol.DenyWriteGlobs, Path{Path: abs, Origin: r.Origin})
			case list == "denyRead" && !hasGlob(dir):
				c.addNames(NamePattern{Dir: filepath.Clean(dir), Name: name, Origin: r.Origin})
				c.warnf("%s: %s %q has wildcards: it hides the %d paths that exist now; one made later that matches stays unreadable outside the writable roots", r.Origin, list, r.Pattern, len(paths))
			default:
				c.warnf("%s: %s %q has wildcards: it covers the %d paths that exist now, not paths created later", r.Origin, list, r.Pattern, len(paths))
			}
		}
		for _, p := range paths {
			rp, exists, err := c.resolve(p)
			if err != nil && r.Optional {
				if _, _, t := c.walkPath(p); t != "" {
					rp, exists, err = t, false, nil
				}
			}
			if err != nil {
				return nil, &PatternError{Rule: r, Msg: err.Error()}
			}
			c.pol.Named = append(c.pol.Named, c.named(p, r.Origin, list))
			cp := Path{Path: rp, Exists: exists, Origin: r.Origin}
			if exists {
				if fi, err := c.lstat(rp); err == nil {
					cp.Dir = fi.IsDir()
				}
			}
			out = append(out, cp)
		}
	}
	return out, nil
}

// addNames adds a name pattern to the policy, its directory resolved
// where it exists.
func (c *compiler) addNames(n NamePattern) {
	if rd, ok, err := c.resolve(n.Dir); err == nil && ok {
		n.Dir = rd
	}
	c.pol.DenyReadNames = append(c.pol.DenyReadNames, n)
}

// compileSelf anchors sbx's own paths, resolving links where it can (a
// path that cannot be resolved is protected as written).
func (c *compiler) compileSelf(rules []Rule) []Path {
	var out []Path
	for _, r := range rules {
		abs, err := Anchor(r.Pattern, r.BaseDir, c.host.Home)
		if err != nil {
			continue
		}
		// A settings file or directory that is a link (dotfiles): its
		// way, and the target, which may not exist yet.
		c.pol.Named = append(c.pol.Named, c.named(abs, r.Origin, "sbx"))
		p := Path{Path: abs, Origin: r.Origin}
		if _, _, t := c.walkPath(abs); t != "" {
			p.Path = t
		}
		fi, err := c.lstat(p.Path)
		p.Exists = err == nil
		out = append(out, p)
		if err != nil || !fi.IsDir() || r.Shallow {
			continue
		}
		// Links inside it (~/.claude/settings.json -> dotfiles/…).
		targets, complete := c.linksBelow(p.Path, selfBulk)
		if !complete {
			c.warnf("%s holds more than %d entries: links deeper in it are not checked", p.Path, maxLinkScan)
		}
		for _, t := range targets {
			out = append(out, Path{Path: t, Origin: r.Origin + " (a link in " + p.Path + " ends at it)"})
		}
	}
	return dedupe(out)
}

// selfBulk are the directories of Claude Code's that hold its data
// (transcripts, snapshots), not what it reads as settings or code: not
// listed for links.
var selfBulk = []string{"projects", "todos", "shell-snapshots", "statsig", "logs", "file-history", "session-env", "debug", "ide"}

type compiler struct {
	host Host
	pol  *Policy
	// memo holds the paths resolved so far in this compile, lstats the
	// entries looked at by walkPath.
	memo   map[string]resolved
	lstats map[string]lstatResult
	// outside is gitDirsOutside's answer for the workspace, once made
	// (the policy and its git links both need it; its warnings once).
	outside *gitDirsOf
}

type gitDirsOf struct {
	ws   string
	dirs []Path
}

type lstatResult struct {
	fi  fs.FileInfo
	err error
}

// lstat is Host.lstat, remembered for the rest of the compile (the deny
// paths share their directories).
func (c *compiler) lstat(p string) (fs.FileInfo, error) {
	if r, ok := c.lstats[p]; ok {
		return r.fi, r.err
	}
	fi, err := c.host.lstat(p)
	if c.lstats == nil {
		c.lstats = map[string]lstatResult{}
	}
	c.lstats[p] = lstatResult{fi, err}
	return fi, err
}

type resolved struct {
	path   string
	exists bool
	err    error
}

// resolve is Host.resolve, with what it resolved remembered for the rest
// of the compile: a path whose directory is known costs one lstat instead
// of one per component (a policy names dozens of files in the same few
// directories). Symbolic links and errors go through Host.resolve.
func (c *compiler) resolve(p string) (string, bool, error) {
	if r, ok := c.memo[p]; ok {
		return r.path, r.exists, r.err
	}
	path, exists, err := c.resolveOnce(p)
	if c.memo == nil {
		c.memo = map[string]resolved{}
	}
	c.memo[p] = resolved{path, exists, err}
	return path, exists, err
}

func (c *compiler) resolveOnce(p string) (string, bool, error) {
	if p == "/" {
		return p, true, nil
	}
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return c.host.resolve(p)
	}
	rd, dirExists, err := c.resolve(filepath.Dir(p))
	if err != nil {
		return "", false, err
	}
	joined := filepath.Join(rd, filepath.Base(p))
	if !dirExists {
		return joined, false, nil
	}
	fi, err := c.lstat(joined)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return joined, false, nil
	case err != nil || fi.Mode()&fs.ModeSymlink != 0:
		return c.host.resolve(p)
	}
	return joined, true, nil
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
	pol := &Policy{Home: filepath.Clean(host.Home)}
	c := &compiler{host: host, pol: pol}
	ws, exists, err := c.resolve(filepath.Clean(in.Workspace))
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
	for _, n := range in.DenyReadNames {
		c.addNames(n)
	}
	if pol.AllowRead, err = c.compileList(in.AllowRead, false, "allowRead"); err != nil {
		return nil, err
	}
	pol.Self = c.compileSelf(in.Self)
	if home, ok, _ := c.resolve(pol.Home); ok {
		pol.Home = home
	}
	// An allowRead naming a denied path itself re-opens it (that is how the
	// default credential-file denies are lifted one by one).
	pol.DenyRead = slices.DeleteFunc(pol.DenyRead, func(d Path) bool {
		return slices.ContainsFunc(pol.AllowRead, func(a Path) bool { return a.Path == d.Path })
	})
	for _, p := range pol.DenyRead {
		if !p.Exists && !slices.ContainsFunc(pol.DenyReadMissing, func(m Path) bool { return m.Path == p.Path }) {
			pol.DenyReadMissing = append(pol.DenyReadMissing, p)
		}
	}
	pol.DenyRead = slices.DeleteFunc(pol.DenyRead, func(p Path) bool { return !p.Exists })
	pol.AllowRead = slices.DeleteFunc(pol.AllowRead, func(p Path) bool {
		if !p.Exists {
			c.warnf("%s: allowRead %s does not exist; ignored", p.Origin, p.Path)
		}
		return !p.Exists
	})

	for _, cdir := range in.Caches {
		rp, exists, err := c.resolve(filepath.Clean(cdir))
		switch {
		case err != nil || !exists || !filepath.IsAbs(cdir):
			c.warnf("toolchain cache %s cannot be used (%v); the sandbox's tools have no cache there", cdir, err)
		case coveringDeny(rp, pol.DenyWrite) != nil || slices.ContainsFunc(pol.Self, func(s Path) bool { return Within(rp, s.Path) || Within(s.Path, rp) }):
			c.warnf("toolchain cache %s lies in a denyWrite path or in sbx's own files; not used", rp)
		default:
			pol.Caches = append(pol.Caches, Path{Path: rp, Exists: true, Dir: true, Origin: "sbx toolchain cache"})
		}
	}
	writable := append([]Path{{Path: ws, Exists: true, Dir: true, Origin: "workspace"}}, allowWrite...)
	writable = append(writable, c.gitDirsOutside(ws)...)
	if top, _, ok := c.repoTop(ws); ok && top != ws {
		pol.GitAbove = top
	}
	for _, w := range writable {
		if !w.Exists {
			c.warnf("%s: allowWrite %s does not exist; ignored", w.Origin, w.Path)
			continue
		}
		if err := checkRoot(w, pol.Home, in.HomeRoot); err != nil {
			return nil, err
		}
		if g := c.gitDirHolding(w.Path); g != "" && !strings.HasPrefix(w.Origin, GitDirOrigin) {
			return nil, &RootError{w.Path, w.Origin, "it is (or lies inside) the git directory " + g +
				", whose hooks and config git on the host runs and reads; run sbx from the repository's work tree"}
		}
		if d := coveringDeny(w.Path, pol.DenyWrite); d != nil {
			c.warnf("%s: allowWrite %s lies inside denyWrite %s (%s); it stays read-only", w.Origin, w.Path, d.Path, d.Origin)
			continue
		}
		if isProtectedPath(w.Path) || slices.ContainsFunc(homePersistence, func(h string) bool { return filepath.Join(pol.Home, h) == w.Path }) {
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
	pol.GitLinks = dedupe(c.gitLinks(ws, pol.Writable))
	pol.ProtectedLinks = dedupe(c.protectedLinks(pol.Writable))
	var homeNamed []Named
	pol.HomeLinks, homeNamed = c.homeLinks()
	pol.Named = keepInRoots(append(pol.Named, homeNamed...), pol.Writable)
	pol.DenyWrite = dedupe(pol.DenyWrite)
	pol.DenyRead = dedupe(pol.DenyRead)
	pol.AllowRead = dedupe(pol.AllowRead)
	return pol, nil
}

// named lists every entry the kernel looks up to resolve p: the
// components of p and, for each symbolic link on the way, those of its
// target (recursively; "." and ".." taken as the kernel takes them, so a
// directory passed through by ".." is listed too), each with its directory
// resolved; an entry that does not exist continues the path as written.
// Links are the entries that are symbolic links now.
func (c *compiler) named(p, origin, list string) Named {
	n := Named{List: list, Path: p, Origin: origin}
	n.Entries, n.Links, _ = c.walkPath(p)
	return n
}

// walkPath resolves p as the kernel does, entry by entry (see named), and
// returns the entries, the links among them and the path p ends at, which
// may not exist ("" when a link cannot be followed).
func (c *compiler) walkPath(p string) (entries, links []string, final string) {
	todo := strings.Split(p, "/")
	cur := "/"
	gone := false // cur does not exist: nothing below it does
	for hops := 0; len(todo) > 0; {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur, gone = filepath.Dir(cur), false
			continue
		}
		next := filepath.Join(cur, name)
		if !slices.Contains(entries, next) {
			entries = append(entries, next)
		}
		if gone {
			cur = next
			continue
		}
		fi, err := c.lstat(next)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			cur, gone = next, err != nil
			continue
		}
		if !slices.Contains(links, next) {
			links = append(links, next)
		}
		target, err := c.host.readlink(next)
		if hops++; err != nil || hops > 40 {
			return entries, links, "" // a link that cannot be followed
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return entries, links, cur
}

// maxLinkScan bounds the entries listed below one directory when looking
// for links in it, and maxLinkDepth how deep (~/.config/systemd/user/x
// is one directory below ~/.config/systemd).
const (
	maxLinkScan  = 2000
	maxLinkDepth = 2
)

// linksBelow returns the paths the symbolic links in dir's tree end at
// (the tree is not followed through them), skipping the subdirectories
// named in skip; complete is false when more than maxLinkScan entries
// were left unlisted.
func (c *compiler) linksBelow(dir string, skip []string) (targets []string, complete bool) {
	budget := maxLinkScan
	var scan func(d string, depth int) bool
	scan = func(d string, depth int) bool {
		ents, err := c.host.readDir(d)
		if err != nil {
			return true
		}
		for _, e := range ents {
			if budget--; budget < 0 {
				return false
			}
			p := filepath.Join(d, e.Name())
			switch {
			case e.Type()&fs.ModeSymlink != 0:
				if _, _, t := c.walkPath(p); t != "" {
					targets = append(targets, t)
				}
			case e.IsDir() && depth < maxLinkDepth && !(depth == 0 && slices.Contains(skip, e.Name())):
				if !scan(p, depth+1) {
					return false
				}
			}
		}
		return true
	}
	return targets, scan(dir, 0)
}

// homeLinks finds the home's persistence paths (and the protected names
// at its top) reached through a symbolic link, and returns their targets
// that a writable root holds or lies in, and the entries each is resolved
// through (a link on the way inside a writable root, re-pointed, would
// swap the file), unless an allowWrite names the path or the target
// exactly. Each directory on the way is listed once, so only a link costs
// a resolution.
func (c *compiler) homeLinks() ([]Path, []Named) {
	pol := c.pol
	lists := map[string]map[string]fs.FileMode{}
	list := func(dir string) map[string]fs.FileMode {
		if l, ok := lists[dir]; ok {
			return l
		}
		l := map[string]fs.FileMode{}
		if ents, err := c.host.readDir(dir); err == nil {
			for _, e := range ents {
				l[e.Name()] = e.Type()
			}
		}
		lists[dir] = l
		return l
	}
	var out []Path
	var named []Named
	for _, h := range slices.Concat(homePersistence, protectedFiles, protectedDirs) {
		hp := filepath.Join(pol.Home, h)
		if !linkOnWay(pol.Home, h, list) || slices.Contains(pol.ExactAllow, hp) {
			continue
		}
		why := "~/" + h + " runs code or lets someone in; allowWrite ~/" + h + " exactly to let it change"
		n := c.named(hp, why, "home")
		named = append(named, n)
		// The path it ends at, which may not exist yet (a dangling
		// ~/.profile, or ~/.config a link into the workspace with no
		// systemd/user in it): protected all the same.
		if _, _, t := c.walkPath(hp); t != "" {
			out = c.homeTarget(out, t, "~/"+h+" is a link to it: "+why)
		}
	}
	// Links inside the persistence directories (~/.ssh/authorized_keys ->
	// dotfiles/…, ~/.config/systemd/user -> …), wherever they are.
	for _, h := range homePersistence {
		hp := filepath.Join(pol.Home, h)
		if slices.Contains(pol.ExactAllow, hp) || slices.Contains(noLinkScan, h) {
			continue
		}
		if !dirByListing(pol.Home, h, list) {
			continue // absent, a file, or a link followed above
		}
		targets, complete := c.linksBelow(hp, nil)
		if !complete {
			c.warnf("~/%s holds more than %d entries: links deeper in it are not checked", h, maxLinkScan)
		}
		for _, t := range targets {
			out = c.homeTarget(out, t, "a link in ~/"+h+" ends at it: ~/"+h+" runs code or lets someone in")
		}
	}
	return dedupe(out), named
}

// homeTarget adds t, the path a home persistence link ends at, to out
// when a writable root holds it or lies in it (and is not it).
func (c *compiler) homeTarget(out []Path, t, origin string) []Path {
	w := c.pol.Writable
	if !slices.ContainsFunc(w, func(w Path) bool { return Within(t, w.Path) || Within(w.Path, t) }) || slices.ContainsFunc(w, func(w Path) bool { return w.Path == t }) {
		return out
	}
	fi, err := c.lstat(t)
	return append(out, Path{Path: t, Exists: err == nil, Dir: err != nil || fi.IsDir(), Origin: origin})
}

// dirByListing reports, from the listings, whether home/rel is a
// directory reached through directories only.
func dirByListing(home, rel string, list func(string) map[string]fs.FileMode) bool {
	dir := home
	for _, name := range strings.Split(rel, "/") {
		if mode, ok := list(dir)[name]; !ok || !mode.IsDir() {
			return false
		}
		dir = filepath.Join(dir, name)
	}
	return true
}

// linkOnWay reports whether home/rel exists and a symbolic link is on its
// way (itself or a directory above it, below home), from the listings.
func linkOnWay(home, rel string, list func(string) map[string]fs.FileMode) bool {
	dir := home
	for _, name := range strings.Split(rel, "/") {
		mode, ok := list(dir)[name]
		switch {
		case !ok:
			return false
		case mode&fs.ModeSymlink != 0:
			return true
		case !mode.IsDir():
			return false
		}
		dir = filepath.Join(dir, name)
	}
	return false
}

// keepInRoots keeps, of each named path, the entries inside a writable
// root (no change can reach the others), and the named paths left with
// any.
func keepInRoots(named []Named, roots []Path) []Named {
	in := func(e string) bool {
		return slices.ContainsFunc(roots, func(w Path) bool { return Within(e, w.Path) && e != w.Path })
	}
	var out []Named
	for _, n := range named {
		n.Entries = slices.DeleteFunc(n.Entries, func(e string) bool { return !in(e) })
		n.Links = slices.DeleteFunc(n.Links, func(e string) bool { return !in(e) })
		if len(n.Entries) > 0 {
			out = append(out, n)
		}
	}
	return out
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

// RootError is returned for a writable root that would expose the whole
// machine or the whole home directory.
type RootError struct {
	Path, Origin, Msg string
}

func (e *RootError) Error() string {
	return fmt.Sprintf("%s: writable root %s: %s", e.Origin, e.Path, e.Msg)
}

// checkRoot refuses / as a writable root, and the home directory or an
// ancestor of it unless homeRoot is set.
func checkRoot(w Path, home string, homeRoot bool) error {
	switch {
	case w.Path == "/":
		return &RootError{w.Path, w.Origin, "the whole file system cannot be writable; run sbx from a project directory"}
	case !homeRoot && Within(home, w.Path):
		return &RootError{w.Path, w.Origin, "this would make your whole home directory writable; run sbx from a project directory, " +
			"or pass --home-workspace to allow it (home persistence files stay protected)"}
	}
	return nil
}

// gitDirsOutside returns the git directories outside the workspace that
// git run in it must write (index, objects, refs) for commits to work; the
// merge lets only git's own data change there. The repository is the one
// git finds from the workspace: the nearest directory top, the workspace
// or an ancestor, holding a .git. Its git directory counts only when
// validated on the host: a .git directory (never a link) of a real git
// directory whose config names no other work tree, for a top above the
// workspace (sbx run in a subfolder of a repository); or, for a .git
// pointer file (a linked worktree, a submodule), a real git directory
// that points back at top (a worktree's gitdir file, a submodule's
// core.worktree), and its common directory, a real git directory holding
// the worktree's directory under worktrees/. A repository whose work tree
// is the home directory or above it (a home kept in git) is never written.
func (c *compiler) gitDirsOutside(ws string) []Path {
	if c.outside == nil || c.outside.ws != ws {
		c.outside = &gitDirsOf{ws, c.findGitDirsOutside(ws)}
	}
	return c.outside.dirs
}

// findGitDirsOutside is gitDirsOutside, made.
func (c *compiler) findGitDirsOutside(ws string) []Path {
	top, fi, ok := c.repoTop(ws)
	if !ok || top != ws && Within(c.pol.Home, top) {
		return nil
	}
	dotGit := filepath.Join(top, ".git")
	origin := GitDirOrigin + " (" + dotGit + "), validated"
	switch {
	case fi.IsDir() && top != ws && c.isGitDir(dotGit) && c.ownWorkTree(dotGit):
		return []Path{{Path: dotGit, Exists: true, Dir: true, Origin: origin}}
	case !fi.Mode().IsRegular():
		return nil // the workspace's own .git directory, a link, or not a repository's
	}
	gitDir, ok := c.gitdirOf(dotGit)
	if !ok {
		return nil
	}
	gitDir, exists, err := c.resolve(gitDir)
	if err != nil || !exists || Within(gitDir, ws) || !c.isGitDir(gitDir) {
		return nil
	}
	common := gitDir
	if cd, err := c.host.readFile(filepath.Join(gitDir, "commondir")); err == nil {
		common = strings.TrimSpace(string(cd))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
		common, exists, err = c.resolve(filepath.Clean(common))
		if err != nil || !exists || !c.isGitDir(common) || filepath.Dir(gitDir) != filepath.Join(common, "worktrees") {
			c.warnf("%s: the common directory of %s is not a git directory holding it; git cannot write outside the workspace", dotGit, gitDir)
			return nil
		}
	}
	if !c.pointsBack(gitDir, dotGit, top) {
		c.warnf("%s: %s does not point back at this work tree; git cannot write outside the workspace", dotGit, gitDir)
		return nil
	}
	if !c.clearOfHome(gitDir) || !c.clearOfHome(common) {
		return nil
	}
	out := []Path{{Path: gitDir, Exists: true, Dir: true, Origin: origin}}
	if common != gitDir && !Within(common, ws) {
		out = append(out, Path{Path: common, Exists: true, Dir: true, Origin: origin})
	}
	return out
}

// repoTop is the directory git's discovery finds from ws: ws or its
// nearest ancestor holding a .git entry, and that entry (not followed).
func (c *compiler) repoTop(ws string) (string, fs.FileInfo, bool) {
	for d := ws; ; d = filepath.Dir(d) {
		if fi, err := c.host.lstat(filepath.Join(d, ".git")); err == nil {
			return d, fi, true
		}
		if d == filepath.Dir(d) {
			return "", nil, false
		}
	}
}

// ownWorkTree reports whether the .git directory dotGit's configuration
// can be read and leaves its work tree where it lies: neither core.bare nor
// core.worktree set (see [compiler.gitDirConfig]).
func (c *compiler) ownWorkTree(dotGit string) bool {
	keys, ok := c.gitDirConfig(dotGit)
	if !ok {
		c.warnf("%s: its config cannot be checked (an include, or what sbx cannot read); git cannot write outside the workspace", dotGit)
		return false
	}
	for _, k := range keys {
		no := slices.Contains([]string{"false", "no", "off", "0"}, strings.ToLower(k.value))
		if k.section == "core" && !k.hasSub && (k.name == "bare" && !no || k.name == "worktree") {
			return false
		}
	}
	return c.clearOfHome(dotGit)
}

// clearOfHome reports whether git directory g is no home repository's: it
// lies in no .git of the home directory or of a directory above it (a
// linked worktree's, a submodule's), and its configuration can be read
// and names no work tree there. A repository whose work tree is the home
// holds the user's shell files: a ref moved there is one checkout away
// from them.
func (c *compiler) clearOfHome(g string) bool {
	for d := c.pol.Home; d != "" && filepath.IsAbs(d); d = filepath.Dir(d) {
		if Within(g, filepath.Join(d, ".git")) {
			return false
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	keys, ok := c.gitDirConfig(g)
	if !ok {
		return false
	}
	for _, k := range keys {
		if k.section == "core" && !k.hasSub && k.name == "worktree" {
			wt := k.value
			if !filepath.IsAbs(wt) {
				wt = filepath.Join(g, wt)
			}
			if c.pol.Home != "" && Within(c.pol.Home, filepath.Clean(wt)) {
				return false
			}
		}
	}
	return true
}

// gitDirConfig is the configuration of git directory g that git reads
// for its own repository: config and config.worktree (which
// extensions.worktreeConfig turns on). ok is false when either cannot be
// parsed, or includes another file (git would read keys sbx does not
// see): nothing can then be validated.
func (c *compiler) gitDirConfig(g string) (keys []gitKey, ok bool) {
	for _, name := range []string{"config", "config.worktree"} {
		data, err := c.host.readFile(filepath.Join(g, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false
		}
		k, err := parseGitConfig(data)
		if err != nil {
			return nil, false
		}
		for _, key := range k {
			if key.section == "include" || key.section == "includeif" {
				return nil, false
			}
		}
		keys = append(keys, k...)
	}
	return keys, true
}

// GitDirOrigin begins the origin of a writable root that is a git
// directory outside the workspace (see [compiler.gitDirsOutside]).
const GitDirOrigin = "git directory of the workspace"

// gitDirHolding returns the git directory that p is, or lies inside ("" if
// none): an ancestor (or p) named .git, or a bare repository's directory
// (HEAD, objects/ and refs/).
func (c *compiler) gitDirHolding(p string) string {
	for d := p; ; d = filepath.Dir(d) {
		if strings.EqualFold(filepath.Base(d), ".git") || c.isBareDir(d) {
			return d
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// isBareDir reports whether dir has what git requires of a git directory:
// a HEAD file that reads as one, objects/ and refs/.
func (c *compiler) isBareDir(dir string) bool {
	for _, sub := range []string{"objects", "refs"} {
		if fi, err := c.host.lstat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			return false
		}
	}
	data, err := c.host.readFile(filepath.Join(dir, "HEAD"))
	return err == nil && LooksLikeHead(data)
}

// isGitDir reports whether dir is a real git directory: a directory with a
// HEAD file and objects/ (or, for a linked worktree's, a commondir file).
func (c *compiler) isGitDir(dir string) bool {
	if fi, err := c.host.lstat(dir); err != nil || !fi.IsDir() {
		return false
	}
	if fi, err := c.host.lstat(filepath.Join(dir, "HEAD")); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	if fi, err := c.host.lstat(filepath.Join(dir, "objects")); err == nil && fi.IsDir() {
		return true
	}
	fi, err := c.host.lstat(filepath.Join(dir, "commondir"))
	return err == nil && fi.Mode().IsRegular()
}

// pointsBack reports whether git directory gitDir names the workspace as
// its work tree: a linked worktree's gitdir file names ws/.git, a
// submodule's config sets core.worktree to ws.
func (c *compiler) pointsBack(gitDir, dotGit, ws string) bool {
	same := func(p, want string) bool {
		r, ok, err := c.resolve(filepath.Clean(p))
		return err == nil && ok && r == want
	}
	if data, err := c.host.readFile(filepath.Join(gitDir, "gitdir")); err == nil {
		p := strings.TrimSpace(string(data))
		if !filepath.IsAbs(p) {
			p = filepath.Join(gitDir, p)
		}
		return same(p, dotGit)
	}
	for _, k := range c.readGitConfig(filepath.Join(gitDir, "config")) {
		if k.section == "core" && !k.hasSub && k.name == "worktree" {
			p := k.value
			if !filepath.IsAbs(p) {
				p = filepath.Join(gitDir, p)
			}
			return same(p, ws)
		}
	}
	return false
}
