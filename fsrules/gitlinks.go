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

// maxIncludeDepth bounds how deep included config files are followed.
const maxIncludeDepth = 4

// gitLinks lists what the configuration of the workspace's git
// directories points git at inside the writable roots: a core.hooksPath
// directory, included config files (followed maxIncludeDepth levels), the
// program of a value git runs when it names a file (core.fsmonitor =
// tools/watch.sh), and the target of a hooks/ that is a symbolic link. Git
// on the host runs or reads them as it does hooks and config, so they are
// protected as those are; an existing repository's settings are kept, only
// the files they name are.
func (c *compiler) gitLinks(ws string, roots []Path) []Path {
	var out []Path
	for _, g := range c.workspaceGitDirs(ws) {
		top := g
		if filepath.Base(g) == ".git" {
			top = filepath.Dir(g)
		} else if slices.ContainsFunc(roots, func(r Path) bool { return r.Path == g && r.Origin != "workspace" }) {
			top = ws // a linked worktree's or submodule's git directory
		}
		hooks := filepath.Join(g, "hooks")
		if fi, err := c.host.lstat(hooks); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			out = c.gitTarget(out, hooks, "the hooks directory of "+g+" is a link here")
		}
		out = c.gitConfigLinks(out, filepath.Join(g, "config"), top, 0)
	}
	return slices.DeleteFunc(out, func(p Path) bool {
		return !slices.ContainsFunc(roots, func(r Path) bool { return Within(p.Path, r.Path) })
	})
}

// workspaceGitDirs are the git directories whose configuration governs
// git in the workspace: the .git directory of the workspace or of the
// nearest ancestor that has one, and a .git file's validated target.
func (c *compiler) workspaceGitDirs(ws string) []string {
	var out []string
	for d := ws; ; d = filepath.Dir(d) {
		if fi, err := c.host.lstat(filepath.Join(d, ".git")); err == nil {
			if fi.IsDir() {
				out = append(out, filepath.Join(d, ".git"))
			}
			break
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, p := range c.gitDirsOutside(ws) {
		out = append(out, p.Path)
	}
	return out
}

// gitConfigLinks adds what one config file names (see gitLinks); paths
// are taken from top, included files from the file's own directory.
func (c *compiler) gitConfigLinks(out []Path, file, top string, depth int) []Path {
	data, err := c.host.readFile(file)
	if err != nil {
		return out
	}
	keys, err := parseGitConfig(data)
	if err != nil {
		return out
	}
	for _, k := range keys {
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
		case slices.Contains(gitProgramKeys, pat) || !k.hasSub && slices.Contains(gitProgramKeys, k.section+".*"):
			if prog := gitProgram(k.value); prog != "" {
				out = c.gitTarget(out, c.gitPath(prog, top), origin+": git on the host runs it")
			}
		}
	}
	return out
}

// gitProgram is the program of a command value when it names a file (a
// word with a slash), or "".
func gitProgram(v string) string {
	f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(v), "!"))
	if len(f) == 0 || !strings.Contains(f[0], "/") {
		return ""
	}
	return strings.Trim(f[0], `"'`)
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

// gitTarget adds p, and what it resolves to when that differs (a link
// re-pointed, or its target changed, would do the same).
func (c *compiler) gitTarget(out []Path, p, origin string) []Path {
	out = append(out, Path{Path: p, Origin: origin})
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
