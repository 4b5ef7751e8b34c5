package fsrules

import (
	"slices"
	"strings"
)

// protectedFiles are file names that give code execution later (shell start-up
// files, tool and editor configuration that runs commands). Inside a writable
// root they never change on the host, at any depth, unless an allowWrite
// names that exact path.
var protectedFiles = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_aliases", ".bash_logout",
	".zshrc", ".zprofile", ".zshenv", ".zlogin", ".zlogout", ".profile", ".envrc",
	".gitconfig", ".gitmodules",
	".npmrc", ".yarnrc", ".yarnrc.yml", ".pnp.cjs", ".pnp.loader.mjs", ".pnpmfile.cjs",
	"bunfig.toml", ".bunfig.toml", ".bazelrc", ".bazelversion", ".bazeliskrc",
	".pre-commit-config.yaml", "lefthook.yml", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml",
	"gradle-wrapper.properties", "maven-wrapper.properties", ".devcontainer.json",
	".ripgreprc", "pyrightconfig.json", ".mcp.json", ".claude.json",
	// Editors and debuggers that read a project-local file and run it.
	".exrc", ".vimrc", ".gvimrc", ".nvimrc", ".nvim.lua", ".lvimrc", ".dir-locals.el", ".dir-locals-2.el",
	".gdbinit", ".lldbinit", ".pdbrc",
	// Tool managers whose project files carry hooks and tasks.
	"mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml", ".aider.conf.yml",
	// Toolchain pins that can name a path to run instead of the tool.
	"rust-toolchain", "rust-toolchain.toml", ".tool-versions",
	".cshrc", ".tcshrc", ".kshrc", ".mkshrc", ".login", ".logout", ".hgrc", ".lazy.lua", ".tmux.conf",
	".tigrc", ".perldb", ".octaverc", ".lessfilter", ".terraformrc",
}

// protectedDirs are directory names whose whole contents are protected, for
// the same reason: editor and coding-agent configuration (tasks, MCP
// servers, hooks), git hook managers, sbx's own.
var protectedDirs = []string{
	".vscode", ".idea", ".husky", ".cargo", ".devcontainer", ".yarn", ".mvn",
	".claude", ".sbx", ".codex", ".cursor", ".gemini", ".windsurf", ".continue", ".zed",
	".fleet", ".amazonq", ".roo", ".kiro", ".mise", ".hg", ".helix", ".vim", ".nvim", ".ipython",
}

// protectedNested are protected paths of two components (a directory of that
// name holding the protected entry), such as ~/.config/git.
var protectedNested = [][2]string{{".config", "git"}}

// gitDirProtected are the entries of every git directory that an exact
// allowWrite may open (see [GitEntry] for what else a git directory keeps).
var gitDirProtected = []string{"hooks", "config"}

// homePersistence are paths below the home directory that run code at
// login, in a new shell, in an editor or a tool, or that hold what lets
// someone in (ssh). When a writable root covers them they never change on
// the host unless an allowWrite names one exactly.
var homePersistence = []string{
	".ssh", ".gnupg", ".local/bin", ".local/share/applications", ".local/share/systemd",
	".local/share/direnv", ".config/autostart", ".config/systemd", ".config/environment.d",
	".config/fish", ".config/nvim", ".config/Code", ".config/zsh", ".config/direnv", ".config/mise",
	".config/containers", ".config/pip", ".config/powershell", ".config/git", ".config/gh",
	".pam_environment", ".xprofile", ".xsession", ".xsessionrc", ".xinitrc", ".Xresources",
	".vim", ".emacs", ".emacs.d", ".tmux.conf", ".screenrc", ".inputrc", ".bashrc.d", ".oh-my-zsh",
	".docker", ".kube", ".aws", ".azure", ".config/gcloud", ".m2", ".gradle", ".pip", ".pydistutils.cfg",
	".pypirc", ".netrc", ".condarc", ".Rprofile", ".psqlrc", ".sqliterc", ".gemrc", ".irbrc", ".pryrc",
	".curlrc", ".wgetrc", ".mailcap", ".local/state/sbx", ".config/sbx",
	".config/hg", ".config/tmux", ".config/starship.toml", ".config/kitty", ".config/alacritty",
	".config/wezterm", ".wezterm.lua", ".config/helix", ".local/share/nvim", ".subversion",
	".rustup", ".cargo/config.toml", ".cargo/config", ".config/fontconfig", ".config/readline",
	".ipython", ".jupyter", ".config/ipython", ".bun", ".deno", ".npm-global", ".config/npm",
	// Directories on PATH: Debian's ~/.profile adds ~/bin, rustup ~/.cargo/bin, Go ~/go/bin.
	"bin", ".cargo/bin", "go/bin",
	// Shell completions and version managers' shims and scripts, sourced
	// or run by shell start-up files; editors' and REPLs' start-up files.
	".bash_completion", ".bash_completion.d", ".local/share/bash-completion", ".pyenv", ".rbenv", ".nvm",
	".sdkman", ".asdf", ".config/emacs", ".julia/config", ".vscode-server", ".cursor-server", ".npm-init.js",
	".ansible.cfg", ".tmux", ".zshenv.d", ".config/bash", ".guile", ".sbclrc", ".ghci", ".lein", ".config/procps",
}

// noLinkScan are the persistence directories too large to list for links
// inside them at every start (plugins, toolchains, caches): a link to a
// writable root on their way is followed, links deeper in them are not.
var noLinkScan = []string{".vim", ".emacs.d", ".oh-my-zsh", ".config/nvim", ".local/share/nvim", ".config/Code", ".rustup",
	".m2", ".gradle", ".local/state/sbx", ".pyenv", ".rbenv", ".nvm", ".sdkman", ".asdf", ".vscode-server", ".cursor-server",
	".config/emacs", ".bun", ".deno", ".npm-global", ".ipython", ".jupyter", ".julia/config", ".tmux", ".lein", ".cargo/bin", "go/bin"}

// pythonStartup are the files Python runs at every start from any
// site-packages directory (the user's, below ~/.local/lib, included):
// path configuration files can hold an import line.
func pythonStartup(name string) bool {
	return strings.HasSuffix(name, ".pth") || name == "sitecustomize.py" || name == "usercustomize.py"
}

// ProtectedFiles returns the protected file names (a copy).
func ProtectedFiles() []string { return slices.Clone(protectedFiles) }

// ProtectedDirs returns the protected directory names (a copy).
func ProtectedDirs() []string { return slices.Clone(protectedDirs) }

// HomePersistence returns the protected paths relative to the home
// directory (a copy).
func HomePersistence() []string { return slices.Clone(homePersistence) }

// isProtectedName reports whether a base name is protected, and whether it
// is protected as a directory.
func isProtectedName(name string) (protected, dir bool) {
	if slices.Contains(protectedFiles, name) {
		return true, false
	}
	if slices.Contains(protectedDirs, name) {
		return true, true
	}
	return false, false
}
