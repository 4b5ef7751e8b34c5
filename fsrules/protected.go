package fsrules

import "slices"

// protectedFiles are file names that give code execution later (shell start-up
// files, tool configuration that runs commands). Inside a writable root they
// stay read-only at any depth unless an allowWrite names that exact path.
var protectedFiles = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_aliases", ".bash_logout",
	".zshrc", ".zprofile", ".zshenv", ".zlogin", ".zlogout", ".profile", ".envrc",
	".gitconfig", ".gitmodules",
	".npmrc", ".yarnrc", ".yarnrc.yml", ".pnp.cjs", ".pnp.loader.mjs", ".pnpmfile.cjs",
	"bunfig.toml", ".bunfig.toml", ".bazelrc", ".bazelversion", ".bazeliskrc",
	".pre-commit-config.yaml", "lefthook.yml", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml",
	"gradle-wrapper.properties", "maven-wrapper.properties", ".devcontainer.json",
	".ripgreprc", "pyrightconfig.json", ".mcp.json", ".claude.json",
}

// protectedDirs are directory names whose whole contents stay read-only, for
// the same reason.
var protectedDirs = []string{
	".vscode", ".idea", ".husky", ".cargo", ".devcontainer", ".yarn", ".mvn",
	".claude", ".sbx",
}

// protectedNested are protected paths of two components (a directory of that
// name holding the protected entry), such as ~/.config/git.
var protectedNested = [][2]string{{".config", "git"}}

// gitDirProtected are the entries of every git directory that stay read-only:
// hooks run code, and config can name programs (core.fsmonitor, core.pager …).
var gitDirProtected = []string{"hooks", "config"}

// ProtectedFiles returns the protected file names (a copy).
func ProtectedFiles() []string { return slices.Clone(protectedFiles) }

// ProtectedDirs returns the protected directory names (a copy).
func ProtectedDirs() []string { return slices.Clone(protectedDirs) }

// isProtectedName reports whether a base name is protected, and whether it
// is protected as a directory.
func isProtectedName(name string) (protected, dir bool) {
	for _, n := range protectedFiles {
		if n == name {
			return true, false
		}
	}
	for _, n := range protectedDirs {
		if n == name {
			return true, true
		}
	}
	return false, false
}
