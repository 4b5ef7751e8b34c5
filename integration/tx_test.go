//go:build linux

package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// git runs git on the host in dir.
func gitOn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// newRepo makes the workspace a git repository with one commit.
func (e *env) newRepo() {
	e.t.Helper()
	gitOn(e.t, e.ws, "init", "-q", "-b", "main")
	e.write("README", "hi\n")
	gitOn(e.t, e.ws, "add", "README")
	gitOn(e.t, e.ws, "commit", "-qm", "first")
}

const bypass = "--mode=bypassPermissions"

// A .git pointer made in one run cannot give the next run a writable root
// elsewhere: the pointer (a file or a link) never reaches the host.
func TestAttackGitPointerRedirect(t *testing.T) {
	for _, script := range []string{
		`printf 'gitdir: /etc\n' > notes.txt; ln -s notes.txt .git`,
		`printf 'gitdir: /etc\n' > .git`,
		`mkdir -p sub && printf 'gitdir: /etc\n' > sub/.git`,
	} {
		e := newEnv(t)
		r := e.sh(script, bypass)
		if !strings.Contains(r.stderr, "refused to create") || !strings.Contains(r.stderr, ".git") {
			t.Errorf("%s: the pointer was not refused: %s", script, r.stderr)
		}
		r = e.sh(`echo evil > /etc/sbx-it-pointer; true`, bypass)
		assertAbsent(t, "/etc/sbx-it-pointer")
		assertAbsent(t, e.path(".git"))
		assertAbsent(t, e.path("sub/.git"))
	}
	// A linked worktree's .git replaced by a pointer elsewhere: refused,
	// the real one stays.
	e := newEnv(t)
	e.newRepo()
	r := e.sh(`mv .git .git-real && printf 'gitdir: /etc\n' > .git`, bypass)
	if st, err := os.Lstat(e.path(".git")); err != nil || !st.IsDir() {
		t.Errorf(".git is no longer the repository: %v %v; stderr %s", st, err, r.stderr)
	}
	gitOn(t, e.ws, "status", "--porcelain")
}

// Redirections inside a git directory and a bare repository with hooks
// behind a .git link: none reaches the host, and git on the host runs
// nothing of the command's.
func TestAttackGitRedirections(t *testing.T) {
	e := newEnv(t)
	e.newRepo()
	marker := filepath.Join(e.home, "pwned")
	r := e.sh(fmt.Sprintf(`set -e
git config core.hooksPath /tmp
echo x > .git/commondir
mkdir -p .git/x && printf '[core]\n\tfsmonitor = touch %[1]s\n' > .git/x/config
printf '#!/bin/sh\ntouch %[1]s\n' > .git/hooks/post-checkout; chmod +x .git/hooks/post-checkout
git init -q --bare evil.git && printf '#!/bin/sh\ntouch %[1]s\n' > evil.git/hooks/pre-commit
mkdir -p sub && ln -s ../evil.git sub/.git
echo '* filter=x' > .git/info/attributes
echo done`, marker), bypass)
	if r.stdout != "done\n" {
		t.Fatalf("the command failed inside: %s %s", r.stdout, r.stderr)
	}
	for _, p := range []string{".git/commondir", ".git/x", ".git/hooks/post-checkout", "evil.git/hooks/pre-commit", "sub/.git", ".git/info/attributes"} {
		assertAbsent(t, e.path(p))
		if !strings.Contains(r.stderr, "refused to create "+e.path(p)) {
			t.Errorf("%s: no refusal named on stderr", p)
		}
	}
	if strings.Contains(gitOn(t, e.ws, "config", "--list"), "hookspath") {
		t.Errorf("core.hooksPath reached the host config")
	}
	gitOn(t, e.ws, "status")
	gitOn(t, e.ws, "checkout", "-q", "-b", "x")
	assertAbsent(t, marker)
	// What was refused is in the quarantine.
	q := filepath.Join(e.home, ".local/state/sbx/quarantine")
	found := false
	for _, p := range listing(t, q) {
		found = found || strings.HasSuffix(p, ".git/hooks/post-checkout")
	}
	if !found {
		t.Errorf("the refused hook is not in the quarantine: %v", listing(t, q))
	}
}

