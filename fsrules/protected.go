package fsrules

// ProtectedFiles are file names that give code execution later (shell start-up
// files, tool configuration that runs commands). Inside a writable root they
// stay read-only at any depth unless an allowWrite names that exact path.
var ProtectedFiles = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_aliases", ".bash_logout",
	".zshrc", ".zprofile", ".zshenv", ".zlogin", ".zlogout", ".profile", ".envrc",
	".gitconfig", ".gitmodules",
	".npmrc", ".yarnrc", ".yarnrc.yml", ".pnp.cjs", ".pnp.loader.mjs", ".pnpmfile.cjs",
	"bunfig.toml", ".bunfig.toml", ".bazelrc", ".bazelversion", ".bazeliskrc",
	".pre-commit-config.yaml", "lefthook.yml", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml",
	"gradle-wrapper.properties", "maven-wrapper.properties", ".devcontainer.json",
	".ripgreprc", "pyrightconfig.json", ".mcp.json", ".claude.json",
}

// ProtectedDirs are directory names whose whole contents stay read-only, for
// the same reason.
var ProtectedDirs = []string{
	".vscode", ".idea", ".husky", ".cargo", ".devcontainer", ".yarn", ".mvn",
	".claude", ".sbx",
}

// ProtectedNested are protected paths of two components (a directory of that
// name holding the protected entry), such as ~/.config/git.
var ProtectedNested = [][2]string{{".config", "git"}}

// GitDirProtected are the entries of every git directory that stay read-only:
// hooks run code, and config can name programs (core.fsmonitor, core.pager …).
var GitDirProtected = []string{"hooks", "config"}

// isProtectedName reports whether a base name is protected, and whether it
// is protected as a directory.
func isProtectedName(name string) (protected, dir bool) {
	for _, n := range ProtectedFiles {
		if n == name {
			return true, false
		}
	}
	for _, n := range ProtectedDirs {
		if n == name {
			return true, true
		}
	}
	return false, false
}
