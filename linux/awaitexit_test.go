//go:build linux

package linux

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// threadsInWait lists this process's threads blocked in wait4 or waitid.
func threadsInWait(t *testing.T) []string {
	tasks, err := filepath.Glob("/proc/self/task/*/syscall")
	if err != nil {
		t.Fatal(err)
	}
	var in []string
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread is gone
		}
		if nr, _, _ := strings.Cut(string(b), " "); nr == "61" || nr == "247" {
			in = append(in, f)
		}
	}
	return in
}

// startOnLockedThread waits for the child through the poller, not in a
// wait system call that would hold the goroutine's P (on one P, every
// other goroutine stalls until the runtime's monitor takes it back), and
// still delivers the exit once the child is gone.
func TestStartOnLockedThreadWaitsInThePoller(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "read x; exit 3")
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	exited, err := startOnLockedThread(cmd)
	if err != nil {
		t.Fatal(err)
	}
	// A waiter in wait4/waitid would sit there the whole time the child
	// reads; look for it for a while.
	for i := 0; i < 20; i++ {
		if in := threadsInWait(t); len(in) > 0 {
			t.Fatalf("a thread blocks in a wait system call: %v", in)
		}
		select {
		case err := <-exited:
			t.Fatalf("exit delivered while the child runs: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	w.Close()
	select {
	case err := <-exited:
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
			t.Fatalf("exit: %v %v", err, cmd.ProcessState)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the child's exit was never delivered")
	}
}

// A child that exited before the wait began is still delivered, every
// time: the poller may take the pidfd's only edge before the wait starts
// (a clean-clone CI run hung here for 10 minutes before the wait asked the
// kernel at each wake-up).
func TestAwaitExitOfAnExitedChild(t *testing.T) {
	for i := 0; i < 200; i++ {
		cmd := exec.Command("/bin/true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 200 && !zombie(cmd.Process.Pid); j++ {
			time.Sleep(time.Millisecond)
		}
		done := make(chan struct{})
		go func() {
			awaitExit(cmd.Process.Pid)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the exit of a child that had exited was never seen", i)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	return strings.HasPrefix(s[strings.LastIndexByte(s, ')')+1:], " Z")
}