// TestAttackExistingGitSettings: what an existing repository's settings
// point git at in the workspace (a core.hooksPath folder, an included
// config file, a program a value runs, the target of a hooks/ link) keeps
// unchanged, and a directory holding a hook an earlier run left cannot be
// made a bare repository later. Before, each was written, and the host's
// next git commit, status or fetch ran the sandbox's code.
func TestAttackExistingGitSettings(t *testing.T) {
	e := newEnv(t)
	e.newRepo()
	marker := filepath.Join(e.home, "pwned")
	e.write(".githooks/pre-commit", "#!/bin/sh\nexit 0\n")
	e.write("conf/git.cfg", "")
	e.write("tools/fsmon.sh", "#!/bin/sh\nexit 1\n")
	e.write("scripts/hooks/README", "hooks\n")
	os.Chmod(e.path(".githooks/pre-commit"), 0o755)
	os.Chmod(e.path("tools/fsmon.sh"), 0o755)
	gitOn(t, e.ws, "config", "core.hooksPath", ".githooks")
	gitOn(t, e.ws, "config", "include.path", "../conf/git.cfg")
	gitOn(t, e.ws, "config", "alias.fm", "!./tools/fsmon.sh")
	r := e.sh(fmt.Sprintf(`hook='#!/bin/sh
touch %[1]s'
printf '%%s\n' "$hook" > .githooks/pre-commit
printf '[core]\n\tfsmonitor = "touch %[1]s; false"\n' >> conf/git.cfg
printf '%%s\n' "$hook" > tools/fsmon.sh
mkdir -p evil/hooks && printf '%%s\n' "$hook" > evil/hooks/reference-transaction && chmod +x evil/hooks/reference-transaction
echo kept > notes.txt
echo done`, marker), bypass)
	if r.stdout != "done\n" {
		t.Fatalf("the command failed inside: %s %s", r.stdout, r.stderr)
	}
	for _, p := range []string{".githooks/pre-commit", "conf/git.cfg", "tools/fsmon.sh"} {
		if !strings.Contains(r.stderr, "refused to change "+e.path(p)) {
			t.Errorf("%s: no refusal named on stderr: %s", p, r.stderr)
		}
	}
	assertContent(t, e.path("notes.txt"), "kept\n")
	// A later run makes evil a git directory: its HEAD is refused.
	r = e.sh(`cd evil && mkdir -p objects refs/heads && echo 'ref: refs/heads/main' > HEAD && echo done`, bypass)
	if r.stdout != "done\n" || !strings.Contains(r.stderr, "refused to create "+e.path("evil/HEAD")) {
		t.Errorf("second run: %s %s", r.stdout, r.stderr)
	}
	assertAbsent(t, e.path("evil/HEAD"))
	// A hooks/ that is a link: its target is protected.
	os.RemoveAll(e.path(".git/hooks"))
	if err := os.Symlink("../scripts/hooks", e.path(".git/hooks")); err != nil {
		t.Fatal(err)
	}
	gitOn(t, e.ws, "config", "--unset", "core.hooksPath")
	r = e.sh(fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\n' > scripts/hooks/pre-commit; chmod +x scripts/hooks/pre-commit`, marker), bypass)
	assertAbsent(t, e.path("scripts/hooks/pre-commit"))
	gitOn(t, e.ws, "status")
	gitOn(t, e.ws, "commit", "-q", "--allow-empty", "-m", "host")
	assertAbsent(t, marker)
}

// TestAttackNestedGitSettings: the files git settings name stay unchanged
// wherever the settings live: a repository nested in the workspace, a
// submodule (its config in .git/modules), the user's ~/.gitconfig, the
// sixth file of an include chain, and a script handed to an interpreter
// (sh tools/x.sh). Before, each was written and the host's git ran it.
func TestAttackNestedGitSettings(t *testing.T) {
	e := newEnv(t)
	e.newRepo()
	sub := filepath.Join(t.TempDir(), "subsrc")
	gitOn(t, filepath.Dir(sub), "init", "-q", sub)
	gitOn(t, sub, "commit", "-q", "--allow-empty", "-m", "s")
	gitOn(t, e.ws, "-c", "protocol.file.allow=always", "submodule", "-q", "add", sub, "sub")
	gitOn(t, e.ws, "-C", "sub", "config", "core.hooksPath", "h")
	gitOn(t, e.ws, "init", "-q", "vend")
	gitOn(t, e.ws, "-C", "vend", "config", "core.hooksPath", "hooks")
	gitOn(t, e.ws, "-C", "vend", "config", "alias.y", `!sh "tools/y.sh"`)
	gitOn(t, e.ws, "config", "core.fsmonitor", "sh tools/fsm.sh")
	for i := 1; i <= 6; i++ {
		e.write(fmt.Sprintf("inc%d.cfg", i), fmt.Sprintf("[include]\n\tpath = inc%d.cfg\n", i+1))
	}
	gitOn(t, e.ws, "config", "include.path", "../inc1.cfg")
	e.write("tools/fsm.sh", "exit 1\n")
	e.write("tools/q.sh", "exit 0\n")
	os.WriteFile(filepath.Join(e.home, ".gitconfig"), []byte("[alias]\n\tq = !"+e.path("tools/q.sh")+"\n"), 0o644)
	r := e.sh(`mkdir -p sub/h vend/hooks vend/tools
for f in sub/h/pre-commit vend/hooks/pre-commit vend/tools/y.sh tools/fsm.sh tools/q.sh; do echo 'touch PWNED' > $f; done
echo '[alias] p = !touch PWNED' >> inc6.cfg
echo kept > vend/notes.txt
echo done`, bypass)
	if r.stdout != "done\n" {
		t.Fatalf("the command failed inside: %s %s", r.stdout, r.stderr)
	}
	for _, p := range []string{"sub/h/pre-commit", "vend/hooks/pre-commit", "vend/tools/y.sh", "tools/fsm.sh", "tools/q.sh", "inc6.cfg"} {
		// A new hooks folder is refused whole, by its own name.
		if !strings.Contains(r.stderr, e.path(p)+" ") && !strings.Contains(r.stderr, e.path(filepath.Dir(p))+" ") {
			t.Errorf("%s: no refusal named on stderr", p)
		}
		if b, _ := os.ReadFile(e.path(p)); strings.Contains(string(b), "PWNED") {
			t.Errorf("%s reached the host", p)
		}
	}
	assertContent(t, e.path("vend/notes.txt"), "kept\n")
}

// Renaming an ancestor does not move the protection: the check is made on
// the final tree, by path.
func TestAttackRenamedAncestor(t *testing.T) {
	e := newEnv(t)
	e.write("app/.vscode/settings.json", "mine")
	e.write("app/main.go", "package main")
	e.write("conf/prod.yaml", "prod")
	r := e.sh(`mv app app.orig; mkdir -p app/.vscode; echo '{"tasks":[{"runOptions":{"runOn":"folderOpen"}}]}' > app/.vscode/tasks.json
mv conf conf.orig; mkdir -p conf; echo evil > conf/prod.yaml; true`, bypass, "--deny-write", "conf/prod.yaml")
	assertAbsent(t, e.path("app/.vscode/tasks.json"))
	assertContent(t, e.path("app/.vscode/settings.json"), "mine")
	assertContent(t, e.path("conf/prod.yaml"), "prod")
	if !strings.Contains(r.stderr, "refused") {
		t.Errorf("no refusal named: %s", r.stderr)
	}
}

// A tree deeper than PATH_MAX neither breaks the merge nor hides a
// protected file, and the next run works.
func TestAttackDeepPath(t *testing.T) {
	e := newEnv(t)
	r := e.sh(`d=$(printf 'd%.0s' $(seq 200)); for i in $(seq 30); do mkdir $d && cd $d || exit 1; done; echo evil > .bashrc; echo deep > f; echo ok`, bypass)
	if !strings.Contains(r.stdout, "ok") || !strings.Contains(r.stderr, "refused to create") || r.code != 0 {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	// Read back from the host with relative steps (no path that long can
	// be named at once).
	check := exec.Command("bash", "-c", `d=$(printf 'd%.0s' $(seq 200)); for i in $(seq 30); do cd $d || exit 1; done; cat f; ls -A`)
	check.Dir = e.ws
	if out, err := check.CombinedOutput(); err != nil || string(out) != "deep\nf\n" {
		t.Errorf("the deep tree on the host: %v %q", err, out)
	}
	if r := e.sh("echo next > next.txt"); r.code != 0 {
		t.Errorf("the next run fails: %s", r.stderr)
	}
	assertContent(t, e.path("next.txt"), "next\n")
}

// sbx's state and settings cannot be written from inside, whatever
// allowWrite says; the state directory is not even visible.
func TestAttackStateAndSettings(t *testing.T) {
	e := newEnv(t)
	for _, d := range []string{".local/state/sbx/quarantine", ".config"} {
		os.MkdirAll(filepath.Join(e.home, d), 0o755)
	}
	state := filepath.Join(e.home, ".local/state/sbx")
	r := e.sh(fmt.Sprintf(`ls %[1]s/quarantine && echo VISIBLE
mkdir -p %[1]s/quarantine/x && ln -s %[2]s/.bashrc %[1]s/quarantine/x/link
mkdir -p %[2]s/.config/sbx && echo '{"sandbox":{"filesystem":{"allowWrite":["/etc"]}}}' > %[2]s/.config/sbx/settings.json
mkdir -p %[2]s/.claude && echo '{}' > %[2]s/.claude/settings.json; true`, state, e.home),
		bypass, "--allow-write", filepath.Join(e.home, ".local"), "--allow-write", filepath.Join(e.home, ".config"), "--allow-write", filepath.Join(e.home, ".claude"))
	if strings.Contains(r.stdout, "VISIBLE") {
		t.Errorf("the state directory is visible inside")
	}
	assertAbsent(t, filepath.Join(e.home, ".config/sbx"))
	assertAbsent(t, filepath.Join(e.home, ".claude/settings.json"))
	assertAbsent(t, filepath.Join(state, "quarantine/x"))
	pol := e.sbx("run", "--print-policy", "--", "true")
	if strings.Contains(pol.stdout, `"/etc"`) {
		t.Errorf("the next run's policy has /etc writable:\n%s", pol.stdout)
	}
}

// / is never a workspace; the home directory only with --home-workspace,
// and its persistence files stay protected.
func TestWorkspaceRootAndHome(t *testing.T) {
	e := newEnv(t)
	for _, dir := range []string{"/", e.home, filepath.Dir(e.home)} {
		cmd := exec.Command(sbxBin, "run", "--", "true")
		cmd.Dir, cmd.Env = dir, e.environ()
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(string(out), "writable root") {
			t.Errorf("workspace %s: %v %s", dir, err, out)
		}
	}
	cmd := exec.Command(sbxBin, "run", "--home-workspace", bypass, "-c", "echo x > notes.txt; mkdir -p .ssh .config/autostart; echo k > .ssh/authorized_keys; echo a > .config/autostart/a.desktop; echo evil >> .bashrc; mkdir -p bin go/bin && echo evil > bin/ls && echo evil > go/bin/gopls; true")
	cmd.Dir, cmd.Env = e.home, e.environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("--home-workspace: %v %s", err, out)
	}
	// sbx's own files in its state directory (in the home) are not the
	// command's writes: nothing of them is refused. Before, the helper's
	// status file landed in the home's overlay, refused on every run.
	if strings.Contains(string(out), "refused to create "+filepath.Join(e.home, ".local/state/sbx")) {
		t.Errorf("sbx's own state taken for the command's writes: %s", out)
	}
	assertContent(t, filepath.Join(e.home, "notes.txt"), "x\n")
	for _, p := range []string{".ssh/authorized_keys", ".config/autostart/a.desktop", ".bashrc", "bin/ls", "go/bin/gopls"} {
		assertAbsent(t, filepath.Join(e.home, p))
	}
}

// Dotfiles kept in the workspace and linked from the home (~/.bashrc ->
// dotfiles/bashrc) are protected at their targets, as the home's own
// files are: the merge refuses the change, the host file is unchanged.
func TestHomeLinkedDotfilesStayProtected(t *testing.T) {
	e := newEnv(t)
	e.write("bashrc", "# mine\n")
	e.write("config/git/config", "[user]\n")
	for link, target := range map[string]string{".bashrc": e.path("bashrc"), ".config": e.path("config")} {
		if err := os.Symlink(target, filepath.Join(e.home, link)); err != nil {
			t.Fatal(err)
		}
	}
	r := e.sh(`echo evil >> bashrc; printf '[core]\n\tpager = evil\n' >> config/git/config; echo ok > notes; echo done`)
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	assertContent(t, e.path("bashrc"), "# mine\n")
	assertContent(t, e.path("config/git/config"), "[user]\n")
	assertContent(t, e.path("notes"), "ok\n")
	for _, p := range []string{"bashrc", "config/git/config"} {
		if !strings.Contains(r.stderr, "refused to change "+e.path(p)) {
			t.Errorf("no refusal named for %s: %s", p, r.stderr)
		}
	}
}

// Nothing of sbx's appears in the workspace: git sees a clean tree inside
// and on the host during a run, and a commit inside holds exactly what the
// command wrote.
func TestNothingOfSbxShows(t *testing.T) {
	e := newEnv(t)
	e.newRepo()
	cmd := e.startReady(nil, "run", "-c", `git status --porcelain; echo ready; sleep 1`)
	if got := gitOn(t, e.ws, "status", "--porcelain"); got != "" {
		t.Errorf("git status on the host during a run: %q", got)
	}
	cmd.Wait()
	r := e.sh(`git status --porcelain; echo one > one.txt; git add -A && git -c user.name=a -c user.email=a@b commit -qm two && git show --name-only --format= HEAD`)
	if r.code != 0 || r.stdout != "one.txt\n" {
		t.Errorf("inside: exit %d, stdout %q (want only one.txt), stderr %s", r.code, r.stdout, r.stderr)
	}
	if got := gitOn(t, e.ws, "show", "--name-only", "--format=", "HEAD"); got != "one.txt\n" {
		t.Errorf("the commit on the host holds %q", got)
	}
	if got := gitOn(t, e.ws, "status", "--porcelain"); got != "" {
		t.Errorf("git status on the host after: %q", got)
	}
}

// Writing next to a workspace in /tmp fails inside instead of landing in
// the private /tmp and vanishing.
func TestWriteOutsideFailsInside(t *testing.T) {
	e := newEnv(t) // the workspace is /tmp/<test>/<n>/ws
	r := e.sh(`echo x > ../y`)
	if r.code == 0 || !strings.Contains(r.stderr, "Read-only file system") {
		t.Errorf("a write next to the workspace: exit %d, stderr %s", r.code, r.stderr)
	}
	assertAbsent(t, filepath.Join(filepath.Dir(e.ws), "y"))
}

// Everyday git: commit, a branch tracking a remote, a new remote, a clone.
func TestGitEverydayOps(t *testing.T) {
	e := newEnv(t)
	origin := filepath.Join(filepath.Dir(e.ws), "origin.git")
	gitOn(t, filepath.Dir(e.ws), "init", "-q", "--bare", "-b", "main", origin)
	e.newRepo()
	gitOn(t, e.ws, "remote", "add", "origin", origin)
	gitOn(t, e.ws, "push", "-q", "origin", "main")
	gitOn(t, e.ws, "fetch", "-q", "origin")
	r := e.sh(`set -e
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b
git checkout -q -b feat origin/main
echo f > f.txt && git add f.txt && git commit -qm feat
git remote add up https://example.invalid/up.git
git clone -q "`+origin+`" sub/clone
echo done`, bypass)
	if r.stdout != "done\n" {
		t.Fatalf("git inside: %s %s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "refused") || strings.Contains(r.stderr, "conflict") {
		t.Errorf("everyday git had changes refused: %s", r.stderr)
	}
	if got := strings.TrimSpace(gitOn(t, e.ws, "config", "branch.feat.merge")); got != "refs/heads/main" {
		t.Errorf("tracking not saved: %q", got)
	}
	if got := strings.TrimSpace(gitOn(t, e.ws, "config", "remote.up.url")); got != "https://example.invalid/up.git" {
		t.Errorf("remote add not saved: %q", got)
	}
	if got := gitOn(t, e.ws, "log", "--format=%s", "-1", "feat"); got != "feat\n" {
		t.Errorf("commit not on the host: %q", got)
	}
	if got := gitOn(t, e.path("sub/clone"), "log", "--format=%s", "-1"); got != "first\n" {
		t.Errorf("clone not usable on the host: %q", got)
	}
	if got := gitOn(t, e.ws, "status", "--porcelain"); got != "?? sub/\n" {
		t.Errorf("git status on the host: %q", got)
	}
}

// --discard runs the command and lists what it would have changed.
func TestDiscard(t *testing.T) {
	e := newEnv(t)
	e.write("b", "keep")
	if r := e.sh(`mkdir -p "$XDG_CACHE_HOME" && echo cached > "$XDG_CACHE_HOME/earlier"`); r.code != 0 {
		t.Fatalf("a run writing its cache: %d %s", r.code, r.stderr)
	}
	r := e.sh(`echo x > a; rm b; echo evil > .bashrc; cat "$XDG_CACHE_HOME/earlier"; echo y > "$XDG_CACHE_HOME/from-discard"`, "--discard", bypass)
	if r.code != 0 || r.stdout != "cached\n" {
		t.Fatalf("exit %d, stdout %q: %s", r.code, r.stdout, r.stderr)
	}
	assertAbsent(t, e.path("a"))
	assertContent(t, e.path("b"), "keep")
	// The toolchain cache, written directly by other runs, is staged and
	// thrown away too.
	caches, _ := filepath.Glob(filepath.Join(e.home, ".cache/sbx/projects/*/xdg"))
	if len(caches) != 1 {
		t.Fatalf("toolchain caches %q, want one", caches)
	}
	assertAbsent(t, filepath.Join(caches[0], "from-discard"))
	assertContent(t, filepath.Join(caches[0], "earlier"), "cached\n")
	for _, want := range []string{"would create " + e.path("a"), "would delete " + e.path("b"), "refused to create " + e.path(".bashrc"), "nothing was applied"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	call := `{"type":"tool_use","id":"toolu_d","name":"Bash","input":{"command":"echo x > a"}}`
	tr := e.tool(call, "--discard", bypass)
	assertAbsent(t, e.path("a"))
	if !strings.Contains(tr.stdout, "would create") {
		t.Errorf("tool_result lacks the discarded change: %s", tr.stdout)
	}
}

// Refused changes are named in the tool_result and the audit log.
func TestRefusalsReported(t *testing.T) {
	e := newEnv(t)
	audit := filepath.Join(e.home, "audit.jsonl")
	call := `{"type":"tool_use","id":"toolu_r","name":"Bash","input":{"command":"echo evil > .envrc; echo ok"}}`
	r := e.tool(call, bypass, "--audit", audit)
	var res struct {
		Content string `json:"content"`
		IsError bool   `json:"is_error"`
	}
	json.Unmarshal([]byte(r.stdout), &res)
	if !strings.Contains(res.Content, "refused to create "+e.path(".envrc")) || !strings.Contains(res.Content, "saved at") {
		t.Errorf("tool_result: %s", r.stdout)
	}
	data, _ := os.ReadFile(audit)
	if !strings.Contains(string(data), `"event":"write-refused"`) || !strings.Contains(string(data), e.path(".envrc")) {
		t.Errorf("audit log: %s", data)
	}
	assertAbsent(t, e.path(".envrc"))
}

// Runs in one workspace at once: each sees its own writes; a file both
// change is a conflict for the one that merges second (host version kept,
// its own saved and named); nothing is lost, every run starts.
func TestConcurrentRunsOneWorkspace(t *testing.T) {
	e := newEnv(t)
	rounds := 10
	if n, err := strconv.Atoi(os.Getenv("SBX_TEST_ROUNDS")); err == nil {
		rounds = n
	}
	const width = 8
	for round := range rounds {
		var wg sync.WaitGroup
		results := make([]result, width)
		for i := range width {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = e.sh(fmt.Sprintf(`echo %[1]d-%[2]d > own-%[1]d-%[2]d; echo %[1]d-%[2]d > shared; sleep 0.1; cat own-%[1]d-%[2]d shared`, round, i))
			}()
		}
		wg.Wait()
		applied := 0
		for i, r := range results {
			id := fmt.Sprintf("%d-%d", round, i)
			if r.stdout != id+"\n"+id+"\n" {
				t.Fatalf("run %s did not see its own writes (exit %d): %q %s", id, r.code, r.stdout, r.stderr)
			}
			assertContent(t, e.path("own-"+id), id+"\n")
			switch r.code {
			case 0:
				applied++
			case 122:
				saved := savedPath(r.stderr)
				if saved == "" {
					t.Fatalf("run %s: exit 122 without a saved version named: %s", id, r.stderr)
				}
				assertContent(t, saved, id+"\n")
			default:
				t.Fatalf("run %s: exit %d: %s", id, r.code, r.stderr)
			}
		}
		if applied == 0 {
			t.Errorf("round %d: no run's shared file was applied", round)
		}
	}
	runs, _ := os.ReadDir(filepath.Join(e.home, ".local/state/sbx/runs"))
	if len(runs) != 0 {
		t.Errorf("run directories left: %d", len(runs))
	}
}

// savedPath finds "saved at PATH" in a conflict line.
func savedPath(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if i := strings.Index(l, "the command's is saved at "); strings.Contains(l, "conflict") && i >= 0 {
			return strings.TrimSpace(l[i+len("the command's is saved at "):])
		}
	}
	return ""
}

// pausedHelper waits until the merge of cmd's run (started with
// SBX_TEST_MERGE_PAUSE) has paused, and returns its helper's pid.
func pausedHelper(t *testing.T, state string, cmd *exec.Cmd) int {
	t.Helper()
	var paused []string
	if !waitFor(20*time.Second, func() bool {
		paused, _ = filepath.Glob(filepath.Join(state, "runs/*/paused"))
		return len(paused) == 1
	}) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the merge never paused")
	}
	var h struct{ PID int }
	if err := readJSONFile(filepath.Join(filepath.Dir(paused[0]), "helper.json"), &h); err != nil || h.PID <= 0 {
		t.Fatalf("helper record: %v", err)
	}
	return h.PID
}

