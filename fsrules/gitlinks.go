package fsrules

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// gitProgramKeys are config keys whose value is a command git runs (its
// first word a program, which may be a file of the work tree), as
// section.name, section.*.name, or section.* for every name of a section
// (alias.*, pager.*).
var gitProgramKeys = []string{
	"core.fsmonitor", "core.sshcommand", "core.pager", "core.editor", "core.askpass",
	"core.alternaterefscommand", "core.gitproxy", "sequence.editor", "gpg.program", "gpg.*.program",
	"diff.external", "diff.*.textconv", "diff.*.command", "filter.*.clean", "filter.*.smudge",
	"filter.*.process", "merge.*.driver", "credential.helper", "credential.*.helper", "alias.*",
	"uploadpack.packobjectshook", "pager.*", "interactive.difffilter", "difftool.*.cmd",
	"mergetool.*.cmd", "web.browser", "browser.*.cmd", "man.*.cmd", "remote.*.uploadpack",
	"remote.*.receivepack", "sendemail.sendmailcmd", "sendemail.smtpserver",
}

// maxIncludeDepth is how deep included config files are followed: as
// deep as git follows them (it stops with an error past 10).
const maxIncludeDepth = 10

// gitLinks lists what the configuration of the workspace's git
// directories, and the user's own git configuration, points git at inside
// the writable roots: a core.hooksPath directory, included config files,
// the programs of a value git runs when they are files (core.fsmonitor =
// sh tools/watch.sh), and the target of a hooks/ that is a symbolic link.
// Git on the host runs or reads them as it does hooks and config, so they
// are protected as those are; an existing repository's settings are kept,
// only the files they name are. Repositories nested in a writable root
// (a vendored repository, a submodule) are read by the merge as it enters
// them ([RepoLinks]).
func (c *compiler) gitLinks(ws string, roots []Path) []Path {
	var out []Path
	for _, g := range c.workspaceGitDirs(ws) {
		out = c.gitDirLinks(out, g.dir, g.top)
	}
	for _, f := range []string{".gitconfig", ".config/git/config"} {
		out = c.gitConfigLinks(out, filepath.Join(c.pol.Home, f), ws, 0)
	}
	return slices.DeleteFunc(out, func(p Path) bool {
		return !slices.ContainsFunc(roots, func(r Path) bool { return Within(p.Path, r.Path) })
	})
}

// RepoLinks is what gitLinks finds for the repository whose work tree is
// top (a directory holding .git, nested in the writable root root), kept
// to what lies in root: the merge reads it as it enters such a directory.
func RepoLinks(top, root, home string) []Path {
	c := &compiler{host: Host{Home: home}, pol: &Policy{Home: home}}
	var out []Path
	for _, g := range c.repoGitDirs(top) {
		out = c.gitDirLinks(out, g.dir, g.top)
	}
	return slices.DeleteFunc(out, func(p Path) bool { return !Within(p.Path, root) })
}

// gitDirLinks adds what one git directory points git at (see gitLinks),
// relative paths taken from the work tree top.
func (c *compiler) gitDirLinks(out []Path, g, top string) []Path {
	hooks := filepath.Join(g, "hooks")
	if fi, err := c.host.lstat(hooks); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		out = c.gitTarget(out, hooks, "the hooks directory of "+g+" is a link here")
	}
	return c.gitConfigLinks(out, filepath.Join(g, "config"), top, 0)
}

// gitDir is a git directory and the work tree its relative paths are
// taken from.
type gitDir struct{ dir, top string }

