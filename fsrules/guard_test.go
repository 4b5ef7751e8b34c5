package fsrules

import (
	"bytes"
	"cmp"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/sbx-sandbox/sbx/internal/regular"
)

func TestCheck(t *testing.T) {
	pol := &Policy{
		Workspace: "/w",
		Home:      "/home/u",
		DenyWrite: []Path{{Path: "/w/conf/prod.yaml", Origin: "--deny-write"}},
		DenyWriteGlobs: []Path{{Path: "/w/**/.env", Origin: "Edit(.env)"}, {Path: "/w/secrets/*.key", Origin: "Edit(secrets/*.key)"},
			{Path: "/w/data/run[1].json", Origin: "--deny-write"}},
		ExactAllow: []string{"/w/.envrc", "/home/u/.local/bin"},
		Self:       []Path{{Path: "/home/u/.local/state/sbx"}, {Path: "/home/u/.config/sbx"}, {Path: "/w/.sbx"}},
	}
	harmless := []byte("[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://example.com/r.git\n")
	tests := []struct {
		c    Change
		rule string // "" when allowed
	}{
		{Change{Path: "/w/src/main.go", Kind: Create}, ""},
		{Change{Path: "/w/conf/prod.yaml", Kind: Modify}, "denyWrite"},
		{Change{Path: "/w/conf/prod.yaml", Kind: Delete}, "denyWrite"},
		{Change{Path: "/w/conf", Kind: Create, NonDir: true}, "denyWrite"}, // a link where its parent was
		{Change{Path: "/w/conf", Kind: Delete, Dir: true}, "denyWrite"},
		{Change{Path: "/w/conf", Kind: Create, Dir: true}, ""},
		{Change{Path: "/w/.env", Kind: Create}, "denyWrite"},             // created during the run
		{Change{Path: "/w/a/b/.env", Kind: Modify}, "denyWrite"},         // at any depth
		{Change{Path: "/w/a/.env/x", Kind: Create}, "denyWrite"},         // inside a match
		{Change{Path: "/w/a/.envrc.d/x", Kind: Create}, ""},              // a longer name
		{Change{Path: "/w/secrets/new.key", Kind: Create}, "denyWrite"},  // a single-segment wildcard
		{Change{Path: "/w/secrets/sub/new.key", Kind: Create}, ""},       // * does not cross a /
		{Change{Path: "/w/data/run[1].json", Kind: Create}, "denyWrite"}, // the literal name, made during the run
		{Change{Path: "/w/data/run1.json", Kind: Create}, "denyWrite"},   // and what the pattern matches
		{Change{Path: "/w/data/run2.json", Kind: Create}, ""},
		{Change{Path: "/w/.bashrc", Kind: Create}, "protected"},
		{Change{Path: "/w/a/b/.bashrc", Kind: Modify}, "protected"},
		{Change{Path: "/w/app/.vscode/tasks.json", Kind: Create}, "protected"},
		{Change{Path: "/w/.codex/config.toml", Kind: Create}, "protected"},
		{Change{Path: "/w/.envrc", Kind: Modify}, ""}, // exactly allowed
		{Change{Path: "/w/.config/git/config", Kind: Create}, "protected"},
		{Change{Path: "/w/.sbx/settings.json", Kind: Create}, "sbx"},
		{Change{Path: "/home/u/.config/sbx/settings.json", Root: "/home/u", Kind: Create}, "sbx"},
		{Change{Path: "/home/u/.config", Root: "/home/u", Kind: Create, NonDir: true}, "sbx"},
		{Change{Path: "/home/u/.local/state/sbx/quarantine/x", Root: "/home/u/.local", Kind: Create}, "sbx"},
		{Change{Path: "/home/u/.ssh/authorized_keys", Root: "/home/u", Kind: Create}, "home"},
		{Change{Path: "/home/u/.config/autostart/x.desktop", Root: "/home/u/.config", Kind: Create}, "home"},
		{Change{Path: "/home/u/.local/bin/tool", Root: "/home/u/.local", Kind: Create}, ""}, // exactly allowed
		{Change{Path: "/home/u/.local/lib/x.py", Root: "/home/u/.local", Kind: Create}, ""},
		{Change{Path: "/home/u/.local/lib/python3.11/site-packages/evil.pth", Root: "/home/u/.local", Kind: Create}, "home"},
		{Change{Path: "/home/u/.local/lib/python3.11/site-packages/usercustomize.py", Root: "/home/u/.local", Kind: Create}, "home"},
		{Change{Path: "/w/sub/HEAD", Kind: Create, Git: "/w/sub", NewConfig: []byte("[core]\n\tpager = touch /tmp/x\n")}, "git"},
		{Change{Path: "/w/sub/HEAD", Kind: Create, Git: "/w/sub", NewConfig: []byte("[core]\n\tbare = true\n")}, ""},
		{Change{Path: "/w/.git/logs/HEAD", Kind: Create, Git: "/w/.git", Link: true}, "git"},
		{Change{Path: "/w/.git/rebase-merge/git-rebase-todo", Kind: Create, Git: "/w/.git"}, "git"},
		{Change{Path: "/w/.git/objects/info/alternates", Kind: Create, Git: "/w/.git"}, "git"},
		{Change{Path: "/w/.git/remotes/origin", Kind: Create, Git: "/w/.git"}, "git"},
		{Change{Path: "/w/.git/branches/origin", Kind: Create, Git: "/w/.git"}, "git"},
		{Change{Path: "/w/.git/branches", Kind: Create, Dir: true, Git: "/w/.git"}, ""},
		{Change{Path: "/w/.git/refs/remotes/origin/main", Kind: Create, Git: "/w/.git"}, ""},
		{Change{Path: "/w/.hg/hgrc", Kind: Create}, "protected"},
		{Change{Path: "/w/.tmux.conf", Kind: Create}, "protected"},
		{Change{Path: "/w/sub/.git", Kind: Create, NonDir: true}, "git"},
		{Change{Path: "/w/.git", Kind: Delete, NonDir: true}, "git"},
		{Change{Path: "/w/new/.git", Kind: Create, Dir: true}, ""},
		{Change{Path: "/w/.git/objects/ab/cdef", Kind: Create, Git: "/w/.git"}, ""},
		{Change{Path: "/w/.git/refs/heads/x", Kind: Modify, Git: "/w/.git"}, ""},
		{Change{Path: "/w/.git/index", Kind: Modify, Git: "/w/.git", NewIndex: makeIndex(2, file("a"))}, ""},
		{Change{Path: "/w/.git/index", Kind: Modify, Git: "/w/.git", NewIndex: makeIndex(2, file(".git/hooks/x"))}, "git"},
		{Change{Path: "/w/.git/sharedindex.0123", Kind: Create, Git: "/w/.git", NewIndex: []byte("junk")}, "git"},
		{Change{Path: "/w/.git/index", Kind: Delete, Git: "/w/.git"}, ""},
		{Change{Path: "/w/.git/index.lock", Kind: Create, Git: "/w/.git"}, "git"},
		{Change{Path: "/w/.git/index.lock", Kind: Modify, Git: "/w/.git"}, "git"},
		{Change{Path: "/w/.git/config.lock", Kind: Create, Git: "/w/.git"}, "git"},
		{Change{Path: "/w/.git/sharedindex.0123.lock", Kind: Create, Git: "/w/.git"}, "git"},
		{Change{Path: "/w/.git/modules/m/config.lock", Kind: Create, Git: "/w/.git/modules/m"}, "git"},
		{Change{Path: "/w/.git/HEAD.lock", Kind: Create, Git: "/w/.git"}, ""},
		{Change{Path: "/w/.git/packed-refs.lock", Kind: Create, Git: "/w/.git"}, ""},
		{Change{Path: "/w/.git/refs/heads/main.lock", Kind: Create, Git: "/w/.git"}, ""},
		{Change{Path: "/w/.git/index.lock", Kind: Delete, Git: "/w/.git"}, ""},
		{Change{Path: "/w/.git/HEAD", Kind: Modify, Git: "/w/.git"}, ""},
		{Change{Path: "/w/.git/hooks/pre-commit", Kind: Create, Git: "/w/.git"}, "git"},
		{Change{Path: "/w/.git/hooks/pre-commit.sample", Kind: Create, Git: "/w/.git"}, ""},
		{Change{Path: "/w/.git/commondir", Kind: Create, Git: "/w/.git"}, "git"},
		{Change{Path: "/w/.git/info/attributes", Kind: Create, Git: "/w/.git"}, "git"},
		{Change{Path: "/w/.git/info/exclude", Kind: Modify, Git: "/w/.git"}, ""},
		{Change{Path: "/w/.git/x/config", Kind: Create, Git: "/w/.git"}, "git"},
		{Change{Path: "/w/.git/config", Kind: Modify, Git: "/w/.git", OldConfig: harmless, NewConfig: append(slices.Clone(harmless), "\tfsmonitor = x\n"...)}, "git"},
		{Change{Path: "/w/.git/config", Kind: Modify, Git: "/w/.git", OldConfig: harmless, NewConfig: append(slices.Clone(harmless), "[branch \"x\"]\n\tremote = origin\n\tmerge = refs/heads/x\n"...)}, ""},
		{Change{Path: "/w/.git/config", Kind: Delete, Git: "/w/.git"}, "git"},
		{Change{Path: "/w/.git/modules/sub/hooks/post-checkout", Kind: Create, Git: "/w/.git/modules/sub"}, "git"},
		{Change{Path: "/w/.git/modules/sub/objects/x", Kind: Create, Git: "/w/.git/modules/sub"}, ""},
	}
	for _, tt := range tests {
		c := tt.c
		if c.Root == "" {
			c.Root = "/w"
		}
		if !c.Dir && !c.NonDir && c.Kind != Delete {
			c.NonDir = true
		}
		r := pol.Check(&c)
		got := ""
		if r != nil {
			got = r.Rule
			if r.Why == "" || r.Path != c.Path {
				t.Errorf("%s %s: refusal %+v lacks a reason or the path", c.Kind, c.Path, r)
			}
		}
		if got != tt.rule {
			t.Errorf("%s %s: rule %q (%+v), want %q", c.Kind, c.Path, got, r, tt.rule)
		}
	}
}

