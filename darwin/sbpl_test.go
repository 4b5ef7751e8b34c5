package darwin

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbx-sandbox/sbx/fsrules"
)

var update = flag.Bool("update", false, "rewrite golden files")

func everyKey() ProfileInput {
	p := func(path string, dir bool) fsrules.Path {
		return fsrules.Path{Path: path, Exists: true, Dir: dir, Origin: "t"}
	}
	return ProfileInput{
		FS: &fsrules.Policy{
			Workspace:      "/Users/dev/proj",
			Writable:       []fsrules.Path{p("/Users/dev/proj", true), p("/Users/dev/.cache/go", true), p("/Users/dev/notes.txt", false)},
			ExactAllow:     []string{"/Users/dev/proj/.envrc"},
			DenyWrite:      []fsrules.Path{p("/Users/dev/proj/vendor", true), {Path: "/Users/dev/proj/new", Origin: "t"}},
			DenyWriteGlobs: []fsrules.Path{{Path: "/Users/dev/proj/**/.env", Origin: "Edit(.env)"}},
			DenyRead:       []fsrules.Path{p("/Users/dev/.ssh", true), p("/Users/dev/proj/.env", false)},
			AllowRead:      []fsrules.Path{p("/Users/dev/.ssh/known_hosts", false)},
			HomeLinks:      []fsrules.Path{p("/Users/dev/proj/dotfiles/zshrc", false), p("/Users/dev/proj/dotfiles/nvim", true)},
			Named: []fsrules.Named{{List: "denyRead", Path: "/Users/dev/proj/keys/id", Origin: "t",
				Entries: []string{"/Users/dev/proj/keys", "/Users/dev/proj/cur", "/Users/dev/proj/v1", "/Users/dev/proj/v1/id"},
				Links:   []string{"/Users/dev/proj/keys", "/Users/dev/proj/cur"}}},
		},
		TmpDir:       "/private/var/folders/xy/zz/T/sbx-run-1",
		UserCacheDir: "/private/var/folders/xy/zz/C/sbx-run-1",
		ProxyPort:    40123,
		UnixSockets:  []string{"/var/run/docker.sock"},
		LocalBinding: true,
		TrustdLookup: true,
	}
}

func TestProfileGolden(t *testing.T) {
	tests := map[string]ProfileInput{
		"default": {FS: &fsrules.Policy{Workspace: "/Users/dev/proj", Writable: []fsrules.Path{{Path: "/Users/dev/proj", Exists: true, Dir: true}}},
			TmpDir: "/private/var/folders/xy/zz/T/sbx-run-1", UserCacheDir: "/private/var/folders/xy/zz/C/sbx-run-1", ProxyPort: 40123},
		"every-key":       everyKey(),
		"deny-moves":      denyMoves(),
		"unix-sockets":    socketsInput(),
		"writable-home":   writableHome(),
		"linked-worktree": {FS: linkedWorktree(t), TmpDir: "/private/var/folders/xy/T/sbx-run", ProxyPort: 40123},
		"mach-lookup": {FS: &fsrules.Policy{Workspace: "/Users/dev/proj", Writable: []fsrules.Path{{Path: "/Users/dev/proj", Exists: true, Dir: true}}},
			TmpDir: "/private/var/folders/xy/T/sbx-run", ProxyPort: 40123, MachLookup: []string{"com.apple.SecurityServer", "com.example.agent*"}},
		"tagged": {FS: &fsrules.Policy{Workspace: "/Users/dev/proj", Writable: []fsrules.Path{{Path: "/Users/dev/proj", Exists: true, Dir: true}},
			DenyRead: []fsrules.Path{{Path: "/Users/dev/.ssh", Exists: true, Dir: true}}},
			TmpDir: "/private/var/folders/xy/T/sbx-run", ProxyPort: 40123, Tag: "sbx_0123456789abcdef01234567"},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Profile(in)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".sb")
			if *update {
				os.WriteFile(path, []byte(got), 0o644)
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("profile (-want +got):\n%s", diff)
			}
			if _, err := parseSexprs(got); err != nil {
				t.Errorf("profile does not parse: %v", err)
			}
		})
	}
}