// workspaceGitDirs are the git directories whose configuration governs
// git in the workspace: the .git directory of the workspace or of the
// nearest ancestor that has one, a .git file's validated target and its
// common directory (a linked worktree's), and the workspace repository's
// submodules (modules/*, work trees named by core.worktree).
func (c *compiler) workspaceGitDirs(ws string) []gitDir {
	top, fi, ok := c.repoTop(ws)
	if !ok {
		return nil
	}
	var out []gitDir
	if fi.IsDir() {
		out = append(out, gitDir{filepath.Join(top, ".git"), top})
	}
	for _, p := range c.gitDirsOutside(ws) {
		if !slices.ContainsFunc(out, func(g gitDir) bool { return g.dir == p.Path }) {
			out = append(out, gitDir{p.Path, top})
		}
	}
	for _, g := range slices.Clone(out) {
		out = append(out, c.submodules(g.dir, 0)...)
	}
	return out
}

// repoGitDirs are the git directories of the work tree top: its .git
// directory, or what its .git file names (and that one's common
// directory), and their submodules.
func (c *compiler) repoGitDirs(top string) []gitDir {
	dotGit := filepath.Join(top, ".git")
	fi, err := c.host.lstat(dotGit)
	switch {
	case err != nil:
		return nil
	case fi.IsDir():
		return append([]gitDir{{dotGit, top}}, c.submodules(dotGit, 0)...)
	case !fi.Mode().IsRegular():
		return nil
	}
	g, ok := c.gitdirOf(dotGit)
	if !ok {
		return nil
	}
	out := []gitDir{{g, top}}
	if cd, err := c.host.readFile(filepath.Join(g, "commondir")); err == nil {
		out = append(out, gitDir{c.gitPath(strings.TrimSpace(string(cd)), g), top})
	}
	return out
}

// submodules are the git directories below g's modules/ (nested ones
// too, 4 levels), each with the work tree its config names
// (core.worktree, relative to it).
func (c *compiler) submodules(g string, depth int) []gitDir {
	if depth > 4 {
		return nil
	}
	ents, err := c.host.readDir(filepath.Join(g, "modules"))
	if err != nil {
		return nil
	}
	var out []gitDir
	for _, e := range ents {
		m := filepath.Join(g, "modules", e.Name())
		if !e.IsDir() {
			continue
		}
		for _, k := range c.readGitConfig(filepath.Join(m, "config")) {
			if k.pattern() == "core.worktree" {
				out = append(out, gitDir{m, c.gitPath(k.value, m)})
			}
		}
		out = append(out, c.submodules(m, depth+1)...)
	}
	return out
}

// gitConfigLinks adds what one config file names (see gitLinks); paths
// are taken from top, included files from the file's own directory.
func (c *compiler) gitConfigLinks(out []Path, file, top string, depth int) []Path {
	for _, k := range c.readGitConfig(file) {
		pat := k.pattern()
		origin := k.String() + " in " + file
		switch {
		case pat == "core.hookspath":
			out = c.gitTarget(out, c.gitPath(k.value, top), origin+": git on the host runs the hooks there")
		case pat == "include.path" || pat == "includeif.*.path":
			inc := c.gitPath(k.value, filepath.Dir(file))
			out = c.gitTarget(out, inc, origin+": git on the host reads it as its configuration")
			if depth < maxIncludeDepth {
				out = c.gitConfigLinks(out, inc, top, depth+1)
			}
		case k.section == "alias" && !strings.HasPrefix(strings.TrimSpace(k.value), "!"):
			// A git command, no program.
		case slices.Contains(gitProgramKeys, pat) || !k.hasSub && slices.Contains(gitProgramKeys, k.section+".*"):
			for _, f := range c.gitProgramFiles(k.value, top) {
				out = c.gitTarget(out, f, origin+": git on the host runs it")
			}
		}
	}
	return out
}

// readGitConfig reads a git config file's keys; nil when it cannot be
// read or parsed.
func (c *compiler) readGitConfig(file string) []gitKey {
	data, err := c.host.readFile(file)
	if err != nil {
		return nil
	}
	keys, err := parseGitConfig(data)
	if err != nil {
		return nil
	}
	return keys
}