func TestGitConfigChange(t *testing.T) {
	base := "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
	tests := []struct {
		name, old, new string
		ok             bool
	}{
		{"unchanged", base, base, true},
		{"tracking", base, base + "[branch \"feat\"]\n\tremote = origin\n\tmerge = refs/heads/feat\n", true},
		{"new remote", base, base + "[remote \"up\"]\n\turl = https://example.com/up.git\n\tfetch = +refs/heads/*:refs/remotes/up/*\n", true},
		{"new repository", "", "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n", true},
		{"changed url", base, strings.Replace(base, "example.com/r", "evil.example/r", 1), false},
		{"fsmonitor", base, base + "[core]\n\tfsmonitor = ./x\n", false},
		{"fsmonitor on the section line", base, base + "[core] fsmonitor = ./x\n", false},
		{"hooksPath", base, base + "[core]\n\thooksPath = /tmp/h\n", false},
		{"sshCommand", base, base + "[core]\n\tsshCommand = x\n", false},
		{"credential helper", base, base + "[credential]\n\thelper = !x\n", false},
		{"filter", base, base + "[filter \"lfs\"]\n\tclean = x\n", false},
		{"textconv", base, base + "[diff \"x\"]\n\ttextconv = x\n", false},
		{"include", base, base + "[include]\n\tpath = /tmp/c\n", false},
		{"includeIf", base, base + "[includeIf \"gitdir:/\"]\n\tpath = /tmp/c\n", false},
		{"alias", base, base + "[alias]\n\tst = !x\n", false},
		{"uploadpack", base, base + "[remote \"origin\"]\n\tuploadpack = x\n", false},
		{"legacy subsection", base, base + "[core.x]\n\tfsmonitor = y\n", false},
		{"key hidden in a continuation", base, base + "[user]\n\tname = a\\\n\n[core]\n\tfsmonitor = x\n", false},
		{"unterminated quote", base, base + "[user]\n\tname = \"a\n", false},
		{"garbage", base, base + "fsmonitor\n[\n", false},
		{"removed key", base + "[pull]\n\trebase = true\n", base, false},
		{"comment only", base, base + "# fsmonitor = x\n; sshCommand = y\n", true},
		{"push to a new remote", base, base + "[remote \"evil\"]\n\turl = https://evil.example/x.git\n[branch \"main\"]\n\tpushremote = evil\n", false},
		{"track a new remote", base, base + "[remote \"evil\"]\n\turl = https://evil.example/x.git\n[branch \"main\"]\n\tremote = evil\n", false},
		{"track the local repository", base, base + "[branch \"main\"]\n\tremote = .\n", true},
		{"submodule url in an existing repository", base, base + "[submodule \"lib\"]\n\turl = https://evil.example/lib.git\n", false},
		{"new repository with a remote and tracking", "", "[remote \"origin\"]\n\turl = https://example.com/r.git\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n", true},
		{"push refspec deleting a branch", base, base + "[remote \"origin\"]\n\tpush = :refs/heads/prod\n", false},
		{"push refspec of a new remote", base, base + "[remote \"up\"]\n\turl = https://example.com/up.git\n\tpush = +refs/heads/*:refs/heads/*\n", false},
		{"mirror", base, base + "[remote \"origin\"]\n\tmirror = true\n", false},
		{"fetch refspec of an existing remote", base, base + "[remote \"origin\"]\n\tfetch = +refs/heads/*:refs/heads/*\n", false},
		{"bare", base, strings.Replace(base, "bare = false", "bare = true", 1), false},
		{"sparse checkout", base, base + "[core]\n\tsparseCheckout = true\n", false},
		{"object format", base, base + "[extensions]\n\tobjectFormat = sha256\n", false},
		{"new repository, sparse and mirrored", "", "[core]\n\tbare = true\n\tsparseCheckout = true\n[remote \"origin\"]\n\turl = https://example.com/r.git\n\tmirror = true\n", true},
		{"byte order mark", base, "\ufeff" + base, true},
	}
	for _, tt := range tests {
		var old []byte
		if tt.old != "" {
			old = []byte(tt.old)
		}
		ok, why := GitConfigChange(old, []byte(tt.new))
		if ok != tt.ok || (!ok && why == "") {
			t.Errorf("%s: ok = %v (%s), want %v", tt.name, ok, why, tt.ok)
		}
	}
}

