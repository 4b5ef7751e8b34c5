//go:build linux

package linux

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// startOnLockedThread starts cmd, and waits for it, from one goroutine
// locked to its OS thread: Pdeathsig follows the thread that forked the
// child (golang/go#27505). The channel delivers Wait's error.
func startOnLockedThread(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		awaitExit(cmd.Process.Pid)
		exited <- cmd.Wait()
	}()
	return exited, <-started
}

// awaitExit parks the calling goroutine until process pid (a child not
// yet waited for) has exited, through the runtime's poller on a pidfd,
// so that the Wait after it returns at once. A goroutine blocked in the
// wait system call itself keeps its P: sbx runs on one (oneProc), and the
// runtime's monitor takes it back only after up to 10 ms, a stall of
// every other goroutine. Each wake-up asks the kernel whether the child
// has exited (waitid, WNOHANG and WNOWAIT: it stays for Wait): the
// poller's edge for a pidfd that was readable when it was registered can
// be taken before the wait starts, and is not given again. Without
// pidfds (Linux < 5.3) it returns at once.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		return err != nil || info.Signo != 0 // exited (or not ours to wait for)
	})
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// removeStaleCgroups removes the cgroups of a run whose sbx was killed
// (their processes died with it: bubblewrap runs with --die-with-parent).
// They sit under sbx's own cgroup, a few levels below a hierarchy root.
func removeStaleCgroups(name string) []error {
	var errs []error
	pat := "/sys/fs/cgroup"
	for depth := 0; depth < 8; depth++ {
		m, _ := filepath.Glob(filepath.Join(pat, name))
		for _, d := range m {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("stale cgroup %s: %w", d, err))
			}
		}
		pat += "/*"
	}
	return errs
}

// Inner runs the entry point that args[1] names (the sandbox's init, the
// limits stub, the transaction helper) and returns its exit status; ok is
// false when args name none. sbx-inner's main and sbx's own re-exec call
// it.
func Inner(args []string) (code int, ok bool) {
	if len(args) < 2 {
		return 0, false
	}
	switch args[1] {
	case InitArg:
		return Init(), true
	case RlimitArg:
		return RlimitExec(args[2:]), true
	case TxHelperArg:
		return TxHelper(args[2:]), true
	}
	return 0, false
}