// The helper killed in the middle of its merge: the next sbx doctor
// --clean completes it; no temporary is left, nothing is lost.
func TestMergeKilledMidway(t *testing.T) {
	for _, pause := range []int{1, 4, 9} {
		e := newEnv(t)
		e.write("old.txt", "old")
		state := filepath.Join(e.home, ".local/state/sbx")
		cmd := exec.Command(sbxBin, "run", "-c", `for i in $(seq 10); do echo $i > f$i; done; rm old.txt`)
		cmd.Dir, cmd.Env = e.ws, append(e.environ(), "SBX_TEST_MERGE_PAUSE="+strconv.Itoa(pause))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		syscall.Kill(pausedHelper(t, state, cmd), syscall.SIGKILL)
		cmd.Process.Kill()
		cmd.Wait()
		r := e.sbx("doctor", "--clean", "--json")
		if r.code != 0 {
			t.Fatalf("pause %d: doctor --clean: exit %d: %s %s", pause, r.code, r.stdout, r.stderr)
		}
		for i := 1; i <= 10; i++ {
			assertContent(t, e.path(fmt.Sprintf("f%d", i)), fmt.Sprintf("%d\n", i))
		}
		assertAbsent(t, e.path("old.txt"))
		for _, n := range listing(t, e.ws) {
			if strings.HasPrefix(filepath.Base(n), ".sbx-") {
				t.Errorf("pause %d: left on the host: %s", pause, n)
			}
		}
		if runs, _ := os.ReadDir(filepath.Join(state, "runs")); len(runs) != 0 {
			t.Errorf("pause %d: run directories left", pause)
		}
	}
}

