//go:build linux

package seccomp

import (
	"errors"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The main goroutine keeps the main thread: a goroutine that ends locked
// to it would leave it wedged, not retired.
func init() { runtime.LockOSThread() }

// TestRecvAfterTheLastTaskExits: once every task carrying the filter has
// exited, the kernel answers each receive at once with ENOENT; Recv must
// say so (ErrNoTasks) rather than leave its caller receiving again in a
// loop that burns a CPU (the init's supervisor did, for as long as a warm
// sandbox lived after its command).
func TestRecvAfterTheLastTaskExits(t *testing.T) {
	prog, err := Native(Supervised)
	if err != nil {
		t.Skip(err) // an architecture without a filter
	}
	type forked struct {
		fd  int
		err error
	}
	ready := make(chan forked, 1)
	go func() {
		// The thread is never unlocked: the runtime retires it, filter and
		// all, when this goroutine ends (init keeps the main thread, which
		// the runtime would wedge instead, out of the way).
		runtime.LockOSThread()
		fd, err := InstallThreadListener(prog)
		if err != nil {
			ready <- forked{-1, err}
			return
		}
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
		if err == nil {
			var ws unix.WaitStatus
			_, err = unix.Wait4(pid, &ws, 0, nil)
		}
		ready <- forked{fd, err}
	}()
	f := <-ready
	if f.err != nil {
		t.Fatal(f.err)
	}
	defer unix.Close(f.fd)
	got := make(chan error, 1)
	go func() {
		var n Notif
		for i := 0; ; i++ {
			err := Recv(f.fd, &n)
			// A receive may come before the retired thread is gone: ENOENT
			// is then the answer; a few are fine, a stream is the bug.
			if !errors.Is(err, unix.ENOENT) || i == 1000 {
				got <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	select {
	case err := <-got:
		if !errors.Is(err, ErrNoTasks) {
			t.Fatalf("Recv with no task left = %v, want ErrNoTasks", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Recv still waiting 20 s after the last task exited")
	}
}
