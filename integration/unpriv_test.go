//go:build linux

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUnprivilegedCaller runs sbx as a user other than root (nobody): the
// sandbox, its read-only binds, the disk budget and the rlimit fallback of
// the process limit must work without any privilege on the host.
func TestUnprivilegedCaller(t *testing.T) {
	requireSandbox(t)
	if os.Getuid() != 0 {
		t.Skip("already unprivileged: every other test covers it")
	}
	const nobody = 65534
	root, err := os.MkdirTemp("", "sbx-it-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	bin := filepath.Join(root, "sbx")
	data, err := os.ReadFile(sbxBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	home, ws := filepath.Join(root, "home"), filepath.Join(root, "ws")
	for _, d := range []string{home, ws} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	runIn := func(stdin string, args ...string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Dir = ws
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	run := func(args ...string) (string, int) { return runIn("", args...) }
	if out, code := run("run", "--mode", "bypassPermissions", "-c", `id -u; echo plain > plain.txt; echo evil > .bashrc; mkdir -p d; echo x > d/f; chmod 0311 d`); code != 0 ||
		!strings.HasPrefix(out, "65534\n") || !strings.Contains(out, "refused to create "+filepath.Join(ws, ".bashrc")) {
		t.Errorf("plain run as nobody: exit %d, output:\n%s", code, out)
	}
	os.Chmod(filepath.Join(ws, "d"), 0o755)
	assertContent(t, filepath.Join(ws, "d/f"), "x\n")
	assertContent(t, filepath.Join(ws, "plain.txt"), "plain\n")
	assertAbsent(t, filepath.Join(ws, ".bashrc"))
	out, code := run("run", "--max-disk", "1M", "-c", `echo disk > disk.txt; head -c 2097152 /dev/zero > big`)
	if code == 0 || !strings.Contains(out, "disk budget is spent") {
		t.Errorf("disk budget as nobody: exit %d, output:\n%s", code, out)
	}
	assertContent(t, filepath.Join(ws, "disk.txt"), "disk\n")
	if st, err := os.Stat(filepath.Join(ws, "disk.txt")); err == nil && st.Sys().(*syscall.Stat_t).Uid != nobody {
		t.Errorf("disk.txt owned by uid %d, want %d", st.Sys().(*syscall.Stat_t).Uid, nobody)
	}

	// No cgroup for nobody: the process limit falls back to RLIMIT_NPROC
	// in the sandbox's user namespace. Counted from outside.
	const marker = "2.31416"
	w := WatchPeak(func() int { return len(PidsWith(marker)) })
	// perl, not a shell: dash exits at its first failed fork (and the
	// sandbox with it, before the watcher looks), bash retries for
	// seconds. The marker is split in the script, so only the sleeps
	// carry it; perl waits 3 s for the watcher.
	out, code = run("run", "--max-procs", "16", "--", "perl", "-e",
		`for (1..60) { my $p = fork(); if (defined $p && !$p) { exec "sleep", "`+marker[:5]+`"."`+marker[5:]+`"; exit 1 } } sleep 3; 1 while wait() > 0`)
	peak := w.Stop()
	t.Logf("peak of %d sleeps under --max-procs 16", peak)
	if peak > 16 || peak < 5 {
		t.Errorf("peak of %d sleeps under --max-procs 16 (exit %d):\n%s", peak, code, out)
	}
	if !strings.Contains(out, "enforced with RLIMIT_NPROC") {
		t.Errorf("the result should say the process limit is an rlimit here:\n%s", out)
	}
	// A memory limit the user sets cannot be an rlimit (per process only):
	// refused, and nothing runs.
	if out, code := run("run", "--max-memory", "100M", "-c", `echo ran > mem.txt`); code != 125 || !strings.Contains(out, "for the sandbox as a whole") {
		t.Errorf("--max-memory without a cgroup: exit %d, output:\n%s", code, out)
	}
	assertAbsent(t, filepath.Join(ws, "mem.txt"))
	// The tool's default memory limit falls back to RLIMIT_DATA: one
	// process past 2 GiB fails.
	call := `{"type":"tool_use","id":"toolu_nobody","name":"Bash","input":{"command":"head -c 2600M /dev/zero | tail -n 1 | wc -c"}}`
	out, _ = runIn(call, "tool", "--mode", "bypassPermissions")
	if !strings.Contains(out, "memory exhausted") || !strings.Contains(out, "RLIMIT_DATA") {
		t.Errorf("a 2.6 GB line under the default limit, as nobody:\n%s", out)
	}
	// --max-procs alone is enforced (RLIMIT_NPROC) and the tool's default
	// memory limit beside it stays best effort: the call runs (it was
	// refused for the memory limit the user never set).
	call = `{"type":"tool_use","id":"toolu_procs","name":"Bash","input":{"command":"echo procs > procs.txt"}}`
	if out, _ = runIn(call, "tool", "--mode", "bypassPermissions", "--max-procs", "64"); strings.Contains(out, "cannot enforce") {
		t.Errorf("--max-procs alone, as nobody:\n%s", out)
	}
	assertContent(t, filepath.Join(ws, "procs.txt"), "procs\n")
	// sbx probe agrees with sbx doctor: limits this host cannot enforce
	// make the probe "limited" (the refusal checked), not a failure.
	if out, code := run("probe", "--summary", "--only", "resource-limits"); code != 0 || !strings.HasPrefix(out, "resource-limits    limited: this host cannot enforce --max-memory") {
		t.Errorf("sbx probe as nobody: exit %d\n%s", code, out)
	}
	// Those notes are the operator's: on sbx's stderr once per session,
	// never in the tool_results the model reads.
	two := `{"type":"tool_use","id":"a","name":"Bash","input":{"command":"true"}}` + "\n" +
		`{"type":"tool_use","id":"b","name":"Bash","input":{"command":"true"}}` + "\n"
	serve := exec.Command(bin, "serve", "--mode", "bypassPermissions")
	serve.Stdin, serve.Dir = strings.NewReader(two), ws
	serve.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"}
	serve.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var stderr strings.Builder
	serve.Stderr = &stderr
	results, _ := serve.Output()
	if strings.Contains(string(results), "RLIMIT") || strings.Count(stderr.String(), "RLIMIT_NPROC") != 1 {
		t.Errorf("host notes: results %s\nstderr %s", results, stderr.String())
	}
}

// A writable root the sandbox cannot even enter (root runs sbx; the
// directory is another user's, mode 0700; a write-only file of another
// user) does not fail the run: sbx cannot stage its writes, so it stays
// read-only, with a warning; nothing reaches it.
func TestWritableRootOfAnotherUser(t *testing.T) {
	e := newEnv(t)
	if os.Getuid() != 0 {
		t.Skip("needs root to make a directory of another user")
	}
	other := filepath.Join(e.home, "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	logf := filepath.Join(e.home, "write-only.log")
	if err := os.WriteFile(logf, nil, 0o622); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(logf, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	settings := `{"sandbox":{"filesystem":{"allowWrite":["` + other + `", "` + logf + `"]}}}`
	r := e.sh(`echo ran > ran.txt; echo x > `+other+`/planted; echo x > `+other+`/.bashrc; echo x >> `+logf+`; true`, "--settings", settings, "--mode", "bypassPermissions")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	assertContent(t, logf, "")
	if !strings.Contains(r.stderr, "writable root "+logf+" stays read-only") {
		t.Errorf("no warning for the file sbx cannot stage: %s", r.stderr)
	}
	assertContent(t, e.path("ran.txt"), "ran\n")
	if names := listing(t, other); len(names) != 0 {
		t.Errorf("the command wrote into a directory it cannot enter: %v", names)
	}
}
