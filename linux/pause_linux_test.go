//go:build linux

package linux

import (
	"os"
	"os/exec"
	"path/filepath"
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
	if !runningTasks(init.Process.Pid) {
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
	for i := 0; i < 500 && !runningTasks(kids[0]); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if !runningTasks(kids[0]) {
		t.Error("the failed pause left a process stopped")
	}
}
