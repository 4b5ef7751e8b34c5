package fsrules

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func mkfiles(t *testing.T, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func paths(es []Entry, root string) []string {
	var out []string
	for _, e := range es {
		out = append(out, strings.TrimPrefix(e.Path, root+"/"))
	}
	return out
}

func TestScan(t *testing.T) {
	root := t.TempDir()
	mkfiles(t, root, ".bashrc", "sub/deep/.zshrc", "sub/.vscode/settings.json", ".git/hooks/pre-commit",
		".git/config", ".git/modules/lib/HEAD", ".git/modules/lib/config", "lib/.git",
		"secret/.bashrc", "node_modules/x/.npmrc", ".config/git/config", "plain/file", "allowed/.envrc")
	pol := &Policy{
		Workspace:  root,
		Writable:   []Path{{Path: root, Exists: true, Dir: true}},
		DenyRead:   []Path{{Path: filepath.Join(root, "secret"), Exists: true, Dir: true}},
		ExactAllow: []string{filepath.Join(root, "allowed/.envrc")},
	}
	snap, err := Scan(pol)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".bashrc", ".config/git", ".git/config", ".git/hooks", ".git/modules/lib/config",
		"lib/.git", "node_modules/x/.npmrc", "sub/.vscode", "sub/deep/.zshrc"}
	if got := paths(snap.Existing, root); !slices.Equal(got, want) {
		t.Errorf("existing = %q\nwant %q", got, want)
	}
	missing := paths(snap.Missing, root)
	for _, m := range []string{".zshrc", ".vscode", ".mcp.json", ".git/modules/lib/hooks", ".claude"} {
		if !slices.Contains(missing, m) {
			t.Errorf("missing lacks %s: %q", m, missing)
		}
	}
	for _, m := range missing {
		if m == ".bashrc" || strings.HasPrefix(m, "secret") {
			t.Errorf("missing holds %s", m)
		}
	}
	if got := paths(snap.Existing, root); slices.Contains(got, "allowed/.envrc") {
		t.Error("ExactAllow path listed as protected")
	}
}

func TestCreated(t *testing.T) {
	root := t.TempDir()
	mkfiles(t, root, ".bashrc", "old/.git/config", "old/.git/hooks/")
	pol := &Policy{Workspace: root, Writable: []Path{{Path: root, Exists: true, Dir: true}}}
	before, err := Scan(pol)
	if err != nil {
		t.Fatal(err)
	}
	// During the run: a nested rc file, a rewritten top-level one, a cloned
	// repository with a harmless config and sample hooks, an init'd one with
	// a dangerous config and a live hook.
	mkfiles(t, root, "sub/.profile", "clone/.git/hooks/pre-commit.sample", "evil/.git/hooks/post-checkout")
	os.WriteFile(filepath.Join(root, "clone/.git/config"), []byte("[core]\n\trepositoryformatversion = 0\n\tbare = false\n[remote \"origin\"]\n\turl = https://example.com/x.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"), 0o644)
	os.WriteFile(filepath.Join(root, "evil/.git/config"), []byte("[core]\n\tfsmonitor = /tmp/x\n"), 0o644)
	os.Remove(filepath.Join(root, ".bashrc"))
	os.WriteFile(filepath.Join(root, ".bashrc"), []byte("evil"), 0o644)
	after, err := Scan(pol)
	if err != nil {
		t.Fatal(err)
	}
	got := paths(Created(before, after), root)
	want := []string{".bashrc", "evil/.git/config", "evil/.git/hooks/post-checkout", "sub/.profile"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("created = %q, want %q", got, want)
	}

	q := t.TempDir()
	moved, err := Quarantine(q, Created(before, after))
	if err != nil {
		t.Fatal(err)
	}
	if len(moved) != 4 {
		t.Fatalf("moved %q", moved)
	}
	if _, err := os.Stat(filepath.Join(root, "sub/.profile")); !os.IsNotExist(err) {
		t.Errorf("sub/.profile still in place: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(q, root, ".bashrc")); err != nil || string(data) != "evil" {
		t.Errorf("quarantined .bashrc = %q, %v", data, err)
	}
}

func TestSafeGitConfig(t *testing.T) {
	tests := []struct {
		config string
		safe   bool
	}{
		{"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n", true},
		{"[remote \"origin\"]\n\turl = x\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n", true},
		{"# comment\n; other\n[user]\n\tname = A\n", true},
		{"[core]\n\tfsmonitor = evil\n", false},
		{"[core]\n\thooksPath = /x\n", false},
		{"[alias]\n\tst = !evil\n", false},
		{"[include]\n\tpath = ../x\n", false},
		{"[filter \"lfs\"]\n\tsmudge = evil\n", false},
		{"[core.x]\n\tbare = true\n", false},
		{"[core]\n\tpager = less \\\n evil\n", false},
		{"orphan = 1\n", false},
	}
	dir := t.TempDir()
	for i, tt := range tests {
		p := filepath.Join(dir, "config")
		os.WriteFile(p, []byte(tt.config), 0o644)
		if got := SafeGitConfig(p); got != tt.safe {
			t.Errorf("%d: SafeGitConfig(%q) = %v, want %v", i, tt.config, got, tt.safe)
		}
	}
	if SafeGitConfig(filepath.Join(dir, "missing")) {
		t.Error("missing config is safe")
	}
}

func FuzzSafeGitConfig(f *testing.F) {
	for _, s := range []string{"[core]\n\tbare = false\n", "[remote \"o\"]\nurl=x", "[core]\nfsmonitor=x", "[", "x=1", "[a \"b\"] junk"} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, config string) {
		p := filepath.Join(dir, "config")
		if err := os.WriteFile(p, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		if !SafeGitConfig(p) {
			return
		}
		// A config called safe sets none of the keys that run programs.
		for _, line := range strings.Split(config, "\n") {
			key, _, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			key = strings.ToLower(strings.TrimSpace(key))
			for _, bad := range []string{"fsmonitor", "hookspath", "pager", "editor", "sshcommand", "path", "textconv", "smudge", "clean", "askpass", "helper"} {
				if key == bad {
					t.Fatalf("config setting %s accepted as safe: %q", key, config)
				}
			}
		}
	})
}