// gitList is what git itself reads from a config file: key=value lines,
// or false when git refuses the file.
func gitList(t testing.TB, data []byte) ([]string, bool) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "config", "--file", p, "--null", "--list")
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, false
		}
		t.Fatal(err)
	}
	var keys []string
	for _, e := range bytes.Split(out, []byte{0}) {
		if len(e) > 0 {
			k, v, hasValue := bytes.Cut(e, []byte{'\n'})
			if !hasValue {
				v = []byte("true") // a bare key
			}
			keys = append(keys, string(k)+"="+string(v))
		}
	}
	return keys, true
}

// FuzzGitConfig checks the config parser against git itself: whatever it
// accepts, git must read as exactly the same keys and values, so no key
// can hide from the check.
func FuzzGitConfig(f *testing.F) {
	if _, err := exec.LookPath("git"); err != nil {
		f.Skip("no git")
	}
	for _, s := range []string{
		"[core]\n\tbare = false\n", "[remote \"o\"]\n\turl = x\n", "[a] b = c ; d\n", "[a]\nb = \"c # d\"\n",
		"[a]\nb = c\\\nd\n", "[a.B]\nc\n", "[a \"s\\\"q\"]\nb=1\n", "[a]\n\tb = x \\t y\n", "[a]\nb = \"\"\n",
		"[core]\n\tfsmonitor = \"a\" b\n", "[x]\n  k  =  v  v  \n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.IndexByte(data, 0) >= 0 || len(data) > 4096 {
			return
		}
		keys, err := parseGitConfig(data)
		if err != nil {
			return
		}
		want, ok := gitList(t, data)
		if !ok {
			t.Fatalf("the parser accepts %q, git refuses it", data)
		}
		var got []string
		for _, k := range keys {
			got = append(got, k.String()+"="+k.value)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("config %q:\nparser %q\ngit    %q", data, got, want)
		}
	})
}

