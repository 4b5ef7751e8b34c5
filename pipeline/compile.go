package pipeline

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/netrules"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// FSFlags are the filesystem flags of the command line. Relative paths in
// them are relative to the workspace.
type FSFlags struct {
	AllowWrite, DenyWrite, DenyRead, AllowRead []string
	// HomeWorkspace lets the home directory (or an ancestor) be a
	// writable root (--home-workspace).
	HomeWorkspace bool
	// StateDir is sbx's state directory: never writable from a sandbox.
	StateDir string
	// Caches are sbx-owned toolchain caches the sandbox writes directly.
	Caches []string
	// Getenv reads the caller's environment, for the credential files
	// that variables move out of the home directory ($CARGO_HOME,
	// $DOCKER_CONFIG …); nil reads none.
	Getenv func(string) string
	// Glob looks for the files the defaults hide or re-open by pattern
	// (.env*, the public halves of SSH keys); nil means filepath.Glob.
	Glob func(string) ([]string, error)
}

// FSInput gathers the filesystem lists of the merged settings and the flags
// into an [fsrules.Input], each rule anchored at its own base directory and
// labelled with the file, line and key it came from.
func FSInput(s *settings.Settings, flags FSFlags, workspace string) fsrules.Input {
	in := fsrules.Input{Workspace: workspace, HomeRoot: flags.HomeWorkspace, Caches: flags.Caches}
	if s != nil && s.Home != "" {
		glob := flags.Glob
		if glob == nil {
			glob = filepath.Glob
		}
		defaultCredentialDenies(s.Home, workspace, glob, &in)
	}
	envCredentialDenies(flags.Getenv, workspace, &in)
	own := "sbx's own files"
	if flags.StateDir != "" {
		in.Self = append(in.Self, fsrules.Rule{Pattern: flags.StateDir, BaseDir: workspace, Origin: own, Shallow: true})
	}
	if s != nil {
		for _, p := range s.Own {
			in.Self = append(in.Self, fsrules.Rule{Pattern: p, BaseDir: workspace, Origin: own})
		}
	}
	fromSettings := func(es []settings.Entry, key string) []fsrules.Rule {
		var rs []fsrules.Rule
		for _, e := range es {
			rs = append(rs, fsrules.Rule{
				Pattern: e.Value,
				BaseDir: e.File.BaseDir,
				Origin:  fmt.Sprintf("%s:%s (sandbox.filesystem.%s)", e.File.Path, e.Pos, key),
			})
		}
		return rs
	}
	fromFlags := func(vs []string, flag string) []fsrules.Rule {
		var rs []fsrules.Rule
		for _, v := range vs {
			rs = append(rs, fsrules.Rule{Pattern: v, BaseDir: workspace, Origin: "--" + flag})
		}
		return rs
	}
	if s != nil {
		in.AllowWrite = append(in.AllowWrite, fromSettings(s.AllowWrite, "allowWrite")...)
		in.DenyWrite = append(in.DenyWrite, fromSettings(s.DenyWrite, "denyWrite")...)
		in.DenyRead = append(in.DenyRead, fromSettings(s.DenyRead, "denyRead")...)
		in.AllowRead = append(in.AllowRead, fromSettings(s.AllowRead, "allowRead")...)
		permissionPaths(s, workspace, &in)
	}
	in.AllowWrite = append(in.AllowWrite, fromFlags(flags.AllowWrite, "allow-write")...)
	in.DenyWrite = append(in.DenyWrite, fromFlags(flags.DenyWrite, "deny-write")...)
	in.DenyRead = append(in.DenyRead, fromFlags(flags.DenyRead, "deny-read")...)
	in.AllowRead = append(in.AllowRead, fromFlags(flags.AllowRead, "allow-read")...)
	return in
}

// NetFlags are the network flags of the command line.
type NetFlags struct {
	AllowDomain, DenyDomain []string
}