func TestProfileMapping(t *testing.T) {
	prof, err := Profile(everyKey())
	if err != nil {
		t.Fatal(err)
	}
	q := func(re string) string { return strings.ReplaceAll(re, `\`, `\\`) } // as Quote writes it
	for _, want := range []string{
		`(deny default)`,
		`(allow file-read*)`,
		`(deny file-read*` + "\n" + `  (subpath "/Users/dev/.ssh")`,
		`(allow file-read*` + "\n" + `  (literal "/Users/dev/.ssh/known_hosts"))`,
		`(subpath "/Users/dev/proj")`, `(subpath "/private/var/folders/xy/zz/T/sbx-run-1")`, `(subpath "/private/var/folders/xy/zz/C/sbx-run-1")`, `(literal "/Users/dev/notes.txt")`,
		`(deny file-write*` + "\n" + `  (regex "^/Users/dev/proj/` + caseless("vendor") + `(/.*)?$")` + "\n" +
			`  (regex "^/Users/dev/proj/` + caseless("new") + `$")` + "\n" + `  (regex "^/Users/dev/proj/` + q(caseless(".env")) + `$"))`,
		`(deny file-write-unlink` + "\n" + `  (regex "^/Users/dev/proj$")` + "\n" + `  (regex "^/Users/dev/\\.cache/go$")` + "\n" +
			`  (regex "^/private/var/folders/xy/zz/T/sbx-run-1$")` + "\n" + `  (regex "^/private/var/folders/xy/zz/C/sbx-run-1$")` + "\n" +
			`  (regex "^/Users/dev/proj/` + q(caseless(".env")) + `$")`,
		`(regex "^/Users/dev/proj(/.*)?/` + q(caseless(".bashrc")) + `$")`,
		`(regex "^/Users/dev/proj(/.*)?/` + q(caseless(".vscode")) + `(/.*)?$")`,
		`(regex "^/Users/dev/proj(/.*)?/` + q(caseless(".git")) + `/((.*/)?(` + q(caseless("hooks")) + `(/.*)?|` + q(caseless("config")) + `|`,
		`(sysctl-name "hw.ncpu")`, `(sysctl-name-prefix "hw.optional.")`,
		`(allow file-write*` + "\n" + `  (subpath "/Users/dev/proj/.envrc"))`,
		`(allow network-outbound (remote ip "localhost:40123"))`,
		`(remote unix-socket (subpath "/var/run/docker.sock"))`,
		`(global-name "com.apple.trustd.agent")`,
	} {
		if !strings.Contains(prof, want) {
			t.Errorf("profile lacks %s", want)
		}
	}
	// Outbound only to the proxy and the allowed sockets.
	forms, _ := parseSexprs(prof)
	for _, a := range []access{{"network-outbound", "93.184.216.34:443", "IP"}, {"network-outbound", "/var/run/other.sock", "SOCKET"}} {
		if decide(t, forms, a) {
			t.Errorf("%s %s allowed", a.op, a.path)
		}
	}
	// No network without a proxy; Unix sockets only in the private TMPDIR.
	in := everyKey()
	in.ProxyPort, in.UnixSockets, in.LocalBinding = 0, nil, false
	prof, _ = Profile(in)
	forms, _ = parseSexprs(prof)
	for _, a := range []access{{"network-outbound", "localhost:40123", "IP"}, {"network-bind", "localhost:8080", "IP"},
		{"network-outbound", "/var/run/docker.sock", "SOCKET"}, {"network-bind", "/Users/dev/proj/s.sock", "SOCKET"}} {
		if decide(t, forms, a) {
			t.Errorf("without a proxy or sockets, %s %s allowed", a.op, a.path)
		}
	}
	if strings.Contains(prof, "(remote ip") || strings.Contains(prof, "(local ip") {
		t.Errorf("network allowed without a proxy:\n%s", prof)
	}
	// Every protected name is covered, at any depth, in either case.
	for _, n := range append(fsrules.ProtectedFiles(), fsrules.ProtectedDirs()...) {
		if !strings.Contains(prof, strings.ReplaceAll(caseless(n), `\`, `\\`)) {
			t.Errorf("protected name %s not covered", n)
		}
	}
	// What no profile may allow: reading every sysctl (kern.procargs2
	// shows sbx's environment, with the real secrets), the keychain, or
	// services that launch programs outside the sandbox.
	if strings.Contains(prof, "(allow sysctl-read)") || strings.Contains(prof, "kern.proc") {
		t.Error("sysctl-read is not limited to the allow-list")
	}
	for _, svc := range machRefused {
		if strings.Contains(prof, `"`+svc+`"`) {
			t.Errorf("the profile lets the sandbox look up %s", svc)
		}
	}
}

// linkedWorktree is a workspace that is a linked worktree of a repository
// outside it, compiled by fsrules as sbx compiles it.
func linkedWorktree(t *testing.T) *fsrules.Policy {
	t.Helper()
	h := &fakeFS{
		dirs: map[string]bool{"/Users": true, "/Users/dev": true, "/Users/dev/wt": true, "/Users/dev/main": true,
			"/Users/dev/main/.git": true, "/Users/dev/main/.git/objects": true, "/Users/dev/main/.git/worktrees": true,
			"/Users/dev/main/.git/worktrees/wt": true},
		files: map[string]string{
			"/Users/dev/wt/.git":                          "gitdir: /Users/dev/main/.git/worktrees/wt\n",
			"/Users/dev/main/.git/HEAD":                   "ref: refs/heads/main\n",
			"/Users/dev/main/.git/worktrees/wt/HEAD":      "ref: refs/heads/wt\n",
			"/Users/dev/main/.git/worktrees/wt/commondir": "../..\n",
			"/Users/dev/main/.git/worktrees/wt/gitdir":    "/Users/dev/wt/.git\n",
		},
	}
	pol, err := fsrules.Compile(fsrules.Input{Workspace: "/Users/dev/wt"},
		fsrules.Host{Home: "/Users/dev", EvalSymlinks: h.eval, Lstat: h.lstat, ReadFile: h.readFile,
			Glob: func(string) ([]string, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// The generator finds the git directories outside the workspace by the
// origin fsrules gives them.
func TestGitDirRootFromCompile(t *testing.T) {
	var got []string
	for _, w := range linkedWorktree(t).Writable {
		if isGitDirRoot(w) {
			got = append(got, w.Path)
		}
	}
	if want := []string{"/Users/dev/main/.git/worktrees/wt", "/Users/dev/main/.git"}; !slices.Equal(got, want) {
		t.Errorf("git directory roots %q, want %q", got, want)
	}
}

// checkAccess asks the profile about each access and fails on a wrong
// answer.
func checkAccess(t *testing.T, prof string, allow, deny []access) {
	t.Helper()
	forms, err := parseSexprs(prof)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range allow {
		if !decide(t, forms, a) {
			t.Errorf("%s %s (%s) denied", a.op, a.path, a.vtype)
		}
	}
	for _, a := range deny {
		if decide(t, forms, a) {
			t.Errorf("%s %s (%s) allowed", a.op, a.path, a.vtype)
		}
	}
}

// A denyWrite name holding wildcard characters is refused as written too,
// existing or not, besides what the pattern matches; an escaped pattern
// is the literal alone.
func TestLiteralGlobNames(t *testing.T) {
	in := everyKey()
	in.FS.DenyWriteGlobs = []fsrules.Path{{Path: "/Users/dev/proj/data/run[1].json"}, {Path: `/Users/dev/proj/x\[2\].txt`}}
	prof, err := Profile(in)
	if err != nil {
		t.Fatal(err)
	}
	w := func(p string) access { return access{op: "file-write-create", path: p} }
	checkAccess(t, prof, []access{w("/Users/dev/proj/data/run2.json"), w("/Users/dev/proj/x2.txt")},
		[]access{w("/Users/dev/proj/data/run[1].json"), w("/Users/dev/proj/data/run1.json"), w("/Users/dev/proj/x[2].txt")})
}

// The run's own folders in the per-user temporary and cache directories
// are writable (xcrun_db, clang's module cache, Foundation's staging
// folders land there through DIRHELPER_USER_DIR_SUFFIX); the rest of those
// directories, shared by every process of the user, is not.
func TestUserDirWrites(t *testing.T) {
	prof, err := Profile(everyKey())
	if err != nil {
		t.Fatal(err)
	}
	w := func(p string) access { return access{op: "file-write-create", path: p} }
	checkAccess(t, prof,
		[]access{w("/private/var/folders/xy/zz/T/sbx-run-1/xcrun_db-Q5a5z5VJ"),
			w("/private/var/folders/xy/zz/C/sbx-run-1/org.llvm.clang.dev/ModuleCache/X.pcm"),
			w("/private/var/folders/xy/zz/T/sbx-run-1/TemporaryItems/a")},
		[]access{w("/private/var/folders/xy/zz/T/xcrun_db-Q5a5z5VJ"), w("/private/var/folders/xy/zz/C/org.llvm.clang.dev/ModuleCache/X.pcm"),
			w("/private/var/folders/xy/zz/C/sbx-run-10/x"), w("/private/var/folders/xy/zz/T/sbx-run-2/x"), w("/tmp/xcrun_db-1")})
}

// Git's hooks and config cannot change in any git directory the command
// may write: the workspace's, nested ones, a linked worktree's outside the
// workspace and its repository's; .git cannot be moved away or replaced by
// a pointer file; git's own data stays writable.
func TestGitProtection(t *testing.T) {
	for _, tag := range []string{"", "sbx_t"} {
		prof, err := Profile(ProfileInput{FS: linkedWorktree(t), TmpDir: "/private/tmp/run", Tag: tag})
		if err != nil {
			t.Fatal(err)
		}
		const m, w = "/Users/dev/main/.git", "/Users/dev/wt"
		mod, cr, ul := "file-write-data", "file-write-create", "file-write-unlink"
		checkAccess(t, prof, []access{
			{cr, m + "/objects/ab/cdef", ""}, {mod, m + "/refs/heads/wt", ""}, {cr, m + "/logs/HEAD", ""},
			{mod, m + "/worktrees/wt/index", ""}, {mod, m + "/worktrees/wt/HEAD", ""}, {cr, m + "/worktrees/wt/index.lock", ""},
			{ul, m + "/worktrees/wt/index.lock", ""}, {mod, m + "/packed-refs", ""},
			{cr, w + "/src/main.go", ""}, {ul, w + "/src/main.go", ""},
			{cr, w + "/sub/.git/objects/ab/cd", ""}, {mod, w + "/sub/.git/HEAD", ""},
			{cr, w + "/sub/.git/refs/remotes/origin/main", ""}, {cr, m + "/logs/refs/remotes/origin/main", ""},
			{cr, w + "/sub/.git/branches", "DIRECTORY"},
			{cr, w + "/gitdir", ""}, {cr, w + "/hooks/useThing.ts", ""}, {mod, w + "/config", ""},
		}, []access{
			{cr, m + "/hooks/pre-commit", ""}, {mod, m + "/hooks/pre-commit", ""}, {ul, m + "/hooks", "DIRECTORY"},
			{mod, m + "/config", ""}, {ul, m + "/config", ""}, {cr, m + "/CONFIG", ""}, {cr, m + "/Hooks/post-checkout", ""},
			{mod, m + "/worktrees/wt/commondir", ""}, {mod, m + "/worktrees/wt/gitdir", ""}, {cr, m + "/worktrees/wt/config.worktree", ""},
			{cr, m + "/worktrees/wt/hooks/pre-commit", ""}, {cr, m + "/objects/info/alternates", ""},
			{cr, m + "/modules/lib/hooks/post-checkout", ""}, {mod, m + "/modules/lib/config", ""}, {mod, m + "/modules/vendor/x/config", ""},
			{ul, m + "/worktrees/wt", "DIRECTORY"}, {ul, m + "/worktrees", "DIRECTORY"},
			{mod, w + "/.git", ""}, {ul, w + "/.git", ""}, {cr, w + "/sub/.git", ""}, {cr, w + "/sub/.git", "SYMLINK"},
			{ul, w + "/sub/.git", "DIRECTORY"}, {cr, w + "/sub/.GIT", ""}, {cr, w + "/sub/.git", "DIRECTORY"},
			{cr, m + "/q/config", ""}, {cr, m + "/q/hooks/post-checkout", ""}, {mod, m + "/modules/lib/q/config", ""},
			{cr, w + "/sub/.git/hooks/pre-commit", ""}, {mod, w + "/sub/.git/config", ""}, {cr, w + "/sub/.Git/Config", ""},
			{cr, w + "/sub/.git/modules/a/b/hooks/x", ""}, {cr, w + "/sub/.git/worktrees/x/commondir", ""},
			{cr, w + "/.config/git/config", ""},
			{cr, w + "/sub/.git/config.lock", ""}, {cr, m + "/modules/lib/config.lock", ""},
			{cr, w + "/sub/.git/remotes/origin", ""}, {cr, m + "/branches/origin", ""}, {cr, m + "/Remotes", "DIRECTORY"},
			// the outside git directory: no .git made in it, no nested
			// git directory moved about
			{cr, m + "/x/.git", ""}, {cr, m + "/x/.git", "DIRECTORY"}, {cr, m + "/modules/new", "DIRECTORY"},
		})
	}
}

// A rename carries a directory's content past the rules on names: no
// repository can be made where the command writes and moved into the
// workspace, no git directory moved about inside .git to be edited, and
// no writable directory moved away to be edited elsewhere or swapped for
// a link (red-team finding: each step below was allowed). Ordinary
// renames and removals stay allowed.
func TestRenamesCarryNothingPastTheRules(t *testing.T) {
	in := everyKey()
	in.FS.Caches = []fsrules.Path{{Path: "/Users/dev/.cache/sbx/projects/proj-1", Exists: true, Dir: true}}
	prof, err := Profile(in)
	if err != nil {
		t.Fatal(err)
	}
	const w, tmp = "/Users/dev/proj", "/private/var/folders/xy/zz/T/sbx-run-1"
	const cache, ucache = "/Users/dev/.cache/sbx/projects/proj-1", "/private/var/folders/xy/zz/C/sbx-run-1"
	mod, cr, ul, d := "file-write-data", "file-write-create", "file-write-unlink", "DIRECTORY"
	checkAccess(t, prof, []access{
		{ul, w + "/src", d}, {cr, w + "/src2", d}, {ul, tmp + "/build", d}, {cr, tmp + "/x/HEAD", ""},
		{cr, cache + "/vcs/0a1b/config", ""}, {cr, cache + "/vcs/0a1b/hooks/README.sample", ""},
		{mod, w + "/.git/refs/heads/main", ""}, {cr, w + "/.git/objects/ab/cd", ""},
		// git's own directories, in a submodule's git directory too
		{cr, w + "/.git/objects/ab", d}, {ul, w + "/.git/objects/ab", d}, {cr, w + "/.git/refs/heads/feat", d},
		{cr, w + "/.git/modules/lib/objects/ab", d}, {cr, w + "/.git/modules/lib/refs/heads/feat", d},
		{ul, w + "/.git/modules/lib/rebase-merge", d}, {cr, w + "/.git/modules/lib/index.lock", ""},
		{cr, w + "/.git/modules/lib/FETCH_HEAD", ""}, {cr, w + "/.git/worktrees/wt/logs/refs", d},
		// HEAD: git's, in a .git
		{mod, w + "/.git/HEAD", ""}, {cr, w + "/.git/modules/lib/HEAD", ""}, {cr, w + "/.git/logs/HEAD", ""},
		{cr, w + "/sub/.git/HEAD", ""}, {cr, w + "/.git/refs/remotes/origin/HEAD", ""}, {cr, w + "/.git/logs/refs/remotes/origin/HEAD", ""},
		{cr, w + "/.git/sequencer/head", ""}, {cr, w + "/.git/worktrees/wt/HEAD", ""}, {cr, w + "/.git/modules/a/b/logs/HEAD", ""},
		// branches named like git's own directories
		{cr, w + "/.git/refs/heads/modules", d}, {cr, w + "/.git/refs/heads/objects", d}, {cr, w + "/.git/logs/refs/heads/worktrees", d},
		{cr, w + "/.git/lfs/objects", d}, {ul, w + "/.git/refs/remotes/origin/feature", d},
		{cr, w + "/.git/modules/lib/rebase-merge", d}, {cr, w + "/.git/modules/lib/logs/refs/heads/x", d},
		// git's symbolic links? none; links elsewhere stay free
		{cr, w + "/src/link", "SYMLINK"}, {cr, w + "/README", ""}, {cr, w + "/Stra\u00dfe.txt", ""},
		{cr, w + "/components/head", d}, {cr, w + "/components/head/title.html", ""},
		{cr, w + "/.build/repositories/foo-1a2b/objects/ab/cd", ""}, {cr, w + "/mirrors/foo.git/refs/heads/x", ""},
		// directories git makes as it first needs them: a worktree's refs
		// (bisect), a submodule's lfs and rr-cache; branches named objects/x
		{cr, w + "/.git/worktrees/wt/refs", d}, {cr, w + "/.git/worktrees/wt/info", d},
		{cr, w + "/.git/modules/lib/lfs", d}, {cr, w + "/.git/modules/lib/lfs/objects", d}, {cr, w + "/.git/modules/lib/rr-cache", d},
		{cr, w + "/.git/modules/lib/refs/heads/objects", d}, {cr, w + "/.git/modules/lib/logs/refs/heads/objects", d},
	}, []access{
		// mv proj $TMPDIR/p; edit p/.git/config; mv p proj (or ln -s elsewhere proj)
		{ul, w, d}, {ul, tmp, d}, {ul, ucache, d}, {ul, cache, d}, {ul, "/Users/dev/.cache/go", d},
		// git init $TMPDIR/x; configure it; mv $TMPDIR/x proj/tools
		{cr, tmp + "/x/.git", d}, {cr, tmp + "/x/.git/config", ""}, {cr, ucache + "/x/.git", d},
		{cr, cache + "/x/.git", d}, {cr, cache + "/x/.git/hooks/pre-commit", ""},
		// a bare layout under another name, renamed to .git
		{cr, w + "/sub/.git", d}, {cr, w + "/.GIT", d},
		// mv .git/modules/sub .git/q; edit q/config; mv back
		{mod, w + "/.git/q/config", ""}, {cr, w + "/.git/q/hooks/post-merge", ""}, {mod, w + "/.git/x/y/config.worktree", ""},
		// mv .git/modules/lib $TMPDIR/m; edit m/config; mv it back (or a
		// filled directory in, or objects/info with alternates)
		{ul, w + "/.git/modules/lib", d}, {cr, w + "/.git/modules/lib", d}, {cr, w + "/.git/modules/a/b", d},
		{ul, w + "/.git/modules", d}, {ul, w + "/.git/worktrees/wt", d}, {cr, w + "/.git/worktrees/x", d},
		{ul, w + "/.git/objects/info", d}, {cr, w + "/.git/objects", d}, {ul, w + "/.git/modules/lib/objects/info", d},
		{cr, w + "/.git/modules/a/objects/b/hooks", d}, {cr, w + "/.git/modules/lib/info/hooks", d},
		// a bare layout: a HEAD outside .git, the workspace's own top too
		{cr, w + "/HEAD", ""}, {mod, w + "/HEAD", ""}, {cr, w + "/sub/head", ""}, {cr, w + "/sub/.GIT-x/HEAD", ""},
		// names APFS takes for protected ones: KELVIN SIGN, LONG S
		{cr, w + "/.hus\u212ay", d}, {cr, w + "/.v\u017fcode/tasks.json", ""}, {cr, w + "/.git/hoo\u212as/pre-commit", ""},
		{cr, w + "/lefthoo\u212a.yml", ""}, {cr, w + "/.gitmodule\u017f", ""},
		// a third review: ligatures and sharp s that APFS folds to letters
		{cr, w + "/.pnpm\ufb01le.cjs", ""}, {cr, w + "/bun\ufb01g.toml", ""}, {cr, w + "/.pre-commit-con\ufb01g.yaml", ""},
		{cr, w + "/.git/con\ufb01g.worktree", ""}, {cr, w + "/.le\u00dffilter", ""}, {cr, w + "/.le\u00df\ufb01lter", ""},
		// symbolic links in a git directory: one in place of modules/ or a
		// missing submodule's git directory, one where git writes
		{cr, w + "/.git/modules", "SYMLINK"}, {cr, w + "/.git/modules/sub", "SYMLINK"}, {cr, w + "/.git/logs/HEAD", "SYMLINK"},
		{cr, w + "/.git/FETCH_HEAD", "SYMLINK"}, {cr, w + "/.git/worktrees", "SYMLINK"},
		// a submodule's git directory named like a data directory
		{ul, w + "/.git/modules/outer/modules/logs", d}, {ul, w + "/.git/modules/docs/info", d},
		// a HEAD made where git keeps none (.git/tmp, then renamed out),
		// or a directory holding one renamed out of .git
		{cr, w + "/.git/tmp/HEAD", ""}, {ul, w + "/.git/logs", d}, {ul, w + "/.git/refs/remotes/origin", d},
		{ul, w + "/.git/refs", d}, {ul, w + "/.git/modules/lib/logs", d}, {ul, w + "/.git/modules/lib/refs", d},
		{ul, w + "/.git/modules/lib/objects", d}, {cr, w + "/.git/modules/lib/objects/info", d},
		// bare repositories by name, and SwiftPM's mirrors
		{cr, w + "/mirrors/foo.git/hooks/post-update", ""}, {mod, w + "/mirrors/foo.git/config", ""},
		{cr, w + "/.build/repositories/foo-1a2b/hooks/reference-transaction", ""}, {mod, w + "/.build/repositories/foo-1a2b/config", ""},
	})
}

// denyWrite holds over an exact allowWrite of the directory above it, as
// fsrules decides on Linux; denyWrite paths and patterns hold in either
// case for names that do not exist yet.
func TestDenyWriteWinsInEitherCase(t *testing.T) {
	in := everyKey()
	in.FS.ExactAllow = []string{"/Users/dev/proj/.vscode"}
	in.FS.DenyWrite = append(in.FS.DenyWrite, fsrules.Path{Path: "/Users/dev/proj/.vscode/tasks.json", Origin: "t"})
	in.FS.DenyWriteGlobs = append(in.FS.DenyWriteGlobs, fsrules.Path{Path: "/Users/dev/proj/keys/[a-c]*.pem", Origin: "t"},
		fsrules.Path{Path: "/Users/dev/proj/**/Makefile", Origin: "t"}, fsrules.Path{Path: "/Users/dev/proj/**/*.tfstate", Origin: "t"})
	prof, err := Profile(in)
	if err != nil {
		t.Fatal(err)
	}
	const w = "/Users/dev/proj"
	cr := "file-write-create"
	checkAccess(t, prof, []access{
		{cr, w + "/.vscode/settings.json", ""}, {cr, w + "/keys/d.pem", ""}, {cr, w + "/renew", ""},
	}, []access{
		{cr, w + "/.vscode/tasks.json", ""}, {cr, w + "/.VSCode/Tasks.JSON", ""},
		{cr, w + "/NEW", ""}, {cr, w + "/New", "DIRECTORY"}, {cr, w + "/Vendor/a.go", ""}, {cr, w + "/sub/.ENV", ""},
		{cr, w + "/keys/B1.PEM", ""}, {cr, w + "/KEYS/a.pem", ""},
		// what APFS folds to letters, in a pattern too
		{cr, w + "/sub/Make\ufb01le", ""}, {cr, w + "/a.tf\ufb06ate", ""}, {cr, w + "/sub/MAKEFILE", ""},
	})
}

// Another terminal of the user cannot be opened to read what is typed
// there; the command's own terminal (/dev/tty, its descriptors) and the
// devices it needs stay.
func TestOtherTerminalsUnreadable(t *testing.T) {
	prof, err := Profile(everyKey())
	if err != nil {
		t.Fatal(err)
	}
	// And no sudo riding a ticket of the user's terminal.
	checkAccess(t, prof, []access{{"process-exec", "/usr/bin/git", ""}}, []access{{"process-exec", "/usr/bin/sudo", ""}})
	rd := "file-read-data"
	checkAccess(t, prof, []access{{rd, "/dev/tty", "CHARACTER-DEVICE"}, {rd, "/dev/urandom", "CHARACTER-DEVICE"},
		{rd, "/dev/ttysx", ""}},
		[]access{{rd, "/dev/ttys005", "CHARACTER-DEVICE"}, {rd, "/dev/ttys000", "CHARACTER-DEVICE"},
			{"file-write-data", "/dev/ttys005", "CHARACTER-DEVICE"}})
}

func denyMoves() ProfileInput {
	p := func(path string, dir bool) fsrules.Path { return fsrules.Path{Path: path, Exists: true, Dir: dir} }
	return ProfileInput{FS: &fsrules.Policy{
		Workspace:      "/Users/dev/proj",
		Writable:       []fsrules.Path{p("/Users/dev/proj", true)},
		DenyRead:       []fsrules.Path{p("/Users/dev/proj/.env", false), p("/Users/dev/proj/conf/secrets", true), p("/Users/dev/.aws", true)},
		DenyWrite:      []fsrules.Path{p("/Users/dev/proj/lib/vendor", true)},
		DenyWriteGlobs: []fsrules.Path{{Path: "/Users/dev/proj/deploy/*.key"}},
	}, TmpDir: "/private/tmp/run"}
}

// A denied path cannot be moved out of its rule: not renamed or removed,
// nor any of its parents inside a writable root; a read-denied path there
// cannot be written either. Paths outside the writable roots need no rule.
func TestMoveBlocks(t *testing.T) {
	prof, err := Profile(denyMoves())
	if err != nil {
		t.Fatal(err)
	}
	const w = "/Users/dev/proj"
	mod, cr, ul, rd := "file-write-data", "file-write-create", "file-write-unlink", "file-read-data"
	checkAccess(t, prof, []access{
		{cr, w + "/x", ""}, {ul, w + "/x", ""}, {ul, w + "/src", "DIRECTORY"}, {ul, w + "/conf/app.yaml", ""},
		{cr, w + "/deploy/readme", ""}, {ul, w + "/deploy/readme", ""}, {rd, w + "/lib/vendor/a.go", ""},
	}, []access{
		{ul, w + "/.env", ""}, {mod, w + "/.env", ""}, {rd, w + "/.env", ""},
		{ul, w + "/conf/secrets", "DIRECTORY"}, {ul, w + "/conf/secrets/db.pem", ""}, {mod, w + "/conf/secrets/db.pem", ""},
		{cr, w + "/conf/secrets/new", ""}, {ul, w + "/conf", "DIRECTORY"},
		{ul, w + "/lib/vendor", "DIRECTORY"}, {ul, w + "/lib", "DIRECTORY"}, {mod, w + "/lib/vendor/a.go", ""},
		{ul, w + "/deploy", "DIRECTORY"}, {ul, w + "/deploy/prod.key", ""}, {cr, w + "/deploy/prod.key", ""},
		// a rename's source as the command spells it
		{ul, w + "/CONF", "DIRECTORY"}, {ul, w + "/Lib/Vendor", "DIRECTORY"}, {ul, w + "/.ENV", ""},
	})
	if strings.Count(prof, `"/Users/dev/.aws"`) != 1 || strings.Contains(prof, `(literal "/Users/dev")`) || strings.Contains(prof, `(literal "/Users")`) {
		t.Errorf("rules for paths outside the writable roots:\n%s", prof)
	}
}

// The allowances everyday tools need, as srt and Codex grant them, and
// nothing wider: semaphores, read-only preferences, group membership,
// ptys, ioctls on a few devices, two sysctl writes.
func TestAllowances(t *testing.T) {
	prof, err := Profile(everyKey())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"(allow ipc-posix-sem)",
		"(allow user-preference-read)",
		`(global-name "com.apple.cfprefsd.daemon")`, `(global-name "com.apple.cfprefsd.agent")`,
		`(allow mach-lookup (local-name "com.apple.cfprefsd.agent"))`,
		`(allow ipc-posix-shm-read* (ipc-posix-name-prefix "apple.cfprefs."))`,
		`(global-name "com.apple.system.opendirectoryd.membership")`,
		"(allow pseudo-tty)",
		`(allow file-read* file-write* file-ioctl (literal "/dev/ptmx"))`,
		`(require-all (regex "^/dev/ttys[0-9]+$") (extension "com.apple.sandbox.pty"))`,
		`(allow sysctl-write` + "\n" + `  (sysctl-name "kern.grade_cputype")` + "\n" + `  (sysctl-name "kern.tcsm_enable"))`,
	} {
		if !strings.Contains(prof, want) {
			t.Errorf("profile lacks %s", want)
		}
	}
	forms, err := parseSexprs(prof)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/dtracehelper", "/dev/tty", "/dev/ttys003", "/dev/ptmx"} {
		if !decide(t, forms, access{"file-ioctl", d, "CHARACTER-DEVICE"}) {
			t.Errorf("no ioctl on %s", d)
		}
	}
	for _, a := range []access{{"file-ioctl", "/dev/disk0", "CHARACTER-DEVICE"}, {"file-ioctl", "/dev/ttys003x", ""},
		{"file-write-data", "/dev/ttys003", "CHARACTER-DEVICE"}, {"file-write-data", "/dev/disk0", ""}} {
		if decide(t, forms, a) {
			t.Errorf("%s %s allowed", a.op, a.path)
		}
	}
	for _, wide := range []string{"(allow sysctl-write)", "(allow mach-lookup)", "(allow ipc-posix-shm)", "(allow ipc-posix-shm*)",
		"(allow user-preference-write", "(allow file-ioctl)", "(allow ipc-posix-shm-read*)", "(allow iokit-open)"} {
		if strings.Contains(prof, wide) {
			t.Errorf("profile allows %s", wide)
		}
	}
}

func socketsInput() ProfileInput {
	links := map[string]string{"/var": "/private/var", "/tmp": "/private/tmp",
		"/Users/dev/.docker/run/docker.sock": "/Users/dev/Library/Containers/com.docker.docker/Data/docker.raw.sock"}
	eval := func(p string) (string, error) {
		for from, to := range links {
			if p == from || strings.HasPrefix(p, from+"/") {
				p = to + strings.TrimPrefix(p, from)
			}
		}
		if strings.HasSuffix(p, "missing.sock") {
			return "", os.ErrNotExist
		}
		return p, nil
	}
	in := everyKey()
	in.UnixSockets = []string{"/var/run/docker.sock", "/Users/dev/.docker/run/docker.sock", "/tmp/missing.sock"}
	in.EvalSymlinks = eval
	return in
}

// Unix sockets: created, bound and reached in the private TMPDIR always;
// at the allowed paths as given and as resolved; nowhere else.
func TestUnixSockets(t *testing.T) {
	in := socketsInput()
	prof, err := Profile(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prof, "(allow system-socket (socket-domain AF_UNIX))") {
		t.Error("no AF_UNIX sockets")
	}
	forms, _ := parseSexprs(prof)
	out, bind := "network-outbound", "network-bind"
	for _, a := range []access{
		{out, "/private/var/run/docker.sock", "SOCKET"}, {out, "/var/run/docker.sock", "SOCKET"},
		{out, "/Users/dev/Library/Containers/com.docker.docker/Data/docker.raw.sock", "SOCKET"},
		{out, "/private/tmp/missing.sock", "SOCKET"}, {bind, "/private/tmp/missing.sock", "SOCKET"},
		{bind, in.TmpDir + "/tsx-501/1234.pipe", "SOCKET"}, {out, in.TmpDir + "/tsx-501/1234.pipe", "SOCKET"},
	} {
		if !decide(t, forms, a) {
			t.Errorf("%s %s denied", a.op, a.path)
		}
	}
	for _, a := range []access{
		{out, "/private/var/run/mDNSResponder", "SOCKET"}, {out, "/Users/dev/.ssh/agent.sock", "SOCKET"},
		{bind, "/Users/dev/proj/s.sock", "SOCKET"}, {out, "/private/var/folders/xy/T/other/s.sock", "SOCKET"},
	} {
		if decide(t, forms, a) {
			t.Errorf("%s %s allowed", a.op, a.path)
		}
	}
	for _, wide := range []string{"(remote unix-socket)", "(local unix-socket)", "(allow network*", "(allow system-socket)"} {
		if strings.Contains(prof, wide) {
			t.Errorf("profile allows %s", wide)
		}
	}
}

// allowLocalBinding follows Codex: bind anywhere, accept only on loopback,
// reach loopback; never the rest of the network. Without it, none of the
// three.
func TestLocalBinding(t *testing.T) {
	in := everyKey()
	bind, inb, out := "network-bind", "network-inbound", "network-outbound"
	for _, on := range []bool{true, false} {
		in.LocalBinding = on
		prof, err := Profile(in)
		if err != nil {
			t.Fatal(err)
		}
		forms, _ := parseSexprs(prof)
		for _, a := range []access{{bind, "*:3000", "IP"}, {bind, "localhost:3000", "IP"}, {inb, "localhost:3000", "IP"},
			{out, "localhost:3000", "IP"}} {
			if decide(t, forms, a) != on {
				t.Errorf("local binding %v: %s %s allowed: %v", on, a.op, a.path, !on)
			}
		}
		for _, a := range []access{{inb, "192.168.1.5:3000", "IP"}, {out, "93.184.216.34:443", "IP"}, {out, "192.168.1.5:3000", "IP"}} {
			if decide(t, forms, a) {
				t.Errorf("local binding %v: %s %s allowed", on, a.op, a.path)
			}
		}
		if !decide(t, forms, access{out, "localhost:40123", "IP"}) {
			t.Errorf("local binding %v: the proxy is unreachable", on)
		}
	}
}

func writableHome() ProfileInput {
	return ProfileInput{FS: &fsrules.Policy{
		Workspace:  "/Users/dev",
		Home:       "/Users/dev",
		Writable:   []fsrules.Path{{Path: "/Users/dev", Exists: true, Dir: true}},
		ExactAllow: []string{"/Users/dev/.config/fish", "/Users/dev/.config/sbx"},
		Self:       []fsrules.Path{{Path: "/Users/dev/.config/sbx"}, {Path: "/etc/sbx/managed-settings.json"}},
	}, TmpDir: "/private/tmp/run"}
}

// With the home directory writable, its persistence paths are not, in
// either case, nor can their parents be renamed; an exact allowWrite
// re-opens one, but never sbx's own files.
func TestHomePersistence(t *testing.T) {
	prof, err := Profile(writableHome())
	if err != nil {
		t.Fatal(err)
	}
	const h = "/Users/dev"
	mod, cr, ul := "file-write-data", "file-write-create", "file-write-unlink"
	checkAccess(t, prof, []access{
		{cr, h + "/notes.txt", ""}, {cr, h + "/Documents/a", ""}, {mod, h + "/.config/fish/config.fish", ""},
		{cr, h + "/.config/fish/functions/f.fish", ""}, {cr, h + "/Library/Application Support/Other/x", ""},
		{cr, h + "/.local/lib/python3.12/site-packages/foo.py", ""}, {ul, h + "/Documents", "DIRECTORY"},
	}, []access{
		{cr, h + "/Library/LaunchAgents/evil.plist", ""}, {cr, h + "/library/launchagents/evil.plist", ""},
		{mod, h + "/Library/Application Support/Code/User/tasks.json", ""}, {cr, h + "/Library/Application Support/Cursor/User/settings.json", ""},
		{cr, h + "/.ssh/authorized_keys", ""}, {cr, h + "/.SSH/authorized_keys", ""}, {mod, h + "/.tmux.conf", ""}, {mod, h + "/.vimrc", ""},
		{cr, h + "/.config/nvim/init.lua", ""}, {cr, h + "/.local/lib/python3.12/site-packages/evil.pth", ""},
		{cr, h + "/.local/lib/python3.12/site-packages/sitecustomize.py", ""},
		{ul, h + "/.config", "DIRECTORY"}, {ul, h + "/Library", "DIRECTORY"}, {ul, h + "/Library/Application Support", "DIRECTORY"},
		{ul, h + "/.local/lib", "DIRECTORY"}, {ul, h + "/.ssh", "DIRECTORY"},
		{cr, h + "/.config/sbx/settings.json", ""}, {ul, h + "/.config/sbx", "DIRECTORY"},
	})
	if strings.Contains(prof, "/etc/sbx") {
		t.Error("a rule for sbx's own file outside the writable roots")
	}
	// A workspace alone gets no home rules.
	prof, _ = Profile(everyKey())
	if strings.Contains(prof, "LaunchAgents") {
		t.Error("home persistence rules without a writable home")
	}
}

func TestCaseless(t *testing.T) {
	re := regexp.MustCompile("^" + caseless(".vscode") + "$")
	for _, n := range []string{".vscode", ".VSCODE", ".VsCode"} {
		if !re.MatchString(n) {
			t.Errorf("%s not matched", n)
		}
	}
	if re.MatchString("xvscode") {
		t.Error("the dot is a wildcard")
	}
	// Other characters stand for themselves, and stay UTF-8 (a byte of
	// one was once folded as a Latin-1 letter, and the profile refused).
	re = regexp.MustCompile("^" + caseless("/Users/dev/café/Ünï") + "$")
	for _, n := range []string{"/Users/dev/café/Ünï", "/USERS/DEV/CAFé/Ünï"} {
		if !re.MatchString(n) {
			t.Errorf("%s not matched", n)
		}
	}
	in := everyKey()
	in.FS.Named = append(in.FS.Named, fsrules.Named{List: "denyRead", Path: "/Users/dev/proj/café", Entries: []string{"/Users/dev/proj/café"}})
	in.FS.DenyWrite = append(in.FS.DenyWrite, fsrules.Path{Path: "/Users/dev/proj/naïve", Origin: "t"})
	if _, err := Profile(in); err != nil {
		t.Errorf("a workspace path with non-ASCII letters: %v", err)
	}
}

func TestQuote(t *testing.T) {
	for _, s := range []string{`plain`, `with "quote"`, `back\slash`, `paren(s)`, `semi;colon`, `ü`} {
		q, err := Quote(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseSexprs("(x " + q + ")")
		if err != nil || len(got) != 1 || len(got[0].list) != 2 || got[0].list[1].str != s || !got[0].list[1].isStr {
			t.Errorf("Quote(%q) = %s does not read back: %+v %v", s, q, got, err)
		}
	}
	for _, s := range []string{"new\nline", "\xff", "tab\tx", "nul\x00"} {
		if _, err := Quote(s); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("Quote(%q) accepted", s)
		}
	}
}

// FuzzProfile feeds arbitrary paths into every slot of a profile. Either
// the profile is refused, or it parses and every path comes back byte for
// byte as a string literal, and the number of rules is what the policy
// asked for.
// Every deny rule of a tagged profile carries the tag as its message, and
// tagging adds no rule.
func TestProfileTag(t *testing.T) {
	in := everyKey()
	plain, err := Profile(in)
	if err != nil {
		t.Fatal(err)
	}
	in.Tag = "sbx_abc123"
	tagged, err := Profile(in)
	if err != nil {
		t.Fatal(err)
	}
	pf, _ := parseSexprs(plain)
	tf, err := parseSexprs(tagged)
	if err != nil {
		t.Fatal(err)
	}
	if len(pf) != len(tf) {
		t.Fatalf("%d forms tagged, %d untagged", len(tf), len(pf))
	}
	denies := 0
	for _, f := range tf {
		if len(f.list) == 0 || f.list[0].atom != "deny" {
			continue
		}
		denies++
		last := f.list[len(f.list)-1]
		if len(last.list) != 3 || last.list[0].atom != "with" || last.list[1].atom != "message" || last.list[2].str != "sbx_abc123" {
			t.Errorf("deny rule without the tag: %v", f.list[0:2])
		}
	}
	if denies < 4 {
		t.Errorf("only %d deny rules", denies)
	}
	for _, bad := range []string{`x") (allow default`, "a b", "sbx-1"} {
		in.Tag = bad
		if _, err := Profile(in); err == nil {
			t.Errorf("tag %q accepted", bad)
		}
	}
}

func TestParseLogLine(t *testing.T) {
	const tag = "sbx_0f1e2d"
	tests := []struct {
		line string
		want Violation
		ok   bool
	}{
		{`{"timestamp":"2026-12-02 10:00:00.000000+0000","eventMessage":"Sandbox: touch(4242) deny(1) file-write-create /Users/dev/.bashrc sbx_0f1e2d","processImagePath":"/kernel"}`,
			Violation{Time: "2026-12-02 10:00:00.000000+0000", Process: "touch", PID: 4242, Operation: "file-write-create", Target: "/Users/dev/.bashrc"}, true},
		{`{"eventMessage":"Sandbox: curl(77) deny(1) network-outbound 93.184.216.34:443 sbx_0f1e2d"}`,
			Violation{Process: "curl", PID: 77, Operation: "network-outbound", Target: "93.184.216.34:443"}, true},
		{`{"eventMessage":"Sandbox: my tool(9) deny(2) file-read-data /Users/dev/My Notes/a.txt sbx_0f1e2d"}`,
			Violation{Process: "my tool", PID: 9, Operation: "file-read-data", Target: "/Users/dev/My Notes/a.txt"}, true},
		{`{"eventMessage":"Sandbox: sh(5) deny(1) mach-lookup sbx_0f1e2d"}`,
			Violation{Process: "sh", PID: 5, Operation: "mach-lookup"}, true},
		{`{"eventMessage":"Sandbox: touch(4242) deny(1) file-write-create /x sbx_other"}`, Violation{}, false},
		{`{"eventMessage":"something else sbx_0f1e2d"}`, Violation{}, false},
		{`{"eventMessage":`, Violation{}, false},
		{`Filtering the log data using "eventMessage ENDSWITH ..."`, Violation{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseLogLine([]byte(tt.line), tag)
		if ok != tt.ok || got != tt.want {
			t.Errorf("%s:\n got %+v %v\nwant %+v %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := ParseLogLine([]byte(tests[0].line), `x" OR 1`); ok {
		t.Error("a malformed tag matched")
	}
}

func TestIsLogBanner(t *testing.T) {
	for line, want := range map[string]bool{
		`Filtering the log data using "eventMessage ENDSWITH \"sbx_t\""`:  true,
		"  Filtering the log data using \"x\"\r":                          true,
		`{"eventMessage":"Filtering the log data"}`:                       false,
		"Timestamp                       Thread     Type        Activity": false,
		"": false,
	} {
		if IsLogBanner([]byte(line)) != want {
			t.Errorf("IsLogBanner(%q) = %v", line, !want)
		}
	}
}

func FuzzParseLogLine(f *testing.F) {
	f.Add([]byte(`{"eventMessage":"Sandbox: a(1) deny(1) op /p sbx_t"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		v, ok := ParseLogLine(line, "sbx_t")
		if ok && (v.PID < 0 || v.Operation == "" || strings.Contains(v.Target, "sbx_t") && strings.HasSuffix(v.Target, "sbx_t")) {
			t.Fatalf("bad parse %+v of %q", v, line)
		}
	})
}

func FuzzProfile(f *testing.F) {
	f.Add("/a/b", "/c\"d", "/e\\f", "/g)h(", "/sock")
	f.Add("/x\ny", "/\xff", "/ok", "/ok2", "/s;t")
	f.Fuzz(func(t *testing.T, ws, deny, read, allowRead, sock string) {
		if !strings.HasPrefix(ws, "/") {
			ws = "/" + ws
		}
		in := ProfileInput{
			FS: &fsrules.Policy{
				Workspace: ws,
				Writable:  []fsrules.Path{{Path: ws, Dir: true, Exists: true}},
				DenyWrite: []fsrules.Path{{Path: deny, Dir: true, Exists: true}},
				DenyRead:  []fsrules.Path{{Path: read, Exists: true}},
				AllowRead: []fsrules.Path{{Path: allowRead, Exists: true}},
			},
			TmpDir: "/tmp/run", ProxyPort: 1234, UnixSockets: []string{sock},
		}
		prof, err := Profile(in)
		if err != nil {
			if !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		forms, err := parseSexprs(prof)
		if err != nil {
			t.Fatalf("profile does not parse: %v\n%s", err, prof)
		}
		var strs []string
		for _, f := range forms {
			f.strings(&strs)
		}
		for _, p := range []string{ws, deny, read, allowRead, sock} {
			// denyWrite comes back as its regex, in either case.
			if !slices.Contains(strs, p) && !(p == deny && slices.Contains(strs, foldedBelow(p, writableRoots(in))+"(/.*)?$")) {
				t.Fatalf("path %q does not come back; strings %q", p, strs)
			}
		}
		base, _ := Profile(ProfileInput{FS: &fsrules.Policy{Workspace: "/w", Writable: []fsrules.Path{{Path: "/w", Dir: true, Exists: true}},
			DenyWrite: []fsrules.Path{{Path: "/d", Dir: true}}, DenyRead: []fsrules.Path{{Path: "/r"}}, AllowRead: []fsrules.Path{{Path: "/a"}}},
			TmpDir: "/tmp/run", ProxyPort: 1234, UnixSockets: []string{"/s"}})
		baseForms, _ := parseSexprs(base)
		if len(forms) != len(baseForms) {
			t.Fatalf("%d top-level forms, want %d: a path changed the structure\n%s", len(forms), len(baseForms), prof)
		}
	})
}

// sexpr is a parsed s-expression: a list, a string literal or an atom.
type sexpr struct {
	list  []*sexpr
	str   string
	isStr bool
	atom  string
}

func (s *sexpr) strings(out *[]string) {
	if s.isStr {
		*out = append(*out, s.str)
	}
	for _, c := range s.list {
		c.strings(out)
	}
}

// parseSexprs is a small reader for SBPL: lists, "strings" with \\ and \"
// escapes, atoms, and ; comments.
func parseSexprs(src string) ([]*sexpr, error) {
	pos := 0
	var parse func() (*sexpr, error)
	skip := func() {
		for pos < len(src) {
			switch {
			case src[pos] == ';':
				for pos < len(src) && src[pos] != '\n' {
					pos++
				}
			case strings.IndexByte(" \t\n\r", src[pos]) >= 0:
				pos++
			default:
				return
			}
		}
	}
	parse = func() (*sexpr, error) {
		skip()
		if pos >= len(src) {
			return nil, fmt.Errorf("unexpected end")
		}
		switch src[pos] {
		case '(':
			pos++
			e := &sexpr{list: []*sexpr{}}
			for {
				skip()
				if pos >= len(src) {
					return nil, fmt.Errorf("unclosed list")
				}
				if src[pos] == ')' {
					pos++
					return e, nil
				}
				c, err := parse()
				if err != nil {
					return nil, err
				}
				e.list = append(e.list, c)
			}
		case ')':
			return nil, fmt.Errorf("unexpected ) at %d", pos)
		case '"':
			pos++
			var b strings.Builder
			for {
				if pos >= len(src) {
					return nil, fmt.Errorf("unclosed string")
				}
				c := src[pos]
				pos++
				if c == '"' {
					return &sexpr{str: b.String(), isStr: true}, nil
				}
				if c == '\\' {
					if pos >= len(src) {
						return nil, fmt.Errorf("dangling escape")
					}
					n := src[pos]
					pos++
					if n != '\\' && n != '"' {
						return nil, fmt.Errorf("unknown escape \\%c", n)
					}
					b.WriteByte(n)
					continue
				}
				if c == '\n' {
					return nil, fmt.Errorf("newline in string")
				}
				b.WriteByte(c)
			}
		default:
			start := pos
			for pos < len(src) && strings.IndexByte(" \t\n\r()\";", src[pos]) < 0 {
				pos++
			}
			return &sexpr{atom: src[start:pos]}, nil
		}
	}
	var out []*sexpr
	for {
		skip()
		if pos >= len(src) {
			return out, nil
		}
		e, err := parse()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
}

func TestStragglers(t *testing.T) {
	ps := []byte(`    1 /sbin/launchd
  500 /bin/zsh -l TERM=xterm TMPDIR=/var/folders/xy/T/
  601 sleep 100 PATH=/usr/bin TMPDIR=/private/var/folders/xy/T/sbx-run-123/
  602 /usr/bin/python3 x.py TMPDIR=/private/var/folders/xy/T/sbx-run-1234/
  603 sh -c echo TMPDIR=/private/var/folders/xy/T/sbx-run-123/x
  700 sbx run -- sleep 100 TMPDIR=/private/var/folders/xy/T/sbx-run-123/
garbage line
`)
	got := Stragglers(ps, "TMPDIR=/private/var/folders/xy/T/sbx-run-123/", 700)
	if !slices.Equal(got, []int{601}) {
		t.Errorf("stragglers %v, want [601]", got)
	}
	if got := Stragglers(ps, "", 0); got != nil {
		t.Errorf("an empty marker matched %v", got)
	}
}

// A denied path missing at start (a tool not logged in yet) is denied as
// what it may become, a file or a folder; an allowRead inside it still
// re-opens. Before, nothing named it, and a credential file the user's
// login made during a run was readable.
func TestMissingDenyReadStaysDenied(t *testing.T) {
	in := everyKey()
	in.FS.DenyReadMissing = []fsrules.Path{{Path: "/Users/dev/.config/gh", Origin: "t"}, {Path: "/Users/dev/.docker/config.json", Origin: "t"}}
	in.FS.AllowRead = append(in.FS.AllowRead, fsrules.Path{Path: "/Users/dev/.config/gh/config.yml", Exists: true, Origin: "t"})
	prof, err := Profile(in)
	if err != nil {
		t.Fatal(err)
	}
	r := func(p string) access { return access{op: "file-read-data", path: p} }
	checkAccess(t, prof,
		[]access{r("/Users/dev/.config/ghost"), r("/Users/dev/.config/gh/config.yml"), r("/Users/dev/.docker/other.json")},
		[]access{r("/Users/dev/.config/gh"), r("/Users/dev/.config/gh/hosts.yml"), r("/Users/dev/.docker/config.json")})
}

// A denyRead name pattern (.env* in the home and above the workspace)
// covers entries made during the run, in either case, never the
// workspace itself; a folder name with wildcard characters is literal.
func TestDenyReadNamesCoverLaterEntries(t *testing.T) {
	in := everyKey()
	in.FS.Workspace = "/Users/dev/.envs/proj"
	in.FS.DenyReadNames = []fsrules.NamePattern{{Dir: "/Users/dev", Name: ".env*"}, {Dir: "/Users/dev/a[1]", Name: "*.pem"}, {Dir: "/", Name: ".env*"}}
	prof, err := Profile(in)
	if err != nil {
		t.Fatal(err)
	}
	r := func(p string) access { return access{op: "file-read-data", path: p} }
	checkAccess(t, prof,
		[]access{r("/Users/dev/notes.env"), r("/Users/dev/.envs/proj/main.go"), r("/Users/dev/a1/k.pem"), r("/Users/dev/a[1]/k.txt")},
		[]access{r("/Users/dev/.env"), r("/Users/dev/.ENV.local"), r("/Users/dev/.envs/other"), r("/Users/dev/a[1]/k.pem"), r("/.env")})
}

// sbx run in a subfolder of a repository: the repository's .git is a
// writable root for git's data (hooks, config, alternates and the legacy
// remote files stay protected); the rest of the work tree stays read-only.
func TestGitProtectionFromASubfolder(t *testing.T) {
	h := &fakeFS{
		dirs: map[string]bool{"/Users": true, "/Users/dev": true, "/Users/dev/repo": true, "/Users/dev/repo/sub": true,
			"/Users/dev/repo/.git": true, "/Users/dev/repo/.git/objects": true},
		files: map[string]string{"/Users/dev/repo/.git/HEAD": "ref: refs/heads/main\n"},
	}
	pol, err := fsrules.Compile(fsrules.Input{Workspace: "/Users/dev/repo/sub"},
		fsrules.Host{Home: "/Users/dev", EvalSymlinks: h.eval, Lstat: h.lstat, ReadFile: h.readFile,
			Glob: func(string) ([]string, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	prof, err := Profile(ProfileInput{FS: pol, TmpDir: "/private/tmp/run"})
	if err != nil {
		t.Fatal(err)
	}
	const g = "/Users/dev/repo/.git"
	mod, cr := "file-write-data", "file-write-create"
	checkAccess(t, prof, []access{
		{cr, g + "/objects/ab/cdef", ""}, {mod, g + "/refs/heads/main", ""}, {mod, g + "/index", ""}, {cr, g + "/index.lock", ""},
		{cr, "/Users/dev/repo/sub/f", ""},
	}, []access{
		{cr, g + "/hooks/pre-commit", ""}, {mod, g + "/config", ""}, {cr, g + "/config.lock", ""},
		{cr, g + "/objects/info/alternates", ""}, {cr, g + "/remotes/origin", ""}, {cr, "/Users/dev/repo/other", ""},
	})
}