// gitdirOf is the git directory a .git file names (gitdir: PATH, relative
// to the file's directory), clean.
func (c *compiler) gitdirOf(dotGit string) (string, bool) {
	data, err := c.host.readFile(dotGit)
	if err != nil {
		return "", false
	}
	line, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
	if !ok {
		return "", false
	}
	p := strings.TrimSpace(line)
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(dotGit), p) // no ~: git reads it as written
	}
	return filepath.Clean(p), true
}

// gitProgramFiles are the files a command value names: its words with a
// slash (sh tools/x.sh, ./x.sh, !~/bin/x) and the arguments naming a
// regular file in the work tree top (python3 conv.py), the interpreter's
// script as much as the program.
func (c *compiler) gitProgramFiles(v, top string) []string {
	var out []string
	for i, w := range strings.Fields(strings.TrimPrefix(strings.TrimSpace(v), "!")) {
		w = strings.Trim(w, `"'`)
		if w == "" || strings.HasPrefix(w, "-") {
			continue
		}
		p := c.gitPath(w, top)
		if strings.Contains(w, "/") {
			out = append(out, p)
		} else if fi, err := c.host.lstat(p); i > 0 && err == nil && fi.Mode().IsRegular() {
			// An argument naming a file of the work tree (a bare program
			// name is looked up on PATH, and a directory is no script).
			out = append(out, p)
		}
	}
	return out
}

// gitPath makes a path of a config value absolute: ~/ from the home, a
// relative one from base.
func (c *compiler) gitPath(v, base string) string {
	switch {
	case v == "~" || strings.HasPrefix(v, "~/"):
		return filepath.Join(c.pol.Home, strings.TrimPrefix(v, "~"))
	case filepath.IsAbs(v):
		return filepath.Clean(v)
	}
	return filepath.Join(base, v)
}

// gitTarget adds p, and what it resolves to when that differs; the way p
// resolves is kept (a link on it re-pointed would move what git runs).
func (c *compiler) gitTarget(out []Path, p, origin string) []Path {
	out = append(out, Path{Path: p, Origin: origin})
	c.pol.Named = append(c.pol.Named, c.named(p, origin, "git"))
	if r, ok, err := c.resolve(p); err == nil && r != p {
		out = append(out, Path{Path: r, Exists: ok, Origin: origin})
	}
	return out
}

// protectedLinks lists the targets of protected names (.vscode, .envrc,
// .mcp.json …) that are symbolic links at the top of a writable root into
// a writable root: an editor or tool reads the target through the name,
// so it is protected as the name is. Only the top of each root is looked
// at (one listing each), where editors and tools look for them.
func (c *compiler) protectedLinks(roots []Path) []Path {
	var out []Path
	for _, r := range roots {
		if !r.Dir {
			continue
		}
		ents, err := c.host.readDir(r.Path)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if ok, _ := isProtectedName(e.Name()); !ok || e.Type()&fs.ModeSymlink == 0 {
				continue
			}
			p := filepath.Join(r.Path, e.Name())
			origin := p + " is a link to it, and " + e.Name() + " is protected (it runs code later)"
			// The way the link resolves is kept too (a directory its
			// target passes through, re-pointed, would move it).
			c.pol.Named = append(c.pol.Named, c.named(p, origin, "protected"))
			if t, ok, err := c.resolve(p); err == nil && t != p {
				out = append(out, Path{Path: t, Exists: ok, Origin: origin})
			}
			// A dangling link: what it names, made later, is read the same.
			if t, err := c.host.readlink(p); err == nil {
				if !filepath.IsAbs(t) {
					t = filepath.Join(r.Path, t)
				}
				out = append(out, Path{Path: filepath.Clean(t), Origin: origin})
			}
		}
	}
	return slices.DeleteFunc(out, func(p Path) bool {
		return !slices.ContainsFunc(roots, func(r Path) bool { return Within(p.Path, r.Path) })
	})
}