func TestGitDirsOutside(t *testing.T) {
	setup := func(h *fakeHost) {
		for _, d := range []string{"/home/u/main", "/home/u/main/.git", "/home/u/main/.git/objects",
			"/home/u/main/.git/worktrees", "/home/u/main/.git/worktrees/wt", "/home/u/wt", "/home/u/evil",
			"/home/u/main/sub", "/home/u/wt/sub", "/home/u/proj", "/home/u/proj/.git", "/home/u/proj/.git/objects"} {
			h.dirs[d] = true
		}
		h.content = map[string]string{
			"/home/u/main/.git/HEAD":                   "ref: refs/heads/main\n",
			"/home/u/main/.git/worktrees/wt/HEAD":      "ref: refs/heads/wt\n",
			"/home/u/main/.git/worktrees/wt/gitdir":    "/home/u/wt/.git\n",
			"/home/u/main/.git/worktrees/wt/commondir": "../..\n",
			"/home/u/wt/.git":                          "gitdir: /home/u/main/.git/worktrees/wt\n",
			"/home/u/proj/.git/HEAD":                   "ref: refs/heads/main\n",
		}
	}
	tests := []struct {
		name  string
		ws    string // /home/u/wt when empty
		tweak func(h *fakeHost)
		want  []string
	}{
		{"linked worktree", "", nil, []string{"/home/u/main/.git/worktrees/wt", "/home/u/main/.git"}},
		{"subfolder of a linked worktree", "/home/u/wt/sub", nil, []string{"/home/u/main/.git/worktrees/wt", "/home/u/main/.git"}},
		{"subfolder of a repository", "/home/u/main/sub", nil, []string{"/home/u/main/.git"}},
		{"the repository's own root", "/home/u/main", nil, nil},
		{"repository two levels up", "/home/u/proj/a/b", func(h *fakeHost) { h.dirs["/home/u/proj/a/b"] = true }, []string{"/home/u/proj/.git"}},
		{"subfolder of a bare repository", "/home/u/main/sub", func(h *fakeHost) {
			h.content["/home/u/main/.git/config"] = "[core]\n\tbare = yes\n"
		}, nil},
		{"subfolder, core.bare false", "/home/u/main/sub", func(h *fakeHost) {
			h.content["/home/u/main/.git/config"] = "[core]\n\tbare = false\n"
		}, []string{"/home/u/main/.git"}},
		{"subfolder, work tree elsewhere", "/home/u/main/sub", func(h *fakeHost) {
			h.content["/home/u/main/.git/config"] = "[Core]\n\tWorkTree = /home/u/evil\n"
		}, nil},
		{"subfolder, .git not a git directory", "/home/u/main/sub", func(h *fakeHost) { delete(h.content, "/home/u/main/.git/HEAD") }, nil},
		{"subfolder, .git a link", "/home/u/evil/sub", func(h *fakeHost) {
			h.dirs["/home/u/evil/sub"] = true
			h.links["/home/u/evil/.git"] = "/home/u/main/.git"
		}, nil},
		{"subfolder, work tree elsewhere in config.worktree", "/home/u/main/sub", func(h *fakeHost) {
			h.content["/home/u/main/.git/config"] = "[extensions]\n\tworktreeConfig = true\n"
			h.content["/home/u/main/.git/config.worktree"] = "[core]\n\tworktree = /home/u\n"
		}, nil},
		{"subfolder, work tree elsewhere after a byte order mark", "/home/u/main/sub", func(h *fakeHost) {
			h.content["/home/u/main/.git/config"] = "\ufeff[core]\n\tworktree = /home/u\n"
		}, nil},
		{"subfolder, config includes another file", "/home/u/main/sub", func(h *fakeHost) {
			h.content["/home/u/main/.git/config"] = "[include]\n\tpath = /home/u/evil/c\n"
		}, nil},
		{"subfolder, config unreadable", "/home/u/main/sub", func(h *fakeHost) {
			h.content["/home/u/main/.git/config"] = "[core\n"
		}, nil},
		{"linked worktree of a home kept in git", "", func(h *fakeHost) {
			for _, d := range []string{"/home/u/.git", "/home/u/.git/objects", "/home/u/.git/worktrees", "/home/u/.git/worktrees/wt"} {
				h.dirs[d] = true
			}
			h.content["/home/u/.git/HEAD"] = "ref: refs/heads/main\n"
			h.content["/home/u/.git/worktrees/wt/HEAD"] = "ref: refs/heads/wt\n"
			h.content["/home/u/.git/worktrees/wt/gitdir"] = "/home/u/wt/.git\n"
			h.content["/home/u/.git/worktrees/wt/commondir"] = "../..\n"
			h.content["/home/u/wt/.git"] = "gitdir: /home/u/.git/worktrees/wt\n"
		}, nil},
		{"linked worktree of a repository whose work tree is the home", "", func(h *fakeHost) {
			h.content["/home/u/main/.git/config"] = "[core]\n\tworktree = ../..\n"
		}, nil},
		{"home kept in git", "/home/u/x/sub", func(h *fakeHost) {
			for _, d := range []string{"/home/u/.git", "/home/u/.git/objects", "/home/u/x/sub"} {
				h.dirs[d] = true
			}
			h.content["/home/u/.git/HEAD"] = "ref: refs/heads/main\n"
		}, nil},
		{"pointer to a non-git directory", "", func(h *fakeHost) { h.content["/home/u/wt/.git"] = "gitdir: /etc\n" }, nil},
		{"back-pointer elsewhere", "", func(h *fakeHost) { h.content["/home/u/main/.git/worktrees/wt/gitdir"] = "/home/u/other/.git\n" }, nil},
		{"common dir elsewhere", "", func(h *fakeHost) {
			h.content["/home/u/main/.git/worktrees/wt/commondir"] = "/home/u/evil\n"
		}, nil},
		{"symlinked .git", "", func(h *fakeHost) {
			delete(h.content, "/home/u/wt/.git")
			h.links["/home/u/wt/.git"] = "/home/u/main/.git/worktrees/wt"
		}, nil},
	}
	for _, tt := range tests {
		h := newFakeHost()
		setup(h)
		if tt.tweak != nil {
			tt.tweak(h)
		}
		c := &compiler{host: h.host(), pol: &Policy{Home: "/home/u"}}
		ws := cmp.Or(tt.ws, "/home/u/wt")
		var got []string
		for _, p := range c.gitDirsOutside(ws) {
			got = append(got, p.Path)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: roots %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestCompileRoots(t *testing.T) {
	h := newFakeHost()
	for _, d := range []string{"/home/u/proj", "/home/u/proj/.git", "/home/u/proj/.git/hooks", "/home/u/proj/.git/info",
		"/home/u/bare", "/home/u/bare/objects", "/home/u/bare/refs", "/home/u/bare/hooks"} {
		h.dirs[d] = true
	}
	h.content = map[string]string{"/home/u/bare/HEAD": "ref: refs/heads/main\n"}
	tests := []struct {
		name string
		in   Input
		err  bool
	}{
		{"workspace /", Input{Workspace: "/"}, true},
		{"workspace home", Input{Workspace: "/home/u"}, true},
		{"workspace above home", Input{Workspace: "/home"}, true},
		{"workspace home, allowed", Input{Workspace: "/home/u", HomeRoot: true}, false},
		{"allowWrite ~", Input{Workspace: "/home/u/proj", AllowWrite: rules("/home/u/proj", "~")}, true},
		{"allowWrite /", Input{Workspace: "/home/u/proj", AllowWrite: rules("/home/u/proj", "/"), HomeRoot: true}, true},
		{"project", Input{Workspace: "/home/u/proj"}, false},
		{"workspace in a .git", Input{Workspace: "/home/u/proj/.git/hooks"}, true},
		{"workspace a .git", Input{Workspace: "/home/u/proj/.git"}, true},
		{"workspace in a bare repository", Input{Workspace: "/home/u/bare/hooks"}, true},
		{"allowWrite in a .git", Input{Workspace: "/home/u/proj", AllowWrite: rules("/home/u/proj", "./.git/info")}, true},
	}
	for _, tt := range tests {
		_, err := Compile(tt.in, h.host())
		var re *RootError
		if tt.err != errors.As(err, &re) {
			t.Errorf("%s: err = %v, want a RootError: %v", tt.name, err, tt.err)
		}
	}
}

// A deny path that is resolved through a symbolic link protects the link's
// target; the link itself, and every entry the path is resolved through,
// must not be re-pointed or made a link from a sandbox (the next run would
// protect something else, or fail on a dangling link).
func TestDenyPathLinksKeepTheirTarget(t *testing.T) {
	root := realTempDir(t)
	ws, out := filepath.Join(root, "ws"), filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(ws, "real"), filepath.Join(out, "keys")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"secret": filepath.Join(out, "keys", "a"), "linked": filepath.Join(out, "keys")} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(out, "keys", "a"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(out, "keys", "b"), []byte("x"), 0o600)
	pol, err := Compile(Input{Workspace: ws,
		DenyRead:  rules(ws, "./secret", "./linked/b", "./later", "./real/deep/key"),
		DenyWrite: rules(ws, "./real/file")}, Host{Home: filepath.Join(root, "home")})
	if err != nil {
		t.Fatal(err)
	}
	at := func(p string) string { return filepath.Join(ws, p) }
	tests := []ruleCase{
		{Change{Path: at("secret"), Kind: Modify, Link: true}, "denyRead"}, // re-pointed
		{Change{Path: at("secret"), Kind: Delete}, "denyRead"},
		{Change{Path: at("secret"), Kind: Modify, NonDir: true}, "denyRead"}, // a file in its place
		{Change{Path: at("linked"), Kind: Create, Dir: true}, "denyRead"},    // a directory in its place
		{Change{Path: at("later"), Kind: Create, Link: true}, "denyRead"},    // a dangling link made
		{Change{Path: at("later"), Kind: Create, NonDir: true}, ""},          // a file made: the rule hides it next time
		{Change{Path: at("real/deep"), Kind: Create, Link: true}, "denyRead"},
		{Change{Path: at("real/deep"), Kind: Create, Dir: true}, ""},
		{Change{Path: at("real"), Kind: Modify, Dir: true}, ""},
		{Change{Path: at("real/file"), Kind: Create, Link: true}, "denyWrite"},
		{Change{Path: at("other"), Kind: Create, Link: true}, ""},
		{Change{Path: at("real/other"), Kind: Create, Link: true}, ""},
	}
	expectRules(t, pol, ws, tests)
	// Entries outside every writable root are not listed: nothing reaches them.
	for _, n := range pol.Named {
		for _, e := range n.Entries {
			if !Within(e, ws) {
				t.Errorf("%s: entry %s outside the workspace", n.Path, e)
			}
		}
	}
}

// A home persistence path that is a symbolic link into a writable root
// (dotfiles kept in a repository, linked from the home) is protected at
// its target: by path alone, editing the workspace's bashrc would change
// ~/.bashrc.
func TestHomeLinksProtectTheirTargets(t *testing.T) {
	root := realTempDir(t)
	home, ws, other := filepath.Join(root, "home"), filepath.Join(root, "home", "dotfiles"), filepath.Join(root, "other")
	for _, d := range []string{filepath.Join(ws, "config", "git"), filepath.Join(ws, "nvim"), filepath.Join(home, ".ssh"), other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(ws, "bashrc"), filepath.Join(ws, "profile"), filepath.Join(ws, "config", "git", "config"), filepath.Join(other, "zshrc")} {
		os.WriteFile(f, []byte("x"), 0o644)
	}
	for link, target := range map[string]string{".bashrc": "dotfiles/bashrc", ".profile": filepath.Join(ws, "profile"),
		".config": "dotfiles/config", ".zshrc": filepath.Join(other, "zshrc"), ".vim": "dotfiles/nvim"} {
		if err := os.Symlink(target, filepath.Join(home, link)); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := Compile(Input{Workspace: ws, AllowWrite: rules(home, "~/.profile")}, Host{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	at := func(p string) string { return filepath.Join(ws, p) }
	tests := []ruleCase{
		{Change{Path: at("bashrc"), Kind: Modify}, "home"},
		{Change{Path: at("bashrc"), Kind: Delete}, "home"},
		{Change{Path: at("config/git/config"), Kind: Modify}, "home"}, // ~/.config is the link
		{Change{Path: at("config/git/new"), Kind: Create}, "home"},
		{Change{Path: at("config"), Kind: Delete, Dir: true}, "home"}, // an ancestor of a target removed
		{Change{Path: at("config/other"), Kind: Create}, ""},          // the rest of ~/.config
		{Change{Path: at("nvim/init.lua"), Kind: Create}, "home"},     // ~/.vim links to a directory
		{Change{Path: at("profile"), Kind: Modify}, ""},               // allowWrite ~/.profile exactly
		{Change{Path: at("README"), Kind: Create}, ""},
	}
	expectRules(t, pol, ws, tests)
	for _, l := range pol.HomeLinks {
		if !Within(l.Path, ws) {
			t.Errorf("home link target %s outside every writable root", l.Path)
		}
	}
}

// Every entry a protected path is resolved through counts, not only the
// components of the path as written: the components of each link's
// target (a second link in the chain, cur -> v1 in lnk -> cur/real) and a
// directory passed through by ".." (sub in lnk2 -> sub/../real). Re-pointed
// or replaced by a link, each would move the protection.
func TestLinkChainsKeepTheirTarget(t *testing.T) {
	root := realTempDir(t)
	home := filepath.Join(root, "home")
	ws := filepath.Join(home, "ws")
	for _, d := range []string{"v1/real/secret", "sub", "real2", "dot/v1", "dot/sub"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"v1/real/secret/key", "real2/file", "dot/v1/profile", "dot/zshrc"} {
		os.WriteFile(filepath.Join(ws, f), []byte("x"), 0o600)
	}
	for link, target := range map[string]string{"ws/cur": "v1", "ws/lnk": "cur/real", "ws/lnk2": "sub/../real2",
		"ws/dot/cur": "v1", ".profile": "ws/dot/cur/profile", ".zshrc": "ws/dot/sub/../zshrc"} {
		if err := os.Symlink(target, filepath.Join(home, link)); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := Compile(Input{Workspace: ws, DenyRead: rules(ws, "./lnk/secret"), DenyWrite: rules(ws, "./lnk2/file")}, Host{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	at := func(p string) string { return filepath.Join(ws, p) }
	tests := []ruleCase{
		{Change{Path: at("cur"), Kind: Modify, Link: true}, "denyRead"},  // the second link re-pointed
		{Change{Path: at("cur"), Kind: Delete}, "denyRead"},              // or removed (dangling: every run stops)
		{Change{Path: at("v1"), Kind: Create, Link: true}, "denyRead"},   // the first link's target made a link
		{Change{Path: at("sub"), Kind: Create, Link: true}, "denyWrite"}, // sub/.. would be elsewhere
		{Change{Path: at("dot/cur"), Kind: Modify, Link: true}, "home"},  // ~/.profile swapped for another file
		{Change{Path: at("dot/sub"), Kind: Create, Link: true}, "home"},  // ~/.zshrc through dot/sub/..
		{Change{Path: at("dot/v1/profile"), Kind: Modify}, "home"},       // the target itself
		{Change{Path: at("sub/x"), Kind: Create, NonDir: true}, ""},      // the rest stays writable
		{Change{Path: at("v1/other"), Kind: Create, Link: true}, ""},
		{Change{Path: at("sub"), Kind: Modify, Dir: true}, ""},
	}
	expectRules(t, pol, ws, tests)
}

// The way every rule's path resolves is kept, not only deny paths': an
// allowRead or allowWrite link re-pointed (or made at a path that does not
// exist yet) would open a denied secret or a directory outside the roots
// to the next run; a file where a deny path needs a directory would stop
// every later run; and a home persistence path that does not exist yet
// under a linked directory (~/.config -> ws/cfg, no systemd/user in it) is
// protected at the target it would have.
func TestRulePathsKeepTheirWay(t *testing.T) {
	root := realTempDir(t)
	home := filepath.Join(root, "home")
	ws := filepath.Join(root, "ws")
	for _, d := range []string{"ws/v1/real/secret", "ws/v1/real/pub", "ws/pubdir", "t1", "home"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"ws/plink": "v1/real/pub", "ws/out": "../t1", "home/.config": "../ws/cfg"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(ws, "cfg"), 0o755)
	pol, err := Compile(Input{Workspace: ws, DenyRead: rules(ws, "./v1/real/secret", "./secrets/prod.key"),
		AllowRead: rules(ws, "./pubdir", "./plink", "./later"), AllowWrite: rules(ws, "./out", "./missing")}, Host{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	at := func(p string) string { return filepath.Join(ws, p) }
	tests := []ruleCase{
		{Change{Path: at("pubdir"), Kind: Create, Link: true}, "allowRead"}, // a directory turned into a link to the secret
		{Change{Path: at("plink"), Kind: Modify, Link: true}, "allowRead"},  // re-pointed
		{Change{Path: at("later"), Kind: Create, Link: true}, "allowRead"},  // made where the rule names nothing yet
		{Change{Path: at("out"), Kind: Modify, Link: true}, "allowWrite"},   // the root moved elsewhere
		{Change{Path: at("missing"), Kind: Create, Link: true}, "allowWrite"},
		{Change{Path: at("secrets"), Kind: Create, NonDir: true}, "denyRead"}, // a file where a directory must be
		{Change{Path: at("secrets"), Kind: Create, Dir: true}, ""},
		{Change{Path: at("secrets/prod.key"), Kind: Create, NonDir: true}, ""}, // the rule hides it next run
		{Change{Path: at("cfg/systemd/user/x.service"), Kind: Create, NonDir: true}, "home"},
		{Change{Path: at("cfg/git/config"), Kind: Create, NonDir: true}, "home"},
		{Change{Path: at("cfg/other"), Kind: Create, NonDir: true}, ""},
		{Change{Path: at("pubdir/x"), Kind: Create, NonDir: true}, ""},
		{Change{Path: at("later"), Kind: Create, Dir: true}, ""},
	}
	expectRules(t, pol, ws, tests)
}

// Links anywhere on the way to what the home and sbx run are followed:
// a dangling ~/.profile into the workspace (its target made later), links
// inside persistence directories (~/.ssh/authorized_keys, a
// ~/.config/systemd/user directory link), a settings file that is a link
// (~/.claude/settings.json, ~/.claude/CLAUDE.md into a dotfiles
// workspace) and a --settings file that is one (its link kept too).
func TestLinksToWhatRunsAreFollowed(t *testing.T) {
	root := realTempDir(t)
	home, ws := filepath.Join(root, "home"), filepath.Join(root, "ws")
	for _, d := range []string{"home/.ssh", "home/.config/systemd", "home/.claude", "ws/dot", "ws/units", "ws/conf"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	for _, f := range []string{"ws/dot/ak", "ws/dot/settings.json", "ws/dot/CLAUDE.md", "ws/conf/real.json"} {
		os.WriteFile(filepath.Join(root, f), []byte("x"), 0o644)
	}
	for link, target := range map[string]string{"home/.profile": "../ws/nd/profile", "home/.ssh/authorized_keys": "../../ws/dot/ak",
		"home/.config/systemd/user": "../../../ws/units", "home/.claude/settings.json": "../../ws/dot/settings.json",
		"home/.claude/CLAUDE.md": "../../ws/dot/CLAUDE.md", "ws/sbx.json": "conf/real.json"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := Compile(Input{Workspace: ws, Self: rules(ws, home+"/.claude", home+"/.claude/settings.json", "./sbx.json")}, Host{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	at := func(p string) string { return filepath.Join(ws, p) }
	tests := []ruleCase{
		{Change{Path: at("nd/profile"), Kind: Create, NonDir: true}, "home"},
		{Change{Path: at("dot/ak"), Kind: Modify, NonDir: true}, "home"},
		{Change{Path: at("units/evil.service"), Kind: Create, NonDir: true}, "home"},
		{Change{Path: at("dot/settings.json"), Kind: Modify, NonDir: true}, "sbx"},
		{Change{Path: at("dot/CLAUDE.md"), Kind: Modify, NonDir: true}, "sbx"},
		{Change{Path: at("conf/real.json"), Kind: Modify, NonDir: true}, "sbx"},
		{Change{Path: at("sbx.json"), Kind: Modify, Link: true}, "sbx"}, // re-pointed
		{Change{Path: at("dot/other"), Kind: Create, NonDir: true}, ""},
		{Change{Path: at("conf/other.json"), Kind: Create, NonDir: true}, ""},
	}
	expectRules(t, pol, ws, tests)
}

// sbx's own default rules (Optional) take a dangling link on their way as
// the path's absence: a ~/.config pointing nowhere must not stop every
// run. A rule someone wrote still fails on it.
func TestOptionalRulesThroughADanglingLink(t *testing.T) {
	root := t.TempDir()
	home, ws := filepath.Join(root, "home"), filepath.Join(root, "ws")
	os.MkdirAll(home, 0o755)
	os.MkdirAll(ws, 0o755)
	if err := os.Symlink(filepath.Join(root, "nowhere"), filepath.Join(home, ".config")); err != nil {
		t.Fatal(err)
	}
	def := []Rule{{Pattern: filepath.Join(home, ".config/gcloud"), BaseDir: home, Origin: "default", Optional: true}}
	if _, err := Compile(Input{Workspace: ws, DenyRead: def}, Host{Home: home}); err != nil {
		t.Errorf("a default rule through a dangling link: %v", err)
	}
	def[0].Optional = false
	if _, err := Compile(Input{Workspace: ws, DenyRead: def}, Host{Home: home}); err == nil || !strings.Contains(err.Error(), "dangling") {
		t.Errorf("a written rule through a dangling link compiled: %v", err)
	}
}

// ruleCase is a change and the rule that refuses it ("" for none).
type ruleCase struct {
	c    Change
	rule string
}

// expectRules checks each change, in the writable root ws, against pol.
func expectRules(t *testing.T, pol *Policy, ws string, tests []ruleCase) {
	t.Helper()
	for _, tt := range tests {
		tt.c.Root = ws
		r := pol.Check(&tt.c)
		got := ""
		if r != nil {
			got = r.Rule
		}
		if got != tt.rule {
			t.Errorf("%s %s (link %v): rule %q, want %q (%v)", tt.c.Kind, tt.c.Path, tt.c.Link, got, tt.rule, r)
		}
	}
}

// realTempDir is a temporary directory with its links resolved (the
// compiled policy's paths are).
func realTempDir(t *testing.T) string {
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	return root
}

// What an existing repository's configuration points git at inside the
// workspace is protected as hooks and config are: its core.hooksPath,
// included files (and what they point at), a program a value runs, and
// the target of a hooks/ that is a link. Before, the sandbox rewrote a
// project's .githooks/pre-commit and the next host commit ran it.
func TestGitLinksProtectWhatGitRuns(t *testing.T) {
	ws := realTempDir(t)
	write := func(p, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".git/HEAD", "ref: refs/heads/main\n")
	write(".git/objects/.keep", "")
	write(".git/config", "[core]\n\thooksPath = .githooks\n\tfsmonitor = tools/fsmon.sh --fast\n[include]\n\tpath = ../conf/git.cfg\n[alias]\n\tx = !./bin/x.sh\n\tl = log --oneline\n")
	write("conf/git.cfg", "[includeIf \"gitdir:/\"]\n\tpath = deeper.cfg\n[diff \"img\"]\n\ttextconv = ./bin/conv\n")
	write("conf/deeper.cfg", "[core]\n\tsshCommand = ./bin/ssh.sh -v\n")
	write("scripts/hooks/keep", "")
	if err := os.Symlink("../scripts/hooks", filepath.Join(ws, ".git", "hooks")); err != nil {
		t.Fatal(err)
	}
	pol, err := Compile(Input{Workspace: ws}, Host{Home: realTempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	at := func(p string) string { return filepath.Join(ws, p) }
	tests := []ruleCase{
		{Change{Path: at(".githooks/pre-commit"), Kind: Create}, "git"},
		{Change{Path: at(".githooks"), Kind: Delete, Dir: true}, "git"},
		{Change{Path: at("tools/fsmon.sh"), Kind: Modify}, "git"},
		{Change{Path: at("conf/git.cfg"), Kind: Modify}, "git"},
		{Change{Path: at("conf/deeper.cfg"), Kind: Modify}, "git"},
		{Change{Path: at("bin/x.sh"), Kind: Create}, "git"},
		{Change{Path: at("bin/conv"), Kind: Create}, "git"},
		{Change{Path: at("bin/ssh.sh"), Kind: Create}, "git"},
		{Change{Path: at("scripts/hooks/pre-commit"), Kind: Create}, "git"},
		{Change{Path: at("bin/other"), Kind: Create}, ""},
		{Change{Path: at("log"), Kind: Create}, ""}, // an alias that is no program
		{Change{Path: at("src/main.go"), Kind: Create}, ""},
	}
	expectRules(t, pol, ws, tests)
}

// A protected name that is a link at the top of the workspace protects
// its target, existing or not: an editor reads .vscode/tasks.json through
// .vscode -> vsreal. Before, vsreal/tasks.json reached the host.
func TestProtectedLinksProtectTheirTargets(t *testing.T) {
	ws := realTempDir(t)
	for _, d := range []string{"vsreal", "tools", "a", "vsreal2"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{".vscode": "vsreal", ".envrc": "tools/envrc", "notes": "tools", ".fleet": "./a/../vsreal2"} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := Compile(Input{Workspace: ws}, Host{Home: realTempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	at := func(p string) string { return filepath.Join(ws, p) }
	expectRules(t, pol, ws, []ruleCase{
		{Change{Path: at("vsreal/tasks.json"), Kind: Create}, "protected"},
		{Change{Path: at("vsreal"), Kind: Delete, Dir: true}, "protected"},
		{Change{Path: at("tools/envrc"), Kind: Create}, "protected"}, // dangling: made later
		{Change{Path: at("tools/other"), Kind: Create}, ""},          // notes is no protected name
		{Change{Path: at("vsreal2/x"), Kind: Create}, "protected"},
		// a, passed through by "..", made a link would move .fleet.
		{Change{Path: at("a"), Kind: Create, Link: true, NonDir: true}, "protected"},
		{Change{Path: at("a/file"), Kind: Create}, ""},
	})
}

// A linked worktree's git settings live in the main repository's config
// (the common directory), and relative paths there are taken from the
// worktree: its .githooks is protected when the worktree is the
// workspace. Before, the main directory was taken for the work tree.
func TestGitLinksOfALinkedWorktree(t *testing.T) {
	root := realTempDir(t)
	main, wt := filepath.Join(root, "main"), filepath.Join(root, "wt")
	files := map[string]string{
		"main/.git/HEAD":                   "ref: refs/heads/main\n",
		"main/.git/objects/.keep":          "",
		"main/.git/config":                 "[core]\n\thooksPath = .githooks\n",
		"main/.git/worktrees/wt/HEAD":      "ref: refs/heads/wt\n",
		"main/.git/worktrees/wt/commondir": "../..\n",
		"main/.git/worktrees/wt/gitdir":    filepath.Join(wt, ".git") + "\n",
		"wt/.git":                          "gitdir: " + filepath.Join(main, ".git", "worktrees", "wt") + "\n",
	}
	for p, data := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := Compile(Input{Workspace: wt}, Host{Home: realTempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	expectRules(t, pol, wt, []ruleCase{
		{Change{Path: filepath.Join(wt, ".githooks/pre-commit"), Kind: Create}, "git"},
		{Change{Path: filepath.Join(wt, "src.go"), Kind: Create}, ""},
	})
}

// A FIFO a command left where sbx reads git's files (a submodule's
// config, a .git pointer) is refused at once: opening it used to wait
// for a writer, and every later run's policy compile with it.
func TestReadRegularRefusesAFIFO(t *testing.T) {
	ws := realTempDir(t)
	write := func(p, data string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
		if err := os.WriteFile(filepath.Join(ws, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".git/HEAD", "ref: refs/heads/main\n")
	write(".git/objects/.keep", "")
	write(".git/config", "[core]\n\tbare = false\n")
	write(".git/modules/x/HEAD", "ref: refs/heads/main\n")
	for _, p := range []string{".git/modules/x/config", "sub/.git"} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
		if err := syscall.Mkfifo(filepath.Join(ws, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var nr *regular.NotRegularError
	if _, err := ReadRegular(filepath.Join(ws, "sub/.git")); !errors.As(err, &nr) {
		t.Errorf("ReadRegular of a FIFO: %v, want a NotRegularError", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Compile(Input{Workspace: ws}, Host{Home: realTempDir(t)})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the compile still waits on a FIFO after 30 s")
	}
}

// A deny pattern with ** is expanded through linked directories (a .env
// reached through one is denied, at its real path), each directory walked
// once: two links to ".." a command left made the walk grow
// exponentially.
func TestGlobWalksEachDirectoryOnce(t *testing.T) {
	ws, home, outside := realTempDir(t), realTempDir(t), realTempDir(t)
	os.MkdirAll(filepath.Join(ws, "loop"), 0o755)
	for _, n := range []string{"a", "b"} {
		if err := os.Symlink("..", filepath.Join(ws, "loop", n)); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(ws, "loop", ".env"), []byte("x"), 0o600)
	os.MkdirAll(filepath.Join(outside, "shared"), 0o755)
	os.WriteFile(filepath.Join(outside, "shared", ".env"), []byte("x"), 0o600)
	if err := os.Symlink(filepath.Join(outside, "shared"), filepath.Join(ws, "shared")); err != nil {
		t.Fatal(err)
	}
	done := make(chan *Policy, 1)
	go func() {
		pol, err := Compile(Input{Workspace: ws, DenyRead: []Rule{{Pattern: "**/.env", BaseDir: ws, Origin: "t"}}}, Host{Home: home})
		if err != nil {
			t.Error(err)
		}
		done <- pol
	}()
	select {
	case pol := <-done:
		for _, p := range []string{filepath.Join(ws, "loop", ".env"), filepath.Join(outside, "shared", ".env")} {
			if pol != nil && !slices.ContainsFunc(pol.DenyRead, func(d Path) bool { return d.Path == p }) {
				t.Errorf("%s not denied: %v", p, pol.DenyRead)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the ** expansion still runs after 30 s")
	}
}

// globFollow matches as doublestar does on a tree without links.
func TestGlobFollowMatchesDoublestar(t *testing.T) {
	root := realTempDir(t)
	for _, p := range []string{"a/.env", "a/b/.env", "a/b/c.yaml", "x.env", "d/e/f/g.pem", "d/k.pem"} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		os.WriteFile(filepath.Join(root, p), nil, 0o600)
	}
	for _, pat := range []string{"**/.env", "*.env", "a/*/.env", "d/**/*.pem", "d/*.pem", "{a,d}/**", "a/b/c.{yaml,yml}", "[ad]/*"} {
		want, _ := doublestar.FilepathGlob(filepath.Join(root, pat))
		got, err := globFollow(filepath.Join(root, pat))
		slices.Sort(want)
		slices.Sort(got)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v %v, doublestar %v", pat, got, err, want)
		}
	}
}

// A git directory outside the workspace that fails its checks is said once
// per compile, though the policy and its git links both look for it.
func TestGitDirsOutsideWarnOnce(t *testing.T) {
	h := newFakeHost()
	for _, d := range []string{"/home/u/main", "/home/u/main/.git", "/home/u/main/.git/objects", "/home/u/main/sub"} {
		h.dirs[d] = true
	}
	h.content = map[string]string{"/home/u/main/.git/HEAD": "ref: refs/heads/main\n", "/home/u/main/.git/config": "[include]\n\tpath = x\n"}
	pol, err := Compile(Input{Workspace: "/home/u/main/sub"}, h.host())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, w := range pol.Warnings {
		if strings.Contains(w, "config cannot be checked") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("warned %d times: %q", n, pol.Warnings)
	}
}
