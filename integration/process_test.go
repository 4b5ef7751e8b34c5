//go:build linux

package integration

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestExitStatusPassThrough(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"run", "--", "true"}, 0},
		{[]string{"run", "--", "sh", "-c", "exit 42"}, 42},
		{[]string{"run", "-c", "kill -TERM $$"}, 128 + 15},
		{[]string{"run", "-c", "kill -KILL $$"}, 128 + 9},
		{[]string{"run", "--", "sbx-no-such-command"}, 127},
		{[]string{"run", "--", "/etc/passwd"}, 126},
		{[]string{"run", "--", "ls", "--no-such-flag-for-ls"}, 2},
	}
	for _, tt := range tests {
		if r := e.sbx(tt.args...); r.code != tt.want {
			t.Errorf("sbx %q: exit %d, want %d (stderr %q)", tt.args, r.code, tt.want, r.stderr)
		}
	}
}

func TestStdioPassThrough(t *testing.T) {
	e := newEnv(t)
	r := e.sbxIn(strings.NewReader("from stdin\n"), "run", "-c", "cat; echo to-stderr >&2")
	if r.stdout != "from stdin\n" || r.stderr != "to-stderr\n" {
		t.Errorf("stdout %q stderr %q", r.stdout, r.stderr)
	}
}

func TestHostProcessesInvisible(t *testing.T) {
	e := newEnv(t)
	r := e.sh(fmt.Sprintf("ls /proc | grep -c '^[0-9]'; test -e /proc/%d && echo host-visible; hostname", os.Getpid()))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Fields(r.stdout)
	if n, _ := strconv.Atoi(lines[0]); n == 0 || n > 6 {
		t.Errorf("the sandbox sees %s processes, want only its own few", lines[0])
	}
	if strings.Contains(r.stdout, "host-visible") {
		t.Error("the test's own process is visible in the sandbox")
	}
}

