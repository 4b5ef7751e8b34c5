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
	resume, err := pauseSandbox(init.Process.Pid, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sa, sb := sizeOf(t, a), sizeOf(t, b)
	time.Sleep(300 * time.Millisecond)
	if sizeOf(t, a) != sa || sizeOf(t, b) != sb {
		t.Error("a process below the init wrote while the sandbox was paused")
	}
	if !mayRun("/proc", init.Process.Pid, false) {
		t.Error("the init itself was stopped")
	}
	resume()
	if !growing(a, sa) || !growing(b, sb) {
		t.Error("the writers did not go on after resume")
	}
	pid, _ := os.ReadFile(held)
	if st, err := statFields("/proc/" + strings.TrimSpace(string(pid)) + "/stat"); err != nil || st[0] != "T" {
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
	for i := 0; i < 500 && !mayRun("/proc", kids[0], false); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if !mayRun("/proc", kids[0], false) {
		t.Error("the failed pause left a process stopped")
	}
}

// mayRun reads the threads' states: a thread in an uninterruptible wait
// counts as paused only once signalled and with the stop to come (the
// parent of a vfork child the pause stopped before its exec waits so for
// good).
func TestMayRun(t *testing.T) {
	const stop = "0000000000040000" // SIGSTOP in ShdPnd
	tests := []struct {
		name   string
		states string // one letter per thread
		shdPnd string
		sent   bool
		mayRun bool
	}{
		{"running", "R", "0", true, true},
		{"sleeping", "S", "0", true, true},
		{"stopped", "T", "0", true, false},
		{"traced", "t", "0", false, false},
		{"zombie", "Z", "0", false, false},
		{"one thread still sleeping", "TS", "0", true, true},
		{"vfork parent, stop pending", "D", stop, true, false},
		{"vfork parent, not signalled", "D", stop, false, true},
		{"disk wait, no stop pending (continued since)", "D", "0", true, true},
		{"group stop under way", "TD", "0", true, false},
		{"disk wait and a running thread", "DR", stop, true, true},
		{"gone", "", "0", true, false},
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
			if got := mayRun(proc, 42, tt.sent); got != tt.mayRun {
				t.Errorf("mayRun = %v, want %v", got, tt.mayRun)
			}
		})
	}
}