// NetInput compiles the network lists of the merged settings and the flags.
// Strict is sandbox.network.strictAllowlist when a file sets it; otherwise
// sbx's default: strict unless the session is interactive.
func NetInput(s *settings.Settings, flags NetFlags, interactive bool) (*NetPolicy, error) {
	var allow, deny []netrules.Entry
	if s != nil {
		for _, e := range s.AllowedDomains {
			allow = append(allow, netrules.Entry{Pattern: e.Value, Origin: fmt.Sprintf("%s:%s", e.File.Path, e.Pos)})
		}
		for _, e := range s.DeniedDomains {
			deny = append(deny, netrules.Entry{Pattern: e.Value, Origin: fmt.Sprintf("%s:%s", e.File.Path, e.Pos)})
		}
	}
	for _, d := range flags.AllowDomain {
		allow = append(allow, netrules.Entry{Pattern: d, Origin: "--allow-domain"})
	}
	for _, d := range flags.DenyDomain {
		deny = append(deny, netrules.Entry{Pattern: d, Origin: "--deny-domain"})
	}
	rules, err := netrules.Compile(allow, deny)
	if err != nil {
		return nil, err
	}
	strict := !interactive
	if s != nil && s.StrictAllowlist.Set {
		strict = s.StrictAllowlist.V
	}
	return &NetPolicy{Rules: rules, Strict: strict}, nil
}

// permissionPaths adds the paths of permission rules to the sandbox lists,
// as Claude Code does: Edit allow rules join allowWrite, Edit deny rules
// denyWrite, Read deny rules denyRead. Each rule is parsed and anchored by
// the gate's own parser ([ParseRule]), so the sandbox enforces at least
// what the gate denies for the same rule: Read(.env) and Read(./.env) hide
// .env at any depth of the workspace in both. Deny patterns with wildcards
// cover what exists at start, and fsrules checks later writes against them
// at the merge; allow patterns with wildcards cannot make anything
// writable and are left to the permission layer (fsrules warns).
func permissionPaths(s *settings.Settings, cwd string, in *fsrules.Input) {
	for _, pr := range s.Perm.Rules {
		r, _, err := ParseRule(pr, s.Home)
		if err != nil || r == nil || r.pathRule == nil {
			continue // the gate reports a bad rule; it never widens the sandbox
		}
		var list *[]fsrules.Rule
		switch {
		case r.Tool == "Read" && r.Behavior == BehaviorDeny:
			list = &in.DenyRead
		case r.Tool == "Edit" && r.Behavior == BehaviorDeny:
			list = &in.DenyWrite
		case r.Tool == "Edit" && r.Behavior == BehaviorAllow:
			list = &in.AllowWrite
		default:
			continue
		}
		abs := strings.TrimSuffix(r.pathRule.resolved(settingsBase(pr, cwd), cwd), "/**")
		*list = append(*list, fsrules.Rule{Pattern: abs, BaseDir: cwd, Origin: pr.Where()})
	}
}

// CredentialsConfig turns sandbox.credentials into the creds package's
// configuration.
func CredentialsConfig(s *settings.Settings) creds.Config {
	cfg := creds.Config{Vars: map[string]creds.VarConfig{}}
	if s == nil {
		return cfg
	}
	for name, v := range s.Credentials.EnvVars {
		cfg.Vars[name] = creds.VarConfig{Mode: creds.Mode(v.Mode), Hosts: v.Hosts}
	}
	for _, p := range s.Credentials.Patterns {
		cfg.Patterns = append(cfg.Patterns, p.Value)
	}
	return cfg
}

// credentialFiles are denied for reading by default (each can be re-opened
// with allowRead). Relative to the home directory.
var credentialFiles = []string{".ssh", ".aws", ".config/gcloud", ".azure", ".kube", ".docker/config.json", ".netrc",
	".git-credentials", ".config/gh", ".npmrc", ".pypirc", ".cargo/credentials", ".cargo/credentials.toml", ".gnupg",
	".claude/.credentials.json", ".config/sbx/credentials.json",
	// git's other credential store, podman's registry logins, and other
	// tools' tokens and passwords.
	".config/git/credentials", ".config/containers/auth.json", ".pgpass", ".my.cnf", ".mylogin.cnf", ".vault-token",
	".config/hub", ".terraform.d/credentials.tfrc.json", ".gem/credentials", ".config/rclone/rclone.conf", ".s3cfg",
	".boto", ".cache/huggingface/token", ".huggingface/token", ".pulumi/credentials.json", ".databrickscfg",
	".authinfo", ".authinfo.gpg", ".config/github-copilot", ".m2/settings-security.xml", ".config/op",
	// Claude Code's state (an API key from /login, MCP server secrets) and
	// every past conversation.
	".claude.json", ".claude/projects", ".password-store", ".local/share/keyrings",
	// Shell and REPL histories hold typed tokens.
	".bash_history", ".zsh_history", ".zhistory", ".histfile", ".sh_history", ".local/share/fish/fish_history",
	".python_history", ".node_repl_history", ".psql_history", ".mysql_history", ".sqlite_history",
	".rediscli_history", ".irb_history", ".pry_history", ".lesshst", ".local/share/nvim/shada", ".viminfo"}

