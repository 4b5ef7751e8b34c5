//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDiskBudgetStopsAFillLoop(t *testing.T) {
	e := newEnv(t)
	e.write("before.txt", "kept\n")
	before := allocated(e.ws)
	const budget = 4 << 20
	// 64 files of 256 KiB would be 16 MiB; the loop stops at the first
	// failed write.
	r := e.sh(`echo early > early.txt
i=0; while [ $i -lt 64 ]; do head -c 262144 /dev/zero > f$i || break; i=$((i+1)); done; echo "wrote $i"`,
		"--max-disk", "4M")
	added := allocated(e.ws) - before
	// The budget holds file data; on the host each new file and the grown
	// directory may take a few blocks more.
	if added > budget+64<<10 {
		t.Errorf("the run added %d bytes (du), budget %d", added, budget)
	}
	if added < budget/2 {
		t.Errorf("the run added only %d bytes (du): the writes did not reach the host", added)
	}
	assertContent(t, e.path("early.txt"), "early\n")
	assertContent(t, e.path("before.txt"), "kept\n")
	if !strings.Contains(r.stderr, "limit reached: the disk budget is spent (--max-disk 4M)") {
		t.Errorf("stderr does not name the disk limit:\n%s", r.stderr)
	}
	if n, _ := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(r.stdout), "wrote ")); n < 8 || n >= 16 {
		t.Errorf("stdout %q: want between 8 and 15 whole files", r.stdout)
	}
	// /tmp is in the same budget: what it holds is not left for the
	// workspace.
	r = e.sh(`head -c 3145728 /dev/zero > /tmp/t && head -c 2097152 /dev/zero > ws.bin; echo $?`, "--max-disk", "4M")
	if r.stdout == "0\n" {
		t.Errorf("3 MiB in /tmp and 2 MiB in the workspace fit a 4 MiB budget")
	}
	if st, err := os.Stat(e.path("ws.bin")); err != nil || st.Size() > 1<<20+4096 {
		t.Errorf("ws.bin after a 4M budget with 3M in /tmp: %v %v", st, err)
	}
	// Under the budget nothing is reported.
	if r := e.sh(`echo small > small.txt`, "--max-disk", "4M"); r.code != 0 || strings.Contains(r.stderr, "limit") {
		t.Errorf("a small write under --max-disk: exit %d, stderr %q", r.code, r.stderr)
	}
	assertContent(t, e.path("small.txt"), "small\n")
}

func TestDiskBudgetMergesEveryKindOfChange(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("outside\n"), 0o644)
	e.write("mod.txt", "old\n")
	e.write("del.txt", "gone soon\n")
	e.write("deldir/a", "a\n")
	e.write("deldir/sub/b", "b\n")
	e.write("redo/old", "old\n")
	e.write("mvsrc/f", "moved\n")
	e.write("plain.sh", "echo hi\n")
	e.write("same.txt", "same\n")
	if err := os.Symlink(outside, e.path("link")); err != nil {
		t.Fatal(err)
	}
	// A repository whose config and hooks are protected (read-only): a
	// commit in the sandbox must still reach the host.
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", e.ws}, args...)...)
		cmd.Env = append(e.environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	st0, _ := os.Stat(e.path("same.txt"))
	r := e.sh(`set -e
echo new >> mod.txt
rm del.txt
rm -r deldir
rm -r redo; mkdir redo; echo fresh > redo/new
mv mvsrc mvdst
chmod +x plain.sh
rm link; mkdir link; echo inside > link/secret
echo h > h1; ln h1 h2
ln -s mod.txt sl
mkdir -p new/deep; echo deep > new/deep/f
: < same.txt; exec 3>>same.txt; exec 3>&-
git add mod.txt && GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t git commit -q -m in-sandbox
echo done`, "--max-disk", "16M", "--mode", "bypassPermissions")
	if r.code != 0 || r.stdout != "done\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	assertContent(t, e.path("mod.txt"), "old\nnew\n")
	if log := git("log", "--format=%s"); log != "in-sandbox\n" {
		t.Errorf("git log on the host: %q", log)
	}
	assertAbsent(t, e.path("del.txt"))
	assertAbsent(t, e.path("deldir"))
	assertContent(t, e.path("redo/new"), "fresh\n")
	assertAbsent(t, e.path("redo/old"))
	assertAbsent(t, e.path("mvsrc"))
	assertContent(t, e.path("mvdst/f"), "moved\n")
	assertContent(t, e.path("new/deep/f"), "deep\n")
	if st, err := os.Stat(e.path("plain.sh")); err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Errorf("plain.sh mode after chmod +x: %v %v", st, err)
	}
	// The symlink to a directory outside was replaced by a directory: the
	// merge wrote into the new directory, never through the old link.
	assertContent(t, filepath.Join(outside, "secret"), "outside\n")
	if st, err := os.Lstat(e.path("link")); err != nil || !st.IsDir() {
		t.Errorf("link should now be a directory: %v %v", st, err)
	}
	assertContent(t, e.path("link/secret"), "inside\n")
	a, errA := os.Stat(e.path("h1"))
	b, errB := os.Stat(e.path("h2"))
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Errorf("h1 and h2 should be one file: %v %v", errA, errB)
	}
	if tgt, err := os.Readlink(e.path("sl")); err != nil || tgt != "mod.txt" {
		t.Errorf("sl: %q %v", tgt, err)
	}
	// Opened for writing but unchanged: the host file is left alone.
	if st, err := os.Stat(e.path("same.txt")); err != nil || !os.SameFile(st, st0) {
		t.Errorf("same.txt was rewritten although unchanged")
	}
	if strings.Contains(r.stderr, "warning") {
		t.Errorf("unexpected warnings:\n%s", r.stderr)
	}
}

