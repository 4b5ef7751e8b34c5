//go:build linux

package linux

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// growing waits until the file at path grows past size, or gives up.
func growing(path string, size int64) bool {
	for i := 0; i < 500; i++ {
		if fi, err := os.Stat(path); err == nil && fi.Size() > size {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func sizeOf(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// pauseSandbox stops every process below the init (a background writer,
// a grandchild that left the group with setsid) and only those: the
// writes stop while paused, go on after resume, and a process the command
// had stopped itself stays stopped.
func TestPauseSandboxStopsEveryProcessBelowTheInit(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	script := `while :; do echo x >> "$1"; sleep 0.01; done &
setsid sh -c 'while :; do echo y >> "$0"; sleep 0.01; done' "$2" &
sleep 1000 & kill -STOP $!
echo $! > "$3"
wait`
	held := filepath.Join(dir, "held")
	init := exec.Command("/bin/sh", "-c", script, "sh", a, b, held)
	if err := init.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { init.Process.Kill(); init.Wait() }()
	defer exec.Command("pkill", "-KILL", "-f", dir).Run()
	if !growing(a, 0) || !growing(b, 0) || !growing(held, 0) {
		t.Fatal("the writers did not start")
	}
	// kill -STOP returns before the process has stopped: a pause that
	// found it still sleeping would stop it too, and continue it after.
	pid, _ := os.ReadFile(held)
	stat := "/proc/" + strings.TrimSpace(string(pid)) + "/stat"
	for i := 0; i < 500; i++ {
		if st, err := statFields(stat); err == nil && st[0] == "T" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	resume, err := pauseSandbox(init.Process.Pid, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sa, sb := sizeOf(t, a), sizeOf(t, b)
	time.Sleep(300 * time.Millisecond)
	if sizeOf(t, a) != sa || sizeOf(t, b) != sb {
		t.Error("a process below the init wrote while the sandbox was paused")
	}
	if !mayRun("/proc", init.Process.Pid, false, nil) {
		t.Error("the init itself was stopped")
	}
	if err := resume(); err != nil {
		t.Errorf("resume: %v (nothing of the sandbox ran while paused)", err)
	}
	if !growing(a, sa) || !growing(b, sb) {
		t.Error("the writers did not go on after resume")
	}
	if st, err := statFields(stat); err != nil || st[0] != "T" {
		t.Errorf("the process the command stopped was continued: %v %v", st, err)
	}
}

// A process that does not stop in time (here: it is not stopped by
// anything, as the bound is 0) makes the pause fail and continue what it
// stopped.
func TestPauseSandboxGivesUp(t *testing.T) {
	init := exec.Command("/bin/sh", "-c", "sleep 1000 & wait")
	if err := init.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { init.Process.Kill(); init.Wait() }()
	var kids []int
	for i := 0; i < 500 && len(kids) == 0; i++ {
		kids, _ = childrenOf(init.Process.Pid)
		time.Sleep(5 * time.Millisecond)
	}
	if len(kids) == 0 {
		t.Fatal("no child")
	}
	defer syscall.Kill(kids[0], syscall.SIGKILL)
	if _, err := pauseSandbox(init.Process.Pid, 0); err == nil {
		t.Fatal("a pause with no time to stop anything succeeded")
	}
	for i := 0; i < 500 && !mayRun("/proc", kids[0], false, nil); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if !mayRun("/proc", kids[0], false, nil) {
		t.Error("the failed pause left a process stopped")
	}
}

// mayRun reads the threads' states: a thread in an uninterruptible wait
// counts as paused only in a vfork parent whose child the pause stopped,
// once signalled and with the stop to come.
func TestMayRun(t *testing.T) {
	const stop = "0000000000040000" // SIGSTOP in ShdPnd
	tests := []struct {
		name   string
		states string // one letter per thread
		shdPnd string
		sent   bool
		vfork  bool // a stopped child shares its memory
		mayRun bool
	}{
		{"running", "R", "0", true, false, true},
		{"sleeping", "S", "0", true, false, true},
		{"stopped", "T", "0", true, false, false},
		{"traced", "t", "0", false, false, false},
		{"zombie", "Z", "0", false, false, false},
		{"one thread still sleeping", "TS", "0", true, false, true},
		{"vfork parent, stop pending", "D", stop, true, true, false},
		{"vfork parent, not signalled", "D", stop, false, true, true},
		{"vfork parent, continued since", "D", "0", true, true, true},
		{"vfork parent, group stop under way", "TD", "0", true, true, false},
		{"disk wait, stop pending", "D", stop, true, false, true},
		{"disk wait, group stop under way", "TD", "0", true, false, true},
		{"vfork parent and a running thread", "DR", stop, true, true, true},
		{"gone", "", "0", true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proc := t.TempDir()
			for i, st := range tt.states {
				dir := filepath.Join(proc, "42", "task", strconv.Itoa(42+i))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				stat := "42 (sh) " + string(st) + " 1 42 42 0 -1"
				if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tt.states != "" {
				status := "Name:\tsh\nSigPnd:\t0000000000000000\nShdPnd:\t" + tt.shdPnd + "\n"
				if err := os.WriteFile(filepath.Join(proc, "42", "status"), []byte(status), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			held := func(pid int) bool { return pid == 42 && tt.vfork }
			if got := mayRun(proc, 42, tt.sent, held); got != tt.mayRun {
				t.Errorf("mayRun = %v, want %v", got, tt.mayRun)
			}
		})
	}
}

// A process whose vfork child the pause caught before its exec (here the
// child of Python's os.posix_spawn, held opening a FIFO before it runs
// true) waits for it in an uninterruptible sleep: the pause succeeds all
// the same, and after resume the child runs and the parent goes on.
func TestPauseSandboxHoldsAVforkParent(t *testing.T) {
	python := requireTool(t, "python3")
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	spawn := `import os, sys
os.posix_spawn("/bin/true", ["true"], {}, file_actions=[(os.POSIX_SPAWN_OPEN, 3, sys.argv[1], os.O_RDONLY, 0)])
os.wait()`
	init := exec.Command("/bin/sh", "-c", `"$0" -c "$1" "$2"; echo done`, python, spawn, fifo)
	out := &strings.Builder{}
	init.Stdout = out
	init.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := init.Start(); err != nil {
		t.Fatal(err)
	}
	// SIGKILL to the group ends the child too, which frees its parent.
	defer func() { syscall.Kill(-init.Process.Pid, syscall.SIGKILL); init.Wait() }()
	parent := waitForVforkParent(t, init.Process.Pid)
	resume, err := pauseSandbox(init.Process.Pid, 5*time.Second)
	if err != nil {
		t.Fatalf("pause: %v", err)
	}
	if !stopPending("/proc", parent) || !vforkHeld(parent) {
		t.Error("the vfork parent is not held with its stop to come")
	}
	if err := resume(); err != nil {
		t.Errorf("resume: %v", err)
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // lets the child open it and run true
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := init.Wait(); err != nil || out.String() != "done\n" {
		t.Errorf("after resume: %v %q", err, out.String())
	}
}

// waitForVforkParent waits until the process below init (Python) waits
// in an uninterruptible sleep for a child sharing its memory.
func waitForVforkParent(t *testing.T, init int) int {
	t.Helper()
	for i := 0; i < 1000; i++ {
		for _, pid := range descendants(init) {
			if st, err := statFields("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && st[0] == "D" {
				if kids, _ := childrenOf(pid); len(kids) == 1 && sameMemory(pid, kids[0]) {
					return pid
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no vfork parent waiting for its child")
	return 0
}

// requireTool finds name on PATH, or skips the test (fails it in CI).
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is needed in CI: %v", name, err)
		}
		t.Skipf("%s not found: %v", name, err)
	}
	return p
}

// The kernel may continue a paused process (a SIGCONT from a timer it
// armed, or its parent-death signal; here the test sends it to the whole
// group): resume reports that a process ran, and what the writer wrote
// meanwhile shows it did.
func TestPauseSandboxSeesAProcessContinuedWhilePaused(t *testing.T) {
	a := filepath.Join(t.TempDir(), "a")
	init := exec.Command("/bin/sh", "-c", `while :; do echo x >> "$1"; sleep 0.01; done & wait`, "sh", a)
	init.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := init.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { syscall.Kill(-init.Process.Pid, syscall.SIGKILL); init.Wait() }()
	if !growing(a, 0) {
		t.Fatal("the writer did not start")
	}
	resume, err := pauseSandbox(init.Process.Pid, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	size := sizeOf(t, a)
	syscall.Kill(-init.Process.Pid, syscall.SIGCONT)
	if !growing(a, size) {
		t.Fatal("the continued writer did not write")
	}
	if err := resume(); err == nil {
		t.Error("resume reported nothing though a process of the sandbox ran while paused")
	}
}