// credentialEnv are the variables that move credential files out of the
// home directory, and the files (relative to a directory the variable
// names; "" for the path itself) denied there too. A list variable
// (KUBECONFIG) names several, separated by colons.
var credentialEnv = []struct {
	name  string
	files []string
}{
	{"CARGO_HOME", []string{"credentials", "credentials.toml"}},
	{"DOCKER_CONFIG", []string{"config.json"}},
	{"NPM_CONFIG_USERCONFIG", []string{""}}, {"npm_config_userconfig", []string{""}},
	{"AWS_SHARED_CREDENTIALS_FILE", []string{""}}, {"AWS_CONFIG_FILE", []string{""}},
	{"KUBECONFIG", []string{""}}, {"GNUPGHOME", []string{""}}, {"GH_CONFIG_DIR", []string{""}},
	{"CLOUDSDK_CONFIG", []string{""}}, {"AZURE_CONFIG_DIR", []string{""}}, {"PASSWORD_STORE_DIR", []string{""}},
	{"NETRC", []string{""}}, {"PIP_CONFIG_FILE", []string{""}},
	{"REGISTRY_AUTH_FILE", []string{""}}, {"PGPASSFILE", []string{""}}, {"MYSQL_TEST_LOGIN_FILE", []string{""}},
	{"XDG_RUNTIME_DIR", []string{"containers/auth.json"}},
	{"XDG_CONFIG_HOME", []string{"git/credentials", "containers/auth.json", "gh", "hub", "rclone/rclone.conf", "github-copilot", "op"}},
}

// envCredentialDenies adds the credential files the environment moved
// to denyRead; a relative path is taken from the workspace, where the
// tools in the sandbox start. A path that holds the workspace ("/", the
// home directory) is not denied: it would hide the workspace itself.
func envCredentialDenies(getenv func(string) string, workspace string, in *fsrules.Input) {
	if getenv == nil {
		return
	}
	for _, v := range credentialEnv {
		for _, dir := range filepath.SplitList(getenv(v.name)) {
			if dir == "" {
				continue
			}
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(workspace, dir)
			}
			if fsrules.Within(workspace, filepath.Clean(dir)) {
				continue
			}
			origin := "credential files named by $" + v.name + " (sbx default; re-open with allowRead)"
			for _, f := range v.files {
				in.DenyRead = append(in.DenyRead, fsrules.Rule{Pattern: filepath.Join(dir, f), BaseDir: dir, Origin: origin, Optional: true})
			}
		}
	}
}

// credentialReopen are re-opened inside those by default: public halves.
var credentialReopen = []string{".ssh/known_hosts", ".ssh/*.pub", ".ssh/config"}

// defaultCredentialDenies adds the credential files to denyRead, and any
// .env* file in the home directory or in a directory above the workspace
// (what exists at start; inside the workspace they stay readable).
func defaultCredentialDenies(home, workspace string, glob func(string) ([]string, error), in *fsrules.Input) {
	origin := "credential files (sbx default; re-open with allowRead)"
	for _, f := range credentialFiles {
		in.DenyRead = append(in.DenyRead, fsrules.Rule{Pattern: filepath.Join(home, f), BaseDir: home, Origin: origin, Optional: true})
	}
	for _, f := range credentialReopen {
		matches, _ := glob(filepath.Join(home, f))
		for _, m := range matches {
			in.AllowRead = append(in.AllowRead, fsrules.Rule{Pattern: m, BaseDir: home, Origin: origin, Optional: true})
		}
	}
	dirs := []string{home}
	for d := filepath.Dir(workspace); ; d = filepath.Dir(d) {
		if d != home { // a workspace in the home lists it once
			dirs = append(dirs, d)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, d := range dirs {
		// One made during the run stays unreadable too.
		in.DenyReadNames = append(in.DenyReadNames, fsrules.NamePattern{Dir: d, Name: ".env*", Origin: origin})
		matches, _ := glob(filepath.Join(d, ".env*"))
		for _, m := range matches {
			if !fsrules.Within(m, workspace) {
				in.DenyRead = append(in.DenyRead, fsrules.Rule{Pattern: m, BaseDir: d, Origin: origin, Optional: true})
			}
		}
	}
}