func TestDiskBudgetKeepsProtectionAndDenyWrite(t *testing.T) {
	e := newEnv(t)
	e.write(".bashrc", "original\n")
	e.write("locked/file", "locked\n")
	settings := `{"sandbox":{"filesystem":{"denyWrite":["./locked"]}}}`
	r := e.sh(`echo evil >> .bashrc; echo evil > locked/file; rm -rf locked; mkdir -p sub; echo evil > sub/.bashrc; echo ok > ok.txt; true`,
		"--max-disk", "8M", "--settings", settings, "--mode", "bypassPermissions")
	assertContent(t, e.path(".bashrc"), "original\n")
	assertContent(t, e.path("locked/file"), "locked\n")
	assertContent(t, e.path("ok.txt"), "ok\n")
	// A protected name created deep in the tree is merged, then moved to
	// the quarantine like any other run's.
	assertAbsent(t, e.path("sub/.bashrc"))
	if !strings.Contains(r.stderr, "quarantine") {
		t.Errorf("stderr does not report the quarantine:\n%s", r.stderr)
	}
}

func TestDiskBudgetConflictKeepsBoth(t *testing.T) {
	e := newEnv(t)
	e.write("c.txt", "host\n")
	cmd := exec.Command(sbxBin, "run", "--max-disk", "8M", "-c", `echo sandbox > c.txt; echo ready; read x; echo bye`)
	cmd.Dir, cmd.Env = e.ws, e.environ()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no ready line: %q; stderr %s", sc.Text(), stderr.String())
	}
	// The sandbox's write is not on the host yet.
	assertContent(t, e.path("c.txt"), "host\n")
	time.Sleep(20 * time.Millisecond)
	if err := os.WriteFile(e.path("c.txt"), []byte("host changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdin.Write([]byte("go\n"))
	stdin.Close()
	for sc.Scan() {
	}
	cmd.Wait()
	assertContent(t, e.path("c.txt"), "host changed\n")
	msg := stderr.String()
	i := strings.Index(msg, "the command's is saved at ")
	if i < 0 {
		t.Fatalf("stderr does not report the conflict:\n%s", msg)
	}
	saved := strings.Fields(msg[i+len("the command's is saved at "):])[0]
	if !strings.HasPrefix(saved, filepath.Join(e.home, ".local/state/sbx/conflicts")) {
		t.Errorf("saved at %s, want under the state directory", saved)
	}
	assertContent(t, saved, "sandbox\n")
}

func TestDiskBudgetMergesAfterTimeoutAndKill(t *testing.T) {
	e := newEnv(t)
	r := e.sh(`echo early > early.txt; sleep 30`, "--max-disk", "8M", "--timeout", "1s")
	if r.code != 124 {
		t.Errorf("exit %d, want 124; stderr:\n%s", r.code, r.stderr)
	}
	assertContent(t, e.path("early.txt"), "early\n")

	// sbx killed with SIGKILL: the helper still kills the sandbox and
	// merges what it wrote, and removes the proxy's socket directory
	// (outside the state directory, which the test removes).
	netDirs := func() []string { m, _ := filepath.Glob(filepath.Join(os.TempDir(), "sbx-net-*")); return m }
	netBefore := netDirs()
	const marker = "30.4242"
	cmd := exec.Command(sbxBin, "run", "--max-disk", "8M", "-c", `echo k > killed.txt; echo ready; sleep `+marker)
	cmd.Dir, cmd.Env = e.ws, e.environ()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatal("no ready line")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(e.path("killed.txt")); return err == nil }) {
		t.Fatal("killed.txt never reached the host after sbx was killed")
	}
	assertContent(t, e.path("killed.txt"), "k\n")
	if !waitFor(5*time.Second, func() bool { return len(PidsWith(marker)) == 0 }) {
		ps, _ := exec.Command("ps", "-eo", "pid,ppid,stat,etimes,args").Output()
		t.Errorf("sandboxed processes left: %v\n%s", PidsWith(marker), ps)
	}
	left := func() []string {
		var out []string
		for _, d := range netDirs() {
			if !slices.Contains(netBefore, d) {
				out = append(out, d)
			}
		}
		return out
	}
	if !waitFor(5*time.Second, func() bool { return len(left()) == 0 }) {
		t.Errorf("the killed run's proxy directory is left: %v", left())
	}
}

