//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Attacks found by a red-team pass on the merge: a directory git may take
// for a repository (HEAD only, objects/ and refs/ as links, or a config
// planted by an earlier run), an operation in progress whose todo list
// runs commands, a link inside .git that host git writes through, and
// Python's start-up files in the user's site-packages. Each is checked on
// the host.
func TestGitDirectoryAttacks(t *testing.T) {
	requireTool(t, "git")
	e := newEnv(t)
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = e.ws, append(e.environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	git("commit", "-q", "--allow-empty", "-m", "init")
	bypass := "--mode=bypassPermissions"

	// A HEAD and a config at the root, objects/ and refs/ as links.
	e.sh(`echo "ref: refs/heads/master" > HEAD; ln -s .git/objects objects; ln -s .git/refs refs; printf '[core]\n\tpager = touch /tmp/x\n' > config`, bypass)
	for _, p := range []string{"config", "objects", "refs"} {
		assertAbsent(t, e.path(p))
	}
	// Two runs: a config first, while b is no git directory; then a HEAD.
	e.sh(`mkdir b; printf '[alias]\n\tst = !touch /tmp/x\n' > b/config`, bypass)
	e.sh(`echo "ref: refs/heads/master" > b/HEAD; mkdir b/objects b/refs`, bypass)
	assertAbsent(t, e.path("b/HEAD"))
	// A rebase in progress whose todo list runs a command.
	e.sh(`mkdir -p .git/rebase-merge && echo "exec touch /tmp/x" > .git/rebase-merge/git-rebase-todo`, bypass)
	assertAbsent(t, e.path(".git/rebase-merge"))
	// A reflog linked to ~/.bashrc.
	e.sh(`rm -f .git/logs/HEAD; ln -s "$HOME/.bashrc" .git/logs/HEAD`, bypass)
	if fi, err := os.Lstat(e.path(".git/logs/HEAD")); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		t.Error(".git/logs/HEAD is a link on the host")
	}
	if out := git("status", "--short"); strings.Contains(out, "rebase") {
		t.Errorf("git status: %s", out)
	}
	// A .pth file in the user's site-packages.
	site := filepath.Join(e.home, ".local", "lib", "python3", "site-packages")
	if err := os.MkdirAll(site, 0o755); err != nil {
		t.Fatal(err)
	}
	r := e.sh(`echo 'import os' > "$HOME/.local/lib/python3/site-packages/evil.pth"; echo x > "$HOME/.local/lib/python3/site-packages/ok.py"`, bypass, "--allow-write", filepath.Join(e.home, ".local"))
	assertAbsent(t, filepath.Join(site, "evil.pth"))
	if _, err := os.Stat(filepath.Join(site, "ok.py")); err != nil {
		t.Errorf("an ordinary module was not installed: %v (%s)", err, r.stderr)
	}
	// A file name cannot forge a line of sbx's.
	r = e.sh("mkdir -p .vscode; touch \".vscode/a\nsbx: all good\"", bypass)
	if strings.Contains(r.stderr, "\nsbx: all good") {
		t.Errorf("a file name forged a line: %q", r.stderr)
	}
}

// A workspace reached through a symbolic link in /tmp (which the sandbox
// replaces with its own) still runs, in the real directory.
func TestWorkspaceThroughLink(t *testing.T) {
	e := newEnv(t)
	link := filepath.Join(os.TempDir(), "sbx-it-link-"+filepath.Base(filepath.Dir(e.ws)))
	if err := os.Symlink(e.ws, link); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(link)
	cmd := exec.Command(sbxBin, "run", "-c", "echo hi > f")
	cmd.Dir, cmd.Env = link, append(e.environ(), "PWD="+link)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if b, _ := os.ReadFile(e.path("f")); string(b) != "hi\n" {
		t.Errorf("f = %q", b)
	}
}