// TestNextRunWaitsForAnOrphanMerge: sbx killed while its helper merges
// (the helper goes on alone): the next run waits for that merge before it
// starts, and so sees all of it, said in a warning. Before, it started on
// the half-merged workspace with no word.
func TestNextRunWaitsForAnOrphanMerge(t *testing.T) {
	e := newEnv(t)
	state := filepath.Join(e.home, ".local/state/sbx")
	cmd := exec.Command(sbxBin, "run", "-c", `for i in $(seq 10); do echo $i > f$i; done`)
	cmd.Dir, cmd.Env = e.ws, append(e.environ(), "SBX_TEST_MERGE_PAUSE=3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	helper := pausedHelper(t, state, cmd)
	cmd.Process.Kill() // sbx only: the helper stays, paused mid-merge
	cmd.Wait()
	go func() {
		time.Sleep(500 * time.Millisecond)
		syscall.Kill(helper, syscall.SIGKILL) // the merge ends (the next run completes it)
	}()
	r := e.sh("ls f* | wc -l")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "10" {
		t.Fatalf("the next run saw %q files (exit %d), want all 10: %s", r.stdout, r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "an earlier run was killed") {
		t.Errorf("no word of the earlier run: %q", r.stderr)
	}
}

func readJSONFile(p string, v any) error {
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// mountTmpfs mounts a tmpfs of size bytes at dir for the rest of the test
// (it needs root; in CI its absence fails).
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	if os.Geteuid() != 0 {
		if inCI() {
			t.Fatal("this test mounts file systems: run it as root")
		}
		t.Skip("needs root to mount a small tmpfs")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("mount tmpfs at %s: %v", dir, err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// A double fault: the workspace is full and the state directory is too
// small to save everything aside. What could be saved is saved whole,
// what could not is named as lost, the run exits 122, and no truncated
// copy stands anywhere.
func TestDoubleFaultNothingLostSilently(t *testing.T) {
	e := newEnv(t)
	mountTmpfs(t, e.ws, 1<<20)
	mountTmpfs(t, filepath.Join(e.home, ".local/state"), 1<<20)
	if err := os.WriteFile(e.path("filler"), make([]byte, 1<<20-64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.sh(`head -c 2000000 /dev/zero > big; head -c 300000 /dev/zero > small`, "--max-disk", "16M", bypass)
	if r.code != 122 {
		t.Fatalf("exit %d, want 122 (changes not applied):\n%s", r.code, r.stderr)
	}
	if st, err := os.Stat(e.path("big")); err == nil {
		t.Errorf("a %d-byte big stands in the workspace", st.Size())
	}
	if !strings.Contains(r.stderr, e.path("big")) || !strings.Contains(strings.ToLower(r.stderr), "lost") {
		t.Errorf("stderr does not name big as lost:\n%s", r.stderr)
	}
	state := filepath.Join(e.home, ".local/state/sbx")
	sizes := map[string]int64{"big": 2000000, "small": 300000}
	filepath.Walk(state, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && sizes[fi.Name()] != 0 && fi.Size() != sizes[fi.Name()] {
			t.Errorf("truncated copy saved: %s (%d bytes)", p, fi.Size())
		}
		return nil
	})
	if st, err := os.Stat(e.path("small")); err == nil && st.Size() != 300000 {
		t.Errorf("truncated small in the workspace: %d bytes", st.Size())
	} else if err != nil && !strings.Contains(r.stderr, "not applied: "+e.path("small")) {
		t.Errorf("small is neither applied nor named as not applied:\n%s", r.stderr)
	}
}

// A second link in a chain (lnk -> cur/real, cur -> v1) and a directory
// passed by ".." (lnk2 -> sub/../real2) are on a protected path's way too:
// re-pointing cur or putting a link at sub would move a denyRead, a
// denyWrite or a linked ~/.profile to other files, and each is refused;
// the next run still hides the secret.
func TestLinkChainsCannotBeMoved(t *testing.T) {
	e := newEnv(t)
	e.write("v1/real/secret/key", "TOPSECRET-CHAIN")
	e.write("real2/file", "orig")
	e.write("dot/v1/profile", "# mine\n")
	e.mkdir("sub")
	for link, target := range map[string]string{e.path("cur"): "v1", e.path("lnk"): "cur/real", e.path("lnk2"): "sub/../real2",
		e.path("dot/cur"): "v1", filepath.Join(e.home, ".profile"): e.path("dot/cur/profile")} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	flags := []string{"--deny-read", "./lnk/secret", "--deny-write", "./lnk2/file"}
	r := e.sh(`rm cur; mkdir -p v2/real; ln -s v2 cur
rmdir sub; mkdir -p o/x; echo evil > o/file; ln -s o/x sub
rm dot/cur; mkdir dot/v2; echo evil > dot/v2/profile; ln -s v2 dot/cur; echo done`, flags...)
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for p, rule := range map[string]string{"cur": "denyRead", "sub": "denyWrite", "dot/cur": "home"} {
		if !strings.Contains(r.stderr, "refused to change "+e.path(p)+" ("+rule) {
			t.Errorf("the change of %s was not refused (%s): %s", p, rule, r.stderr)
		}
	}
	for link, want := range map[string]string{"cur": "v1", "dot/cur": "v1"} {
		if got, err := os.Readlink(e.path(link)); err != nil || got != want {
			t.Errorf("%s on the host now points to %q (%v), want %s", link, got, err, want)
		}
	}
	if fi, err := os.Lstat(e.path("sub")); err != nil || !fi.IsDir() {
		t.Errorf("sub on the host is no longer the directory: %v %v", fi, err)
	}
	assertContent(t, filepath.Join(e.home, ".profile"), "# mine\n")
	r = e.sh(`grep -r TOPSECRET . ; echo evil >> lnk2/file; echo started`, flags...)
	if strings.Contains(r.stdout, "TOPSECRET") || !strings.Contains(r.stdout, "started") {
		t.Errorf("next run: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	assertContent(t, e.path("real2/file"), "orig")
}

// allowRead and allowWrite paths keep their way too: a run that turns an
// allowRead directory into a link to a denied secret, or re-points an
// allowWrite link, is refused, and the next run neither reads the secret
// nor writes outside; a file where a deny path needs a directory is
// refused (the next run starts); a persistence path that does not exist
// yet under a linked home directory stays unwritten.
func TestRulePathsCannotBeMoved(t *testing.T) {
	e := newEnv(t)
	e.write("v1/real/secret/key", "TOPSECRET-WAY")
	e.mkdir("pubdir")
	e.mkdir("cfg")
	outside := t.TempDir()
	for _, d := range []string{"t1", "t2"} {
		os.MkdirAll(filepath.Join(outside, d), 0o755)
	}
	for link, target := range map[string]string{e.path("out"): filepath.Join(outside, "t1"), filepath.Join(e.home, ".config"): e.path("cfg")} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	flags := []string{"--deny-read", "./v1/real/secret", "--deny-read", "./secrets/prod.key", "--allow-read", "./pubdir", "--allow-write", "./out"}
	r := e.sh(`rmdir pubdir; ln -s v1/real/secret pubdir; rm out; ln -s `+filepath.Join(outside, "t2")+` out; echo x > secrets
mkdir -p cfg/systemd/user cfg/git; echo evil > cfg/systemd/user/x.service; echo evil > cfg/git/config; echo done`, flags...)
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// cfg/systemd and cfg/git are refused where they are made.
	for p, rule := range map[string]string{"pubdir": "allowRead", "out": "allowWrite", "secrets": "denyRead", "cfg/systemd": "home", "cfg/git": "home"} {
		if !strings.Contains(r.stderr, e.path(p)+" ("+rule) {
			t.Errorf("the change of %s was not refused (%s): %s", p, rule, r.stderr)
		}
	}
	assertAbsent(t, e.path("cfg/systemd/user/x.service"))
	assertAbsent(t, e.path("cfg/git/config"))
	r = e.sh(`cat pubdir/key v1/real/secret/key; echo evil > out/f; echo started`, flags...)
	if strings.Contains(r.stdout, "TOPSECRET") || !strings.Contains(r.stdout, "started") {
		t.Errorf("next run: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	assertAbsent(t, filepath.Join(outside, "t2", "f"))
	assertContent(t, filepath.Join(outside, "t1", "f"), "evil\n")
}

// Settings kept in a dotfiles workspace and linked (a --settings file that
// is a link, ~/.config/sbx/settings.json and ~/.claude/settings.json links
// into it) cannot be changed or re-pointed from a sandbox: the next run
// still hides the secret and runs no hook the sandbox wrote. Links inside
// ~/.ssh and a dangling ~/.profile into the workspace are followed too.
func TestLinkedSettingsAndDotfilesStay(t *testing.T) {
	e := newEnv(t)
	e.write("secret.txt", "TOPSECRET-SETTINGS")
	e.write("conf/real.json", `{"sandbox":{"filesystem":{"denyRead":["./secret.txt"]}}}`)
	e.write("dot/sbx.json", `{}`)
	e.write("dot/claude.json", `{}`)
	e.write("dot/ak", "ssh-ed25519 mine\n")
	os.MkdirAll(filepath.Join(e.home, ".config", "sbx"), 0o755)
	os.MkdirAll(filepath.Join(e.home, ".claude"), 0o755)
	os.MkdirAll(filepath.Join(e.home, ".ssh"), 0o700)
	for link, target := range map[string]string{e.path("s.json"): "conf/real.json", filepath.Join(e.home, ".config/sbx/settings.json"): e.path("dot/sbx.json"),
		filepath.Join(e.home, ".claude/settings.json"): e.path("dot/claude.json"), filepath.Join(e.home, ".ssh/authorized_keys"): e.path("dot/ak"),
		filepath.Join(e.home, ".profile"): e.path("nd/profile")} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	hook := `{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"touch ` + e.path("HOOK_RAN") + `"}]}]}}`
	r := e.sh(`echo '{}' > conf/other.json; ln -sfn conf/other.json s.json; echo '`+hook+`' > dot/sbx.json; echo '`+hook+`' > dot/claude.json
echo evil >> dot/ak; mkdir nd; echo evil > nd/profile; echo done`, "--settings", "s.json")
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, p := range []string{"s.json", "dot/sbx.json", "dot/claude.json", "dot/ak", "nd/profile"} {
		if !strings.Contains(r.stderr, "refused to ") || !strings.Contains(r.stderr, e.path(p)+" (") {
			t.Errorf("the change of %s was not refused: %s", p, r.stderr)
		}
	}
	assertContent(t, e.path("dot/ak"), "ssh-ed25519 mine\n")
	assertAbsent(t, e.path("nd/profile"))
	r = e.sh(`cat secret.txt; echo started`, "--settings", "s.json")
	if strings.Contains(r.stdout, "TOPSECRET") || !strings.Contains(r.stdout, "started") {
		t.Errorf("next run: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	assertAbsent(t, e.path("HOOK_RAN"))
}

// A ~/.local that is a symbolic link (to another disk) holds sbx's state
// directory through the link: the sandbox still starts, and hides it.
func TestStateDirThroughALink(t *testing.T) {
	e := newEnv(t)
	disk := filepath.Join(t.TempDir(), "local")
	local := filepath.Join(e.home, ".local")
	os.MkdirAll(local, 0o755)
	if err := os.Rename(local, disk); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(disk, local); err != nil {
		t.Fatal(err)
	}
	r := e.sh(`ls -A ~/.local/state/sbx | wc -l; echo started`)
	if r.code != 0 || r.stdout != "0\nstarted\n" {
		t.Errorf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}

// The helper killed during its merge, sbx alive: sbx says the command ran
// and its merge was cut short, finishes the merge itself at once, and
// exits with the command's status; nothing is left for a later run to
// report again. Before, sbx failed the run and left the rest to the next
// run, which reported the same writes a second time.
func TestHelperKilledMidMergeIsFinished(t *testing.T) {
	e := newEnv(t)
	state := filepath.Join(e.home, ".local/state/sbx")
	cmd := exec.Command(sbxBin, "run", "-c", `for i in $(seq 5); do echo $i > f$i; done; exit 3`)
	cmd.Dir, cmd.Env = e.ws, append(e.environ(), "SBX_TEST_MERGE_PAUSE=2")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pausedHelper(t, state, cmd), syscall.SIGKILL)
	code := 0
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	msg := stderr.String()
	if !strings.Contains(msg, "the transaction helper died before its merge was complete; sbx finished the merge") || strings.Contains(msg, "nothing was run") {
		t.Errorf("stderr: %s", msg)
	}
	if code != 3 {
		t.Errorf("exit %d, want the command's 3; stderr %s", code, msg)
	}
	for i := 1; i <= 5; i++ {
		assertContent(t, e.path(fmt.Sprintf("f%d", i)), fmt.Sprintf("%d\n", i))
	}
	if runs := listing(t, filepath.Join(state, "runs")); len(runs) != 0 {
		t.Errorf("run directories left: %v", runs)
	}
	if r := e.sh("true"); strings.Contains(r.stderr, "earlier run") {
		t.Errorf("the next run reported the run again: %s", r.stderr)
	}
}

// The command renames a file while the host writes another in the same
// directory (an editor's swap file): the rename is applied, no conflict.
func TestRenameBesideHostWrite(t *testing.T) {
	e := newEnv(t)
	e.write("a", "A\n")
	cmd := e.startReady(nil, "run", "-c", "mv a b; echo ready; sleep 1")
	e.write(".a.swp", "vim\n")
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v", err)
	}
	assertAbsent(t, e.path("a"))
	assertContent(t, e.path("b"), "A\n")
	assertContent(t, e.path(".a.swp"), "vim\n")
}

// killMidMerge runs sbx with args in the workspace, its merge paused after
// the third change, and kills sbx and then its helper: the run is left
// half merged for a later run to finish.
func (e *env) killMidMerge(state string, args ...string) {
	e.t.Helper()
	cmd := exec.Command(sbxBin, args...)
	cmd.Dir, cmd.Env = e.ws, append(e.environ(), "SBX_TEST_MERGE_PAUSE=3")
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	helper := pausedHelper(e.t, state, cmd)
	// sbx first: a live sbx whose helper died finishes the merge itself.
	cmd.Process.Kill()
	cmd.Wait()
	syscall.Kill(helper, syscall.SIGKILL)
}

// TestWarmCallAfterAKilledRun: a run killed mid-merge while a serve
// session's next sandbox waited: the session's next call finishes that
// merge first and sees all of it. Before, the call took the warm sandbox
// and ran on the half-merged workspace (3 of 10 files), with no word.
func TestWarmCallAfterAKilledRun(t *testing.T) {
	e := newEnv(t)
	state := filepath.Join(e.home, ".local/state/sbx")
	srv := e.startServe()
	fmt.Fprintln(srv.in, `{"type":"tool_use","id":"a","name":"Bash","input":{"command":"true"}}`)
	if !srv.out.Scan() || strings.Contains(srv.out.Text(), `"is_error":true`) {
		t.Fatalf("first call: %q %s", srv.out.Text(), srv.stderr)
	}
	time.Sleep(time.Second) // the next call's sandbox is launched
	e.killMidMerge(state, "run", "-c", `for i in $(seq 10); do echo $i > f$i; done`)
	if n := len(listing(t, e.ws)); n >= 10 {
		t.Fatalf("the killed merge was not half done: %d entries", n)
	}
	fmt.Fprintln(srv.in, `{"type":"tool_use","id":"b","name":"Bash","input":{"command":"ls f* | wc -l"}}`)
	if !srv.out.Scan() || !strings.Contains(srv.out.Text(), `"content":"10`) {
		t.Errorf("the call after the killed run saw %q, want all 10 files; stderr %s", srv.out.Text(), srv.stderr)
	}
}

// TestFinishKilledRunWhoseRootIsGone: sbx and its helper killed mid-merge,
// then one of the run's writable roots removed from the host: finishing
// the run merges the other root whole and saves the gone root's writes
// aside, named. Before, finishing failed ("writable root …: no such file
// or directory") on every later run, for good.
func TestFinishKilledRunWhoseRootIsGone(t *testing.T) {
	e := newEnv(t)
	state := filepath.Join(e.home, ".local/state/sbx")
	extra := filepath.Join(t.TempDir(), "extra")
	if err := os.Mkdir(extra, 0o755); err != nil {
		t.Fatal(err)
	}
	e.killMidMerge(state, "run", "--allow-write", extra, "-c",
		fmt.Sprintf(`echo kept > %q; for i in $(seq 10); do echo $i > f$i; done`, filepath.Join(extra, "x")))
	if err := os.RemoveAll(extra); err != nil {
		t.Fatal(err)
	}
	r := e.sbx("doctor", "--clean", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, "the writable root was removed from the host after the run was killed") {
		t.Fatalf("doctor --clean: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	for i := 1; i <= 10; i++ {
		assertContent(t, e.path(fmt.Sprintf("f%d", i)), fmt.Sprintf("%d\n", i))
	}
	assertAbsent(t, extra)
	saved, _ := filepath.Glob(filepath.Join(state, "conflicts", "*", strings.TrimPrefix(extra, "/"), "x"))
	if len(saved) != 1 {
		t.Fatalf("the gone root's write not saved aside: %v", saved)
	}
	assertContent(t, saved[0], "kept\n")
	if runs, _ := os.ReadDir(filepath.Join(state, "runs")); len(runs) != 0 {
		t.Errorf("run directories left: %v", runs)
	}
}

// A hard link the command makes to .git/config or .bashrc reaches the host
// as a file of its own, never as a second name of the guarded file: an
// agent's editor writing to notes.txt on the host would otherwise rewrite
// the config (core.fsmonitor: code git runs) with no check.
func TestHardLinkToAGuardedFileArrivesAsACopy(t *testing.T) {
	e := newEnv(t)
	e.newRepo()
	e.write(".bashrc", "rc\n")
	r := e.sh(`for n in 1 2 3 4 5 6 7 8; do ln .git/config c$n.txt && ln .bashrc b$n.txt || exit 9; done`, bypass)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	config, err := os.ReadFile(e.path(".git/config"))
	if err != nil {
		t.Fatal(err)
	}
	for _, guarded := range []string{".git/config", ".bashrc"} {
		var st syscall.Stat_t
		if err := syscall.Stat(e.path(guarded), &st); err != nil {
			t.Fatal(err)
		}
		if st.Nlink != 1 {
			t.Errorf("the host's %s has %d names", guarded, st.Nlink)
		}
	}
	for n := 1; n <= 8; n++ {
		assertContent(t, e.path(fmt.Sprintf("c%d.txt", n)), string(config))
		assertContent(t, e.path(fmt.Sprintf("b%d.txt", n)), "rc\n")
	}
}

// Extended attributes the command sets on a new file (user.*, an ACL as
// the file's owner) stay behind: the file arrives as a copy without them.
func TestNewFilesArriveWithoutTheCommandsXattrs(t *testing.T) {
	e := newEnv(t)
	if err := syscall.Setxattr(e.write("probe", "p\n"), "user.probe", []byte("1"), 0); err != nil {
		t.Skipf("no user xattrs on this file system: %v", err) // no way to set one inside either
	}
	// An ACL entry for the command's own uid (the only one mapped inside),
	// in the kernel's xattr form.
	r := e.sh(`echo n > newfile && python3 -c '
import os, struct
os.setxattr("newfile", "user.xdg.origin.url", b"https://x.test/")
e = lambda tag, perm, id=0xffffffff: struct.pack("<HHI", tag, perm, id)
os.setxattr("newfile", "system.posix_acl_access", struct.pack("<I", 2) + e(1, 6) + e(2, 7, os.getuid()) + e(4, 4) + e(0x10, 7) + e(0x20, 4))
'`, bypass)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	assertContent(t, e.path("newfile"), "n\n")
	buf := make([]byte, 1024)
	n, err := syscall.Listxattr(e.path("newfile"), buf)
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		t.Errorf("newfile arrived with extended attributes %q", strings.Split(string(buf[:n]), "\x00"))
	}
}

// A file the command changed (overlayfs copied it up, with an attribute of
// its own) arrives with no attribute: neither overlayfs's nor what the
// command set on it, under user.overlay.* (stored escaped) or elsewhere.
func TestChangedFilesArriveWithoutXattrs(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"plain", "overlaid", "mine"} {
		if err := syscall.Setxattr(e.write(n, "host\n"), "user.probe", []byte("1"), 0); err != nil {
			t.Skipf("no user xattrs on this file system: %v", err)
		}
		syscall.Removexattr(e.path(n), "user.probe")
	}
	r := e.sh(`echo more >> plain && echo more >> overlaid && echo more >> mine && python3 -c '
import os
os.setxattr("overlaid", "user.overlay.whiteout", b"")
os.setxattr("overlaid", "user.overlay.origin", b"x")
os.setxattr("mine", "user.mine", b"1")
'`, bypass)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	buf := make([]byte, 1024)
	for _, n := range []string{"plain", "overlaid", "mine"} {
		assertContent(t, e.path(n), "host\nmore\n")
		k, err := syscall.Listxattr(e.path(n), buf)
		if err != nil || k > 0 {
			t.Errorf("%s arrived with extended attributes %q (%v)", n, buf[:max(k, 0)], err)
		}
	}
}

// A HEAD git accepts though it is not a bare object name ("<40 hex>x":
// git reads the first 40 digits and ignores the rest) makes its directory
// a git directory for sbx too: its hook and its fsmonitor config do not
// arrive (they did, and the host's git status ran the config's program).
func TestHeadWithTrailingTextIsAGitDirectory(t *testing.T) {
	e := newEnv(t)
	e.newRepo()
	r := e.sh(`mkdir -p tools/objects tools/refs/heads tools/hooks
printf '%s\n' "$(git rev-parse HEAD)x" > tools/HEAD
printf '[core]\n\tbare = false\n\tfsmonitor = "touch /tmp/sbx-it-fsmonitor; false"\n' > tools/config
printf '#!/bin/sh\ntouch /tmp/sbx-it-hook\n' > tools/hooks/pre-commit; chmod +x tools/hooks/pre-commit`, bypass)
	if !strings.Contains(r.stderr, "refused") {
		t.Errorf("nothing refused: %s", r.stderr)
	}
	assertAbsent(t, e.path("tools/hooks/pre-commit"))
	if b, err := os.ReadFile(e.path("tools/config")); err == nil && strings.Contains(string(b), "fsmonitor") {
		t.Errorf("tools/config arrived with fsmonitor:\n%s", b)
	}
}

// A repository's HEAD replaced in the sandbox by something that is not a
// file (a socket here) hides nothing from the merge: git on the host still
// reads the host's HEAD, so the hook and the fsmonitor key planted beside
// it are refused (they arrived, and a push ran the hook).
func TestSocketHEADHidesNoRepository(t *testing.T) {
	e := newEnv(t)
	gitOn(t, e.ws, "init", "-q", "--bare", "srv")
	config, err := os.ReadFile(e.path("srv/config"))
	if err != nil {
		t.Fatal(err)
	}
	r := e.sh(`rm srv/HEAD && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("srv/HEAD")'
printf '#!/bin/sh\ntouch /tmp/sbx-it-socket-head\n' > srv/hooks/post-receive; chmod +x srv/hooks/post-receive
printf '[core]\n\tfsmonitor = touch /tmp/sbx-it-socket-fsm\n' >> srv/config`, bypass)
	if !strings.Contains(r.stderr, "refused") {
		t.Errorf("nothing refused: %s", r.stderr)
	}
	assertAbsent(t, e.path("srv/hooks/post-receive"))
	assertContent(t, e.path("srv/config"), string(config))
}

// A directory named like a bare repository is a git directory with no
// HEAD yet: a hook and a program-running config key left in it would go
// live with the host user's `git init --bare b.git`.
func TestBareNamedDirectoryIsAGitDirectory(t *testing.T) {
	e := newEnv(t)
	r := e.sh(`mkdir -p b.git/hooks
printf '#!/bin/sh\ntouch /tmp/sbx-it-bare-hook\n' > b.git/hooks/post-update; chmod +x b.git/hooks/post-update
printf '[core]\n\tfsmonitor = touch /tmp/sbx-it-bare-fsm\n' > b.git/config`, bypass)
	if !strings.Contains(r.stderr, "refused") {
		t.Errorf("nothing refused: %s", r.stderr)
	}
	assertAbsent(t, e.path("b.git/hooks/post-update"))
	assertAbsent(t, e.path("b.git/config"))
}
