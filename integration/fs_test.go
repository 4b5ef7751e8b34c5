//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/fsrules"
)

func TestWorkspaceWritableRestReadOnly(t *testing.T) {
	e := newEnv(t)
	outside, err := os.MkdirTemp("/var/tmp", "sbx-it-outside-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(outside)
	homeFile := filepath.Join(e.home, "notes")
	r := e.sh(fmt.Sprintf(`echo inside > out.txt; mkdir -p d/e && echo deep > d/e/f
		echo x > %[1]s/new; echo y > %[2]s; echo z > /etc/sbx-it-probe; true`, outside, homeFile))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	assertContent(t, e.path("out.txt"), "inside\n")
	assertContent(t, e.path("d/e/f"), "deep\n")
	assertAbsent(t, filepath.Join(outside, "new"))
	assertAbsent(t, homeFile)
	assertAbsent(t, "/etc/sbx-it-probe")
	if !strings.Contains(r.stderr, "Read-only file system") {
		t.Errorf("stderr lacks EROFS: %s", r.stderr)
	}
}

func TestPrivateTmp(t *testing.T) {
	e := newEnv(t)
	name := filepath.Join("/tmp", filepath.Base(e.ws)+"-private")
	r := e.sh(`echo "$TMPDIR"; test -d "$TMPDIR" && test -w "$TMPDIR" && echo ok; echo secret > ` + name + `; mktemp`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || lines[0] != "/tmp" || lines[1] != "ok" || !strings.HasPrefix(lines[2], "/tmp/tmp.") {
		t.Errorf("stdout = %q", r.stdout)
	}
	assertAbsent(t, name)
	assertAbsent(t, lines[len(lines)-1])
}

func TestDenyWrite(t *testing.T) {
	e := newEnv(t)
	e.write("locked.txt", "original")
	e.write("keep/inner.txt", "kept")
	e.write("other.txt", "other")
	settings := `{"sandbox": {"filesystem": {"denyWrite": ["./locked.txt", "./keep", "./future.txt", "./later/deep/x"]}}}`
	// Existing denyWrite paths are read-only inside (the write fails
	// there); a path that does not exist yet can be made inside, and the
	// merge refuses it (named on stderr).
	tests := []struct {
		name, script string
		refused      bool
	}{
		{"write", "echo evil > locked.txt", false},
		{"append", "echo evil >> locked.txt", false},
		{"truncate", "truncate -s0 locked.txt", false},
		{"delete", "rm -f locked.txt", false},
		{"rename away", "mv locked.txt moved.txt", false},
		{"rename over", "mv other.txt locked.txt", false},
		{"chmod", "chmod 777 locked.txt", false},
		{"write in dir", "echo evil > keep/inner.txt", false},
		{"create in dir", "echo evil > keep/new.txt", false},
		{"delete dir", "rm -rf keep", false},
		{"create denied path", "echo evil > future.txt", true},
		{"create under denied path", "mkdir -p later/deep && echo evil > later/deep/x", true},
		{"symlink then write", "ln -s locked.txt l && echo evil > l", false},
		{"hard link then write", "ln locked.txt h && echo evil > h", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.sh(tt.script, "--settings", settings)
			if tt.refused && !strings.Contains(r.stderr, "refused to create") {
				t.Errorf("the merge did not report the refusal; stderr: %s", r.stderr)
			}
			if !tt.refused && r.code == 0 {
				t.Errorf("exit 0, want a failure; stderr: %s", r.stderr)
			}
			assertContent(t, e.path("locked.txt"), "original")
			assertContent(t, e.path("keep/inner.txt"), "kept")
			assertContent(t, e.path("other.txt"), "other")
			assertAbsent(t, e.path("keep/new.txt"))
			assertAbsent(t, e.path("moved.txt"))
			assertAbsent(t, e.path("future.txt"))
			assertAbsent(t, e.path("later/deep/x"))
			os.Remove(e.path("l"))
			os.Remove(e.path("h"))
		})
	}
	// Nothing of sbx's stays behind (the directories above a denied
	// path may be made).
	got := listing(t, e.ws)
	slices.Sort(got)
	if want := []string{"keep", "keep/inner.txt", "later", "later/deep", "locked.txt", "other.txt"}; !slices.Equal(got, want) {
		t.Errorf("workspace after runs = %q, want %q", got, want)
	}
}

func TestDenyWriteFlagAndAllowWrite(t *testing.T) {
	e := newEnv(t)
	extra := t.TempDir() // under /tmp, which is private in the sandbox unless allowed
	e.write("f", "orig")
	r := e.sh("echo new > "+extra+"/made; echo evil > f", "--allow-write", extra, "--deny-write", "f")
	if r.code == 0 {
		t.Errorf("writing the denied file succeeded")
	}
	assertContent(t, filepath.Join(extra, "made"), "new\n")
	assertContent(t, e.path("f"), "orig")
}

func TestLinksOutOfTheWorkspace(t *testing.T) {
	e := newEnv(t)
	outside, err := os.MkdirTemp("/var/tmp", "sbx-it-target-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(outside)
	target := filepath.Join(outside, "target")
	os.WriteFile(target, []byte("host"), 0o644)
	e.write(".bashrc", "rc")
	r := e.sh(fmt.Sprintf(`ln -s %s sl; echo evil > sl
		ln -s .bashrc rc; echo evil > rc
		ln %s hl; echo $? > hl-status
		ln .bashrc hl2; echo evil >> hl2
		ln -s %s/created dangling; echo evil > dangling; true`, target, target, outside))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	assertContent(t, target, "host")
	assertContent(t, e.path(".bashrc"), "rc")
	assertAbsent(t, filepath.Join(outside, "created"))
	assertAbsent(t, e.path("hl"))
	// hl2 was a link to .bashrc inside; on the host it is a new file of
	// its own, never a link to the protected file.
	if a, err := os.Stat(e.path("hl2")); err == nil {
		if b, err := os.Stat(e.path(".bashrc")); err == nil && os.SameFile(a, b) {
			t.Errorf("hl2 is a hard link to .bashrc on the host")
		}
	}
}

func TestDenyRead(t *testing.T) {
	e := newEnv(t)
	e.write("secrets/key.pem", "TOPSECRET-1")
	e.write("secrets/public/readme", "public-ok")
	e.write(".env", "TOPSECRET-2")
	e.write("plain", "visible")
	outsideDir, err := os.MkdirTemp("/var/tmp", "sbx-it-secret-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(outsideDir)
	os.WriteFile(filepath.Join(outsideDir, "creds"), []byte("TOPSECRET-3"), 0o600)
	settings := fmt.Sprintf(`{"sandbox": {"filesystem": {"denyRead": ["./secrets", "./.env", "%s"], "allowRead": ["./secrets/public"]}}}`, outsideDir)
	r := e.sh(fmt.Sprintf(`cat secrets/key.pem .env %[1]s/creds; ls -la secrets %[1]s; cat plain secrets/public/readme
		echo leak > secrets/new; echo leak > .env`, outsideDir), "--settings", settings)
	for _, s := range []string{"TOPSECRET-1", "TOPSECRET-2", "TOPSECRET-3"} {
		if strings.Contains(r.stdout+r.stderr, s) {
			t.Errorf("output reveals %q:\n%s\n%s", s, r.stdout, r.stderr)
		}
	}
	// The directory listings (stdout) do not name the hidden files.
	for _, s := range []string{"key.pem", "creds"} {
		if strings.Contains(r.stdout, s) {
			t.Errorf("listing reveals %q:\n%s", s, r.stdout)
		}
	}
	for _, s := range []string{"visible", "public-ok"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("output lacks %q: %s", s, r.stdout)
		}
	}
	assertContent(t, e.path(".env"), "TOPSECRET-2")
	assertAbsent(t, e.path("secrets/new"))
}

// A denyRead path that is a symbolic link hides its target; a sandbox that
// re-points the link, or leaves a dangling one at a denied path, would move
// the protection (the old target readable next run) or make every later
// run fail. Both are refused at the merge; the next run still hides the
// target and starts.
func TestDenyReadLinkCannotBeMoved(t *testing.T) {
	e := newEnv(t)
	outside, err := os.MkdirTemp("/var/tmp", "sbx-it-linked-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(outside)
	target := filepath.Join(outside, "real")
	os.WriteFile(target, []byte("TOPSECRET-LINKED"), 0o600)
	if err := os.Symlink(target, e.path("secret")); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--deny-read", "./secret", "--deny-read", "./later", "--deny-read", "./dir/sub/key"}
	r := e.sh(`ln -sfn /etc/hostname secret; ln -s /nonexistent later; mkdir dir; ln -s /nonexistent dir/sub; echo done`, flags...)
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, p := range []string{"secret", "later", "dir/sub"} {
		if !strings.Contains(r.stderr, "refused to ") || !strings.Contains(r.stderr, e.path(p)+" (denyRead") {
			t.Errorf("the change of %s was not refused: %s", p, r.stderr)
		}
	}
	if got, err := os.Readlink(e.path("secret")); err != nil || got != target {
		t.Errorf("the link on the host now points to %q (%v), want %s", got, err, target)
	}
	assertAbsent(t, e.path("later"))
	assertAbsent(t, e.path("dir/sub"))
	r = e.sh(`cat `+target+` secret; echo started`, flags...)
	if strings.Contains(r.stdout+r.stderr, "TOPSECRET") || !strings.Contains(r.stdout, "started") {
		t.Errorf("next run: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestPersistenceFiles checks every protected name: existing or new, at the
// top of the workspace or nested, and inside .git.
func TestPersistenceFiles(t *testing.T) {
	e := newEnv(t)
	e.mkdir("nested/deeper")
	e.write(".git/config", "[core]\n\tbare = false\n")
	e.mkdir(".git/hooks")
	var existing, fresh []string
	for i, n := range fsrules.ProtectedFiles() {
		if i%2 == 0 {
			existing = append(existing, n, "nested/deeper/"+n)
			e.write(n, "orig")
			e.write("nested/deeper/"+n, "orig")
		} else {
			fresh = append(fresh, n, "nested/"+n)
		}
	}
	var script strings.Builder
	for _, n := range append(append([]string{}, existing...), fresh...) {
		fmt.Fprintf(&script, "echo evil > %s; ", n)
	}
	for _, d := range fsrules.ProtectedDirs() {
		fmt.Fprintf(&script, "mkdir -p %[1]s; echo evil > %[1]s/x; mkdir -p nested/%[1]s; echo evil > nested/%[1]s/x; ", d)
	}
	script.WriteString("echo evil > .git/hooks/pre-commit; echo evil >> .git/config; ")
	script.WriteString("mkdir -p .config/git; echo evil > .config/git/config; ")
	script.WriteString("mkdir -p sub && cd sub && git init -q . && echo evil > .git/hooks/post-checkout && git config core.fsmonitor evil; true")
	// bypassPermissions: the gate would (rightly) ask before these writes;
	// this test is about the sandbox layer.
	r := e.sh(script.String(), "--mode", "bypassPermissions")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, n := range existing {
		assertContent(t, e.path(n), "orig")
	}
	for _, n := range fresh {
		assertAbsent(t, e.path(n))
	}
	for _, d := range fsrules.ProtectedDirs() {
		assertAbsent(t, e.path(d))
		assertAbsent(t, e.path("nested/"+d))
	}
	assertAbsent(t, e.path(".git/hooks/pre-commit"))
	assertContent(t, e.path(".git/config"), "[core]\n\tbare = false\n")
	assertAbsent(t, e.path(".config/git"))
	assertAbsent(t, e.path("sub/.git/hooks/post-checkout"))
	assertAbsent(t, e.path("sub/.git/config"))
	// What the merge refused is in the quarantine, not deleted.
	q := filepath.Join(e.home, ".local/state/sbx/quarantine")
	var inQuarantine []string
	for _, p := range listing(t, q) {
		if i := strings.Index(p, e.ws); i >= 0 {
			inQuarantine = append(inQuarantine, strings.TrimPrefix(p[i+len(e.ws):], "/"))
		}
	}
	for _, want := range []string{"nested/" + fsrules.ProtectedFiles()[1], "sub/.git/hooks/post-checkout", "sub/.git/config", "nested/.vscode/x"} {
		if !slices.Contains(inQuarantine, want) {
			t.Errorf("quarantine lacks %s: %q", want, inQuarantine)
		}
	}
	if !strings.Contains(r.stderr, "refused to create "+e.path(".vscode")) || !strings.Contains(r.stderr, "saved at "+q) {
		t.Errorf("stderr does not report the refusals: %s", r.stderr)
	}
}

func TestExplicitAllowWriteOfProtectedPath(t *testing.T) {
	e := newEnv(t)
	e.write(".envrc", "orig")
	r := e.sh("echo mine > .envrc", "--allow-write", ".envrc", "--mode", "bypassPermissions")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	assertContent(t, e.path(".envrc"), "mine\n")
}

func TestGitWorksInTheSandbox(t *testing.T) {
	e := newEnv(t)
	r := e.sh(`git init -q . && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m one && git log --oneline | wc -l`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.TrimSpace(r.stdout) != "1" {
		t.Errorf("stdout = %q", r.stdout)
	}
	// git init's config holds only harmless keys: it stays.
	if _, err := os.Stat(e.path(".git/config")); err != nil {
		t.Errorf(".git/config: %v", err)
	}
}

// TestGitWorktreeOutsideWorkspace: a linked worktree's git directory lies
// outside the workspace; commits must work, hooks and config stay
// protected.
func TestGitWorktreeOutsideWorkspace(t *testing.T) {
	e := newEnv(t)
	main, err := os.MkdirTemp("/var/tmp", "sbx-it-main-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(main)
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return string(out)
	}
	git(main, "init", "-q", "-b", "main")
	git(main, "commit", "-q", "--allow-empty", "-m", "root")
	wt := filepath.Join(filepath.Dir(e.ws), "wt")
	git(main, "worktree", "add", "-q", "-b", "feature", wt)
	e.ws = wt
	config, _ := os.ReadFile(filepath.Join(main, ".git", "config"))
	r := e.sh(`echo x > f && git add f && git -c user.name=a -c user.email=b commit -qm in-sandbox && echo committed;
		echo evil > "$(git rev-parse --git-common-dir)/hooks/pre-commit"; echo '[core] fsmonitor = evil' >> "$(git rev-parse --git-common-dir)/config"; true`,
		"--mode", "bypassPermissions")
	if !strings.Contains(r.stdout, "committed") {
		t.Fatalf("commit in the worktree failed: %s %s", r.stdout, r.stderr)
	}
	if log := git(main, "log", "--oneline", "feature"); !strings.Contains(log, "in-sandbox") {
		t.Errorf("the commit is not in the repository: %s", log)
	}
	assertAbsent(t, filepath.Join(main, ".git", "hooks", "pre-commit"))
	assertContent(t, filepath.Join(main, ".git", "config"), string(config))
}

// TestGitFromRepositorySubfolder runs sbx in a subfolder of a repository:
// git finds the repository above the workspace's mount and commits there,
// and the repository's git directory takes only git's own data (a hook, a
// config key that runs a program, alternates stay out). A repository whose
// work tree is the home directory is read, never written.
func TestGitFromRepositorySubfolder(t *testing.T) {
	e := newEnv(t)
	e.newRepo()
	repo := e.ws
	e.ws = filepath.Join(repo, "sub")
	if err := os.Mkdir(e.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	config, _ := os.ReadFile(filepath.Join(repo, ".git", "config"))
	r := e.sh(`git status --short >/dev/null && echo x > f && git add f && git -c user.name=a -c user.email=b commit -qm in-sandbox && echo committed
		g=$(git rev-parse --git-dir); printf '#!/bin/sh\necho pwned\n' > "$g/hooks/post-checkout"
		git config core.fsmonitor evil; echo /etc > "$g/objects/info/alternates"; true`, "--mode", "bypassPermissions")
	if !strings.Contains(r.stdout, "committed") {
		t.Fatalf("commit from a subfolder failed: %s %s", r.stdout, r.stderr)
	}
	if log := gitOn(t, repo, "log", "--oneline"); !strings.Contains(log, "in-sandbox") {
		t.Errorf("the commit is not in the repository: %s", log)
	}
	if st := gitOn(t, repo, "status", "--short"); st != "" {
		t.Errorf("git status on the host after the commit: %q", st)
	}
	assertAbsent(t, filepath.Join(repo, ".git", "hooks", "post-checkout"))
	assertAbsent(t, filepath.Join(repo, ".git", "objects", "info", "alternates"))
	assertContent(t, filepath.Join(repo, ".git", "config"), string(config))

	gitOn(t, e.home, "init", "-q", "-b", "main")
	e.ws = filepath.Join(e.home, "proj")
	if err := os.Mkdir(e.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	r = e.sh(`git rev-parse --show-toplevel; git -c user.name=a -c user.email=b commit -q --allow-empty -m home; echo rc=$?`,
		"--mode", "bypassPermissions")
	if !strings.Contains(r.stdout, e.home+"\n") || !strings.Contains(r.stdout, "rc=128") {
		t.Errorf("git in a home kept in git should read it and fail to write: %s %s", r.stdout, r.stderr)
	}
	assertAbsent(t, filepath.Join(e.home, ".git", "refs", "heads", "main"))
}

// TestIndexNamingAHookIsRefused: a command that edits the index's bytes so
// that an entry is named .git/hooks/pre-commit (git checks a path when it
// adds it, and trusts the index it reads: the host's `git restore .`
// would write the hook) has the index refused; the host's git then
// restores nothing into .git. Before, the index merged as git's own data
// (a red-team finding).
func TestIndexNamingAHookIsRefused(t *testing.T) {
	e := newEnv(t)
	requireTool(t, "python3")
	e.newRepo()
	index := filepath.Join(e.ws, ".git", "index")
	before, _ := os.ReadFile(index)
	e.write("edit.py", `import hashlib, sys
p = sys.argv[1]
d = open(p, "rb").read()[:-20].replace(b"Xgit/", b".git/", 1)
open(p, "wb").write(d + hashlib.sha1(d).digest())
`)
	r := e.sh(`mkdir -p Xgit/hooks && printf '#!/bin/sh\necho pwned\n' > Xgit/hooks/pre-commit && chmod +x Xgit/hooks/pre-commit &&
		git add Xgit && python3 edit.py "$(git rev-parse --git-dir)/index" && git ls-files`, "--mode", "bypassPermissions")
	if !strings.Contains(r.stdout, ".git/hooks/pre-commit") {
		t.Fatalf("the edited index does not name the hook inside the sandbox: %s %s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "refused to change "+index) {
		t.Errorf("no refusal of the index: %s", r.stderr)
	}
	assertContent(t, index, string(before))
	gitOn(t, e.ws, "restore", ".")
	assertAbsent(t, filepath.Join(e.ws, ".git", "hooks", "pre-commit"))
}

// TestLockFileBecomesNothingUnchecked: while the host's git holds
// .git/index.lock (git commit -a with its editor open), a command that
// writes its own index.lock (naming .git/hooks/pre-commit) or config.lock
// has them refused: the host's git would rename them to index and config
// unchecked when it finishes (a red-team finding). A stale lock the
// command removes is removed.
func TestLockFileBecomesNothingUnchecked(t *testing.T) {
	e := newEnv(t)
	e.newRepo()
	g := filepath.Join(e.ws, ".git")
	for _, n := range []string{"index.lock", "config.lock", "packed-refs.lock"} {
		if err := os.WriteFile(filepath.Join(g, n), []byte("held by the host's git\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.write("locks.sh", `cd .git && cp index index.lock && printf '[core]\n\tfsmonitor = evil\n' > config.lock && rm packed-refs.lock`)
	r := e.sh(`sh locks.sh`, "--mode", "bypassPermissions")
	for _, n := range []string{"index.lock", "config.lock"} {
		assertContent(t, filepath.Join(g, n), "held by the host's git\n")
		if !strings.Contains(r.stderr, "refused to change "+filepath.Join(g, n)) {
			t.Errorf("no refusal of %s: %s", n, r.stderr)
		}
	}
	assertAbsent(t, filepath.Join(g, "packed-refs.lock"))
}