func TestLeakedDescriptorsClosed(t *testing.T) {
	e := newEnv(t)
	leak, err := os.Open("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	cmd := exec.Command(sbxBin, "run", "--", "ls", "/proc/self/fd")
	cmd.Dir, cmd.Env = e.ws, e.environ()
	cmd.ExtraFiles = []*os.File{leak, leak, leak, leak, leak} // fds 3-7 in sbx
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	fds := strings.Fields(string(out))
	// 0, 1, 2 and the directory ls itself opened.
	if len(fds) > 4 {
		t.Errorf("descriptors in the sandbox: %v", fds)
	}
}

func TestNoNetwork(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var hits atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	r := e.sh(fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && echo connected; ip -o link 2>/dev/null | grep -vc ': lo:' ; getent hosts localhost.invalid example.com; true`, port))
	if strings.Contains(r.stdout, "connected") {
		t.Error("connected to a host port from the sandbox")
	}
	// Give a stray connection time to land before counting.
	time.Sleep(100 * time.Millisecond)
	if n := hits.Load(); n != 0 {
		t.Errorf("host server saw %d connections, want 0", n)
	}
}

// waitFor polls cond every 20 ms for at most d.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func TestTimeoutKillsTheTree(t *testing.T) {
	e := newEnv(t)
	marker := "31.4159" + strconv.Itoa(os.Getpid())
	start := time.Now()
	r := e.sh(fmt.Sprintf("sleep %s & (sleep %s &) ; setsid sleep %s & sleep %s", marker, marker, marker, marker), "--timeout", "500ms")
	if r.code != 124 {
		t.Errorf("exit %d, want 124; stderr %s", r.code, r.stderr)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %s", d)
	}
	if !strings.Contains(r.stderr, "timed out") {
		t.Errorf("stderr = %q", r.stderr)
	}
	if !waitFor(5*time.Second, func() bool { return len(PidsWith(marker)) == 0 }) {
		t.Errorf("processes survived the timeout: %v", PidsWith(marker))
	}
}

func TestBackgroundProcessesDieWithCommand(t *testing.T) {
	e := newEnv(t)
	marker := "27.1828" + strconv.Itoa(os.Getpid())
	r := e.sh(fmt.Sprintf("nohup sleep %s >/dev/null 2>&1 & setsid sleep %s & echo started", marker, marker))
	if r.code != 0 || !strings.Contains(r.stdout, "started") {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if !waitFor(5*time.Second, func() bool { return len(PidsWith(marker)) == 0 }) {
		t.Errorf("processes outlived the sandbox: %v", PidsWith(marker))
	}
}

func TestSignalForwarding(t *testing.T) {
	e := newEnv(t)
	cmd := e.startReady(nil, "run", "-c", `trap 'echo got-int > int.txt; exit 5' INT; echo ready; while :; do sleep 0.05; done`)
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("sbx did not exit after SIGINT")
	}
	assertContent(t, e.path("int.txt"), "got-int\n") // merged after the trap
	if code := cmd.ProcessState.ExitCode(); code != 5 {
		t.Errorf("exit %d, want 5", code)
	}
}

// TestCtrlZStopsTheCommand: SIGTSTP to sbx (a terminal's Ctrl-Z) stops
// the command as well as sbx, and SIGCONT (fg) goes on with both; before,
// sbx stopped and the command ran on, its --timeout held while sbx was.
func TestCtrlZStopsTheCommand(t *testing.T) {
	e := newEnv(t)
	marker := "16.1803" + strconv.Itoa(os.Getpid())
	cmd := e.startReady(nil, "run", "-c", "echo ready; sleep "+marker)
	e.endAtCleanup(cmd)
	var sleeper int
	if !waitFor(5*time.Second, func() bool {
		for _, pid := range PidsWith(marker) { // sbx's own argv holds it too
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); string(comm) == "sleep\n" {
				sleeper = pid
			}
		}
		return sleeper != 0
	}) {
		t.Fatalf("the command's sleep not found: %v", PidsWith(marker))
	}
	cmd.Process.Signal(syscall.SIGTSTP)
	if !waitFor(5*time.Second, func() bool { return procState(cmd.Process.Pid) == "T" && procState(sleeper) == "T" }) {
		t.Fatalf("after SIGTSTP: sbx %q, the command %q; want both stopped (T)", procState(cmd.Process.Pid), procState(sleeper))
	}
	cmd.Process.Signal(syscall.SIGCONT)
	if !waitFor(5*time.Second, func() bool { return procState(cmd.Process.Pid) != "T" && procState(sleeper) == "S" }) {
		t.Fatalf("after SIGCONT: sbx %q, the command %q; want both running", procState(cmd.Process.Pid), procState(sleeper))
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 128+15 {
		t.Fatalf("%s after SIGTERM, want 143", cmd.ProcessState)
	}
}

// shellsWith are the pids of the sh processes whose command line holds
// marker (sbx's own argv may hold it too: its comm is not sh).
func shellsWith(marker string) []int {
	var out []int
	for _, pid := range PidsWith(marker) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); string(comm) == "sh\n" {
			out = append(out, pid)
		}
	}
	return out
}

// TestCtrlZStopsEveryProcess: Ctrl-Z stops every process of the sandbox,
// one that ignores SIGTSTP and one that left the command's session
// (setsid) too; before, both ran on while sbx and its timeout stood still.
// SIGCONT continues them all.
func TestCtrlZStopsEveryProcess(t *testing.T) {
	e := newEnv(t)
	marker := "ctrlz" + strconv.Itoa(os.Getpid())
	loop := "trap '' TSTP; while :; do sleep 0.05; done"
	script := fmt.Sprintf("setsid sh -c %q %s & echo ready; sh -c %q %s", loop, marker, loop, marker)
	cmd := e.startReady(nil, "run", "-c", script)
	e.endAtCleanup(cmd)
	if !waitFor(5*time.Second, func() bool { return len(shellsWith(marker)) == 2 }) {
		t.Fatalf("the two loops not found: %v", shellsWith(marker))
	}
	states := func() (st []string) {
		for _, pid := range shellsWith(marker) {
			st = append(st, procState(pid))
		}
		return st
	}
	// At least the two loops; a loop's child caught between its fork and
	// the exec of sleep still bears the marker, and must stop too. Each is
	// stopped (T), unless it waits (D) for a child it vforked (dash does)
	// that was stopped before its exec: it cannot run either.
	stopped := func() bool {
		pids := shellsWith(marker)
		if len(pids) < 2 {
			return false
		}
		for _, pid := range pids {
			if st := procState(pid); st != "T" && (st != "D" || !slices.ContainsFunc(pids, func(c int) bool {
				return procState(c) == "T" && procParent(c) == pid
			})) {
				return false
			}
		}
		return true
	}
	cmd.Process.Signal(syscall.SIGTSTP)
	if !waitFor(5*time.Second, func() bool { return procState(cmd.Process.Pid) == "T" && stopped() }) {
		t.Fatalf("after SIGTSTP: sbx %q, the loops %q; want all stopped (T)", procState(cmd.Process.Pid), states())
	}
	cmd.Process.Signal(syscall.SIGCONT)
	if !waitFor(5*time.Second, func() bool { return procState(cmd.Process.Pid) != "T" && !slices.Contains(states(), "T") }) {
		t.Fatalf("after SIGCONT: sbx %q, the loops %q; want all running", procState(cmd.Process.Pid), states())
	}
}

// TestQuickStopAndContinue: a SIGCONT sent right after a SIGTSTP leaves
// sbx and the command running. Go reports two signals that come together
// in the order of their numbers (SIGCONT first); before, sbx then stopped
// for good, waiting for the SIGCONT it had already had (11 of 20 runs).
func TestQuickStopAndContinue(t *testing.T) {
	e := newEnv(t)
	marker := "quickcont" + strconv.Itoa(os.Getpid())
	cmd := e.startReady(nil, "run", "-c", "echo ready; sh -c 'while :; do sleep 0.05; done' "+marker)
	e.endAtCleanup(cmd)
	if !waitFor(5*time.Second, func() bool { return len(shellsWith(marker)) == 1 }) {
		t.Fatalf("the loop not found: %v", shellsWith(marker))
	}
	loop := shellsWith(marker)[0]
	for i := range 8 {
		cmd.Process.Signal(syscall.SIGTSTP)
		cmd.Process.Signal(syscall.SIGCONT)
		time.Sleep(300 * time.Millisecond)
		if procState(cmd.Process.Pid) == "T" || procState(loop) == "T" {
			t.Fatalf("round %d: sbx %q, the command %q after SIGTSTP and SIGCONT; want both running", i, procState(cmd.Process.Pid), procState(loop))
		}
	}
}

// endAtCleanup ends a run that is still going when the test ends, the way
// a user would (SIGCONT, then SIGTERM; SIGKILL only after 10 s), and waits
// for sbx: a SIGKILL alone leaves the helper finishing the run in the
// test's home while the test's temporary directory is removed.
func (e *env) endAtCleanup(cmd *exec.Cmd) {
	e.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
}

// startPiped starts cmd in the workspace with the test's environment and
// returns its stdout.
func (e *env) startPiped(cmd *exec.Cmd) io.ReadCloser {
	e.t.Helper()
	cmd.Dir, cmd.Env = e.ws, e.environ()
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// procStat is the fields of /proc/PID/stat after the command's name
// (nil when gone): the state first, then the parent.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// procState is the state letter of /proc/PID/stat ("" when gone).
func procState(pid int) string {
	if f := procStat(pid); len(f) > 0 {
		return f[0]
	}
	return ""
}

// procParent is pid's parent (0 if it is gone).
func procParent(pid int) int {
	if f := procStat(pid); len(f) > 1 {
		ppid, _ := strconv.Atoi(f[1])
		return ppid
	}
	return 0
}

// TestIgnoredSignalIsNotForwarded: sbx started with SIGINT ignored (a
// background job of a script) leaves it so: a SIGINT does not reach the
// command. Before, sbx took it and forwarded it.
func TestIgnoredSignalIsNotForwarded(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command("sh", "-c", `trap '' INT; exec "$0" run -c 'echo ready; sleep 0.5; echo done > d'`, sbxBin)
	out := e.startPiped(cmd)
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "ready\n" {
		t.Fatalf("%q %v", line, err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	io.Copy(io.Discard, out)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("%s, want 0: the ignored SIGINT reached the command", cmd.ProcessState)
	}
	assertContent(t, e.path("d"), "done\n")
}

// TestEarlySignalIsNotLost: a SIGTERM that reaches sbx while the sandbox
// is still being built ends the run: the command never finishes. Before,
// one that came while the init was starting was dropped (PID 1 of a
// namespace without a handler for it) and the command ran to its end, or
// the init's runtime died of it and the run failed as a sandbox that
// could not be built (125).
func TestEarlySignalIsNotLost(t *testing.T) {
	e := newEnv(t)
	for d := time.Duration(0); d <= 40*time.Millisecond; d += 2 * time.Millisecond {
		cmd := exec.Command(sbxBin, "run", "-c", "sleep 1; echo done > done.txt")
		cmd.Dir, cmd.Env = e.ws, e.environ()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if _, err := os.Stat(e.path("done.txt")); err == nil {
			t.Fatalf("SIGTERM after %s was lost: the command ran to its end (stderr %q)", d, stderr.String())
		}
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !(ws.Signaled() && ws.Signal() == syscall.SIGTERM) && ws.ExitStatus() != 128+15 {
			t.Fatalf("SIGTERM after %s: %s, want 143 or death by SIGTERM (stderr %q)", d, cmd.ProcessState, stderr.String())
		}
	}
}

// TestLateSignalKeepsTheStatus: signals that reach sbx after the command
// ended (here a flood from "ready" on, which the command ignores) change
// nothing: the command's status stands, its write is merged, the run's
// directory is removed. Before, one that came while sbx finished the run
// ended sbx by its default action (about 1 run in 5 here).
func TestLateSignalKeepsTheStatus(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 8; i++ {
		os.Remove(e.path("m"))
		cmd := e.startReady(nil, "run", "-c", "trap '' TERM HUP INT; echo ready; sleep 0.3; echo x > m; exit 5")
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		sent := 0
	flood:
		for {
			select {
			case <-done:
				break flood
			case <-time.After(2 * time.Millisecond):
				cmd.Process.Signal(syscall.SIGTERM)
				sent++
			}
		}
		if code := cmd.ProcessState.ExitCode(); code != 5 {
			t.Fatalf("run %d, %d SIGTERMs: %s, want exit 5", i, sent, cmd.ProcessState)
		}
		assertContent(t, e.path("m"), "x\n")
		if runs, _ := os.ReadDir(filepath.Join(e.home, ".local/state/sbx/runs")); len(runs) != 0 {
			t.Fatalf("run %d left its directory: %v", i, runs)
		}
	}
}

// TestUnreadOutputDoesNotHoldTheTimeout: with stdout a pipe nobody reads,
// --timeout still ends sbx (124, said on stderr), as timeout(1) ends;
// before, sbx waited on its write until the reader went away.
func TestUnreadOutputDoesNotHoldTheTimeout(t *testing.T) {
	e := newEnv(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close() // never read
	cmd := exec.Command(sbxBin, "run", "--timeout", "1s", "--", "yes")
	var stderr strings.Builder
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = e.ws, e.environ(), pw, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("sbx did not return 19 s after its timeout (stderr %q)", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 124 || !strings.Contains(stderr.String(), "timed out after 1s") {
		t.Fatalf("%s, stderr %q: want 124 and the timeout named", cmd.ProcessState, stderr.String())
	}
}

// TestClosedOutputReachesTheCommand: when the reader of sbx's stdout goes
// away, the command sees a closed pipe (EPIPE, with SIGPIPE ignored) as it
// would writing there itself, and goes on: its later write is merged and
// its status is sbx's. Before, sbx died of SIGPIPE (141) and took the
// sandbox with it.
func TestClosedOutputReachesTheCommand(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command(sbxBin, "run", "-c", `trap '' PIPE; echo hello; sleep 0.5; echo more; sleep 0.3; echo again || echo "$?" > failed; echo done > f`)
	out := e.startPiped(cmd)
	buf := make([]byte, 3)
	if _, err := io.ReadFull(out, buf); err != nil {
		t.Fatal(err)
	}
	out.Close()
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("%s, want the command's 0", cmd.ProcessState)
	}
	assertContent(t, e.path("f"), "done\n")
	assertContent(t, e.path("failed"), "1\n") // the second write after the close failed
	if runs, _ := os.ReadDir(filepath.Join(e.home, ".local/state/sbx/runs")); len(runs) != 0 {
		t.Fatalf("the run left its directory: %v", runs)
	}
}

func TestNoLeftoversAfterSIGKILL(t *testing.T) {
	e := newEnv(t)
	e.mkdir(".git/hooks")
	e.write(".git/config", "")
	e.write("file", "x")
	before := listing(t, e.ws)
	marker := "14.142" + strconv.Itoa(os.Getpid())
	cmd := e.startReady(nil, "run", "--mode", "bypassPermissions", "-c", "mkdir -p sub; echo > sub/.bashrc; echo ready; sleep "+marker)
	// Nothing of sbx's shows in the workspace while the sandbox runs.
	if got := listing(t, e.ws); !slices.Equal(sorted(got), sorted(before)) {
		t.Errorf("workspace during the run = %q, want %q", got, before)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if !waitFor(5*time.Second, func() bool { return len(PidsWith(marker)) == 0 }) {
		t.Errorf("sandboxed processes survived SIGKILL of sbx: %v", PidsWith(marker))
	}
	// A later run cleans up what the killed one left.
	r := e.sbx("doctor", "--clean", "--json")
	if r.code != 0 {
		t.Fatalf("doctor --clean: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	// The helper outlived sbx and merged what the command wrote: sub
	// came, its .bashrc was refused.
	if st, err := os.Stat(e.path("sub")); err != nil || !st.IsDir() {
		t.Errorf("sub was not merged after sbx was killed: %v", err)
	}
	os.Remove(e.path("sub"))
	after := listing(t, e.ws)
	slices.Sort(before)
	slices.Sort(after)
	if !slices.Equal(before, after) {
		t.Errorf("workspace after clean = %q, want %q", after, before)
	}
	assertAbsent(t, e.path("sub/.bashrc"))
	runs, _ := os.ReadDir(filepath.Join(e.home, ".local/state/sbx/runs"))
	if len(runs) != 0 {
		t.Errorf("run directories left: %v", runs)
	}
	if !strings.Contains(r.stdout, "sub/.bashrc") {
		t.Errorf("clean report does not name the refused file: %s", r.stdout)
	}
}

func TestNoLeftoversAfterNormalExit(t *testing.T) {
	e := newEnv(t)
	e.write("a", "1")
	r := e.sh("ls -A | wc -l")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	if got := listing(t, e.ws); !slices.Equal(got, []string{"a"}) {
		t.Errorf("workspace after the run = %q", got)
	}
	runs, _ := os.ReadDir(filepath.Join(e.home, ".local/state/sbx/runs"))
	if len(runs) != 0 {
		t.Errorf("run directories left: %v", runs)
	}
}

func TestNoCapabilities(t *testing.T) {
	e := newEnv(t)
	r := e.sh("grep -h '^Cap' /proc/self/status /proc/1/status")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 10 {
		t.Fatalf("status lines: %q", lines)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, "0000000000000000") {
			t.Errorf("capability left: %s", l)
		}
	}
}

// TestTerminal runs sbx on a pseudo-terminal (script(1)) and checks that the
// command's streams are that terminal.
func TestTerminal(t *testing.T) {
	e := newEnv(t)
	script, err := exec.LookPath("script")
	if err != nil {
		if inCI() {
			t.Fatal("script(1) not found")
		}
		t.Skip("script(1) not found")
	}
	cmd := exec.Command(script, "-qec", sbxBin+" run -- sh -c 'test -t 0 && test -t 1 && test -t 2 && echo all-terminals'", "/dev/null")
	cmd.Dir, cmd.Env = e.ws, e.environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "all-terminals") {
		t.Errorf("output %q", out)
	}
}

// Every byte of an argument and of the environment reaches the command
// unchanged, UTF-8 or not.
func TestNonUTF8BytesReachTheCommand(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command(sbxBin, "run", "--", "sh", "-c", `printf '%s|%s' "$1" "$X"`, "sh", "a\xffb")
	cmd.Dir, cmd.Env = e.ws, append(e.environ(), "X=\xfe\xfd")
	out, err := cmd.Output()
	if err != nil || string(out) != "a\xffb|\xfe\xfd" {
		t.Errorf("got %q (%v), want the bytes as given", out, err)
	}
}

// The command cannot bring down the sandbox's init (PID 1) with a signal
// the runtime would end it on with a stack dump: the init ignores them,
// the command goes on, and no dump reaches its output.
func TestInitSurvivesFatalSignals(t *testing.T) {
	e := newEnv(t)
	r := e.sh("for s in ABRT TRAP SYS ILL BUS FPE SEGV 16; do kill -$s 1; done; sleep 0.2; echo survived")
	if r.code != 0 || r.stdout != "survived\n" || strings.Contains(r.stderr, "goroutine") {
		t.Errorf("%d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestCommandStartsWithNoSignalIgnored: the command's signal dispositions
// are the caller's, with and without the limits stub: the init drops the
// signals the command sends it by taking them, not ignoring them, which a
// command would inherit across exec (kill -ABRT did nothing).
func TestCommandStartsWithNoSignalIgnored(t *testing.T) {
	e := newEnv(t)
	host, err := exec.Command("grep", "SigIgn", "/proc/self/status").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, limits := range [][]string{nil, {"--max-procs", "64"}} {
		args := append(append([]string{"run"}, limits...), "--", "grep", "SigIgn", "/proc/self/status")
		if r := e.sbx(args...); r.code != 0 || r.stdout != string(host) {
			t.Errorf("sbx %q: %d %q %q, want %q as on the host", args, r.code, r.stdout, r.stderr, host)
		}
	}
	if r := e.sh("kill -ABRT $$; echo survived"); r.code != 128+6 || r.stdout != "" {
		t.Errorf("kill -ABRT $$: %d %q %q, want 134", r.code, r.stdout, r.stderr)
	}
}

// TestBackgroundWritersStopBeforeTheMerge: a writer the command left
// running is dead before the merge starts, so what reaches the host is
// one moment of its work: files 1..N and "last" naming N (or N-1, when
// it died between the two writes; "last" is renamed into place), none
// missing, none beyond.
func TestBackgroundWritersStopBeforeTheMerge(t *testing.T) {
	e := newEnv(t)
	for try := range 3 {
		dir := fmt.Sprintf("w%d", try)
		r := e.sh(fmt.Sprintf(`mkdir %s && cd %s && { i=0; while :; do i=$((i+1)); echo $i > f.$i; echo $i > l.tmp; mv l.tmp last; done & } && sleep 0.3`, dir, dir))
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		last, err := os.ReadFile(e.path(dir + "/last"))
		if err != nil {
			t.Fatalf("the writer's work did not reach the host: %v", err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(last)))
		if err != nil || n < 10 {
			t.Fatalf("last = %q: the writer hardly ran", last)
		}
		entries, err := os.ReadDir(e.path(dir))
		if err != nil {
			t.Fatal(err)
		}
		for k := 1; k <= n; k++ {
			if _, err := os.Stat(e.path(fmt.Sprintf("%s/f.%d", dir, k))); err != nil {
				t.Errorf("try %d: last = %d, but f.%d did not reach the host", try, n, k)
				break
			}
		}
		files := 0
		for _, en := range entries {
			if strings.HasPrefix(en.Name(), "f.") {
				files++
			}
		}
		if files > n+1 {
			t.Errorf("try %d: last = %d, but %d files reached the host", try, n, files)
		}
		time.Sleep(100 * time.Millisecond)
		if again, _ := os.ReadFile(e.path(dir + "/last")); string(again) != string(last) {
			t.Errorf("try %d: the host's last changed after sbx returned: %q, then %q", try, last, again)
		}
	}
}

// TestSignalWhileSetUpCleansUp: a SIGTERM that reaches sbx run while it
// sets the sandbox up (from its run directory's making on, at delays that
// sweep the set-up) stops the run: exit 143, the command never ran, and
// nothing of the run is left, checked from outside: its directory, its
// proxy's directory, its cgroups, its processes. Before, the signal's
// default action ended sbx there and left them for the next run to clean.
func TestSignalWhileSetUpCleansUp(t *testing.T) {
	e := newEnv(t)
	runs := filepath.Join(e.home, ".local/state/sbx/runs")
	netDirs := func() []string { m, _ := filepath.Glob(filepath.Join(os.TempDir(), "sbx-net-*")); return m }
	netBefore := netDirs()
	const marker = "30.4343"
	stopped := 0
	for i := 0; i < 12; i++ {
		os.Remove(e.path("ran"))
		cmd := exec.Command(sbxBin, "run", "--max-procs", "200", "--max-disk", "8M", "-c", "echo x > ran; sleep "+marker)
		var stderr strings.Builder
		cmd.Dir, cmd.Env, cmd.Stderr = e.ws, e.environ(), &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		run := firstEntry(runs, 10*time.Second)
		time.Sleep(time.Duration(i) * 300 * time.Microsecond)
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 128+15 {
			t.Errorf("run %d: %s, want exit 143; stderr:\n%s", i, cmd.ProcessState, stderr.String())
		}
		if strings.Contains(stderr.String(), "while the sandbox was set up; the command did not run") {
			stopped++
			assertAbsent(t, e.path("ran"))
		}
		e.assertNothingLeft(i, run, marker, netBefore)
	}
	if stopped == 0 {
		t.Error("no SIGTERM came while the sandbox was set up")
	}
	t.Logf("%d of 12 runs stopped while set up", stopped)
}

// firstEntry is the name of the first entry that dir holds, looked for
// every 0.2 ms (waitFor's 20 ms would miss the set-up) for at most d.
func firstEntry(dir string, d time.Duration) string {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Microsecond) {
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			return ents[0].Name()
		}
	}
	return ""
}

// assertNothingLeft checks, from outside, that run i (named run in the
// state directory) left nothing: its directory, a proxy directory not in
// netBefore, its cgroups, processes with marker in their command line.
func (e *env) assertNothingLeft(i int, run, marker string, netBefore []string) {
	e.t.Helper()
	runs := filepath.Join(e.home, ".local/state/sbx/runs")
	left := func() []string {
		var out []string
		ents, _ := os.ReadDir(runs)
		for _, ent := range ents {
			out = append(out, filepath.Join(runs, ent.Name()))
		}
		cgs, _ := filepath.Glob("/sys/fs/cgroup/*/sbx-" + run)
		cg2, _ := filepath.Glob("/sys/fs/cgroup/sbx-" + run)
		out = append(append(out, cgs...), cg2...)
		nets, _ := filepath.Glob(filepath.Join(os.TempDir(), "sbx-net-*"))
		for _, d := range nets {
			if !slices.Contains(netBefore, d) {
				out = append(out, d)
			}
		}
		return out
	}
	if !waitFor(5*time.Second, func() bool { return len(left()) == 0 && len(PidsWith(marker)) == 0 }) {
		e.t.Fatalf("run %d left %v, processes %v", i, left(), PidsWith(marker))
	}
}

// TestPlainCommandRunsWithoutBash: a command of plain words runs without
// bash's start (what bash -c would exec, with the environment it would
// give), with the limits stub and without. Seen from the outcome: with a
// library bash needs hidden, `cat f.txt` still runs, while the same
// command with a `;` (which needs bash) cannot start.
func TestPlainCommandRunsWithoutBash(t *testing.T) {
	e := newEnv(t)
	out, err := exec.Command("ldd", "/bin/bash").Output()
	var lib string
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/") && strings.Contains(f, "libtinfo") {
			lib = f
		}
	}
	if err != nil || lib == "" {
		if inCI() {
			t.Fatalf("bash links no libtinfo to hide (ldd: %v):\n%s", err, out)
		}
		t.Skipf("bash links no libtinfo to hide: %s", out)
	}
	e.write("f.txt", "plain\n")
	settings := `{"sandbox":{"filesystem":{"denyRead":["` + lib + `"]}}}`
	for _, limits := range [][]string{nil, {"--max-procs", "200"}} {
		args := append([]string{"run", "--settings", settings}, limits...)
		if r := e.sbx(append(args, "-c", "cat f.txt")...); r.code != 0 || r.stdout != "plain\n" {
			t.Errorf("%v: plain command: exit %d, stdout %q, stderr:\n%s", limits, r.code, r.stdout, r.stderr)
		}
		if r := e.sbx(append(args, "-c", "cat f.txt; true")...); r.code != 127 || !strings.Contains(r.stderr, "libtinfo") {
			t.Errorf("%v: a command that needs bash: exit %d, stderr %q; want bash unable to start", limits, r.code, r.stderr)
		}
	}
}

// TestToolStoppedWhileSetUp: `sbx tool` stopped by a signal while the
// sandbox is set up answers with the reason and exits 128+N, as sbx run
// does; the command did not run (its file is absent on the host) and the
// run left nothing.
func TestToolStoppedWhileSetUp(t *testing.T) {
	e := newEnv(t)
	runs := filepath.Join(e.home, ".local/state/sbx/runs")
	netBefore, _ := filepath.Glob(filepath.Join(os.TempDir(), "sbx-net-*"))
	const marker = "30.4646"
	cmd := exec.Command(sbxBin, "tool", "--mode", "bypassPermissions")
	cmd.Dir, cmd.Env = e.ws, e.environ()
	cmd.Stdin = strings.NewReader(`{"type":"tool_use","id":"toolu_s","name":"Bash","input":{"command":"echo x > ran; sleep ` + marker + `"}}`)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	run := firstEntry(runs, 10*time.Second)
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 128+15 || !strings.Contains(stdout.String(), `"tool_use_id":"toolu_s"`) ||
		!strings.Contains(stdout.String(), "stopped by signal 15 (terminated) while the sandbox was set up; the command did not run") {
		t.Errorf("exit %s, tool_result %s; want 143 and the reason", cmd.ProcessState, stdout.String())
	}
	assertAbsent(t, e.path("ran"))
	e.assertNothingLeft(0, run, marker, netBefore)
}