// An agent's Bash call has a 1 GiB disk budget by default; here a smaller
// one, set in settings, stops a fill loop and the tool_result names it.
func TestToolDiskBudget(t *testing.T) {
	e := newEnv(t)
	call := `{"type":"tool_use","id":"toolu_disk","name":"Bash","input":{"command":"echo early > early.txt; while head -c 1048576 /dev/zero >> fill; do :; done"}}`
	r := e.tool(call, "--mode", "bypassPermissions", "--settings", `{"sandbox":{"limits":{"maxDisk":"2M"}}}`)
	if !strings.Contains(r.stdout, `"tool_use_id":"toolu_disk"`) || !strings.Contains(r.stdout, "limit reached: the disk budget is spent (--max-disk 2M)") {
		t.Errorf("tool_result:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	assertContent(t, e.path("early.txt"), "early\n")
	if st, err := os.Stat(e.path("fill")); err != nil || st.Size() > 2<<20 {
		t.Errorf("fill: %v %v", st, err)
	}
	// The default budget is there without any setting: /tmp is in it.
	call = `{"type":"tool_use","id":"toolu_df","name":"Bash","input":{"command":"df -B1 --output=size /tmp | tail -1"}}`
	r = e.tool(call, "--mode", "bypassPermissions")
	if !strings.Contains(r.stdout, "1073741824") {
		t.Errorf("the default budget should bound /tmp at 1 GiB:\n%s", r.stdout)
	}
}

// A budget that cannot hold what must be staged at the start (here a
// writable file bigger than the budget, copied into it) refuses the run
// when the user set it: nothing runs, nothing changes.
func TestDiskBudgetStrict(t *testing.T) {
	e := newEnv(t)
	logf := filepath.Join(e.home, "big.log")
	if err := os.WriteFile(logf, bytes.Repeat([]byte("x"), 9<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	settings := `{"sandbox":{"filesystem":{"allowWrite":["` + logf + `"]}}}`
	e.write("marker", "")
	r := e.sh(`rm marker`, "--max-disk", "8M", "--settings", settings)
	if r.code != 125 || !strings.Contains(r.stderr, "cannot be made transactional here with the disk budget (--max-disk)") {
		t.Errorf("a user-set budget that cannot hold: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	assertContent(t, e.path("marker"), "")
}

// A sparse file reaches the host as sparse: its holes are not written out
// by the merge (a 2 GiB file of holes under a 64 MiB budget filled the
// host's disk with 2 GiB of zeros).
func TestSparseFileStaysSparse(t *testing.T) {
	e := newEnv(t)
	r := e.sh("truncate -s 2G big && echo end >> big", "--max-disk", "64M")
	if r.code != 0 {
		t.Fatalf("%d %s", r.code, r.stderr)
	}
	fi, err := os.Stat(e.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	if used := fi.Sys().(*syscall.Stat_t).Blocks * 512; fi.Size() != 2<<30+4 || used > 1<<20 {
		t.Errorf("on the host: size %d, %d bytes of disk", fi.Size(), used)
	}
}
