//go:build linux && !sbxinner

package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pauseLimit bounds how long pausing a sandbox may take (a process in an
// uninterruptible wait stops only when the wait ends).
const pauseLimit = 2 * time.Second

// ask is the proxy's question about a host no rule names: the executor's
// Ask, with a pause that stops this run's sandbox.
func (r *run) ask(host string, port int) bool {
	return r.e.Ask != nil && r.e.Ask(host, port, r.pause)
}

// pause stops every process of this run's sandbox (pauseSandbox).
func (r *run) pause() (func(), error) {
	t := r.sandbox.Load()
	if t == nil {
		return nil, errors.New("the sandbox has not started")
	}
	pid := t.hostPID()
	if pid <= 0 {
		return nil, errors.New("the sandbox's init is not known, or is gone")
	}
	return pauseSandbox(pid, pauseLimit)
}

// pauseSandbox stops every process of a sandbox, all of them descendants
// of its init (initPID, as the host sees it; orphans are the init's), and
// waits until every thread of each has stopped. resume continues the
// processes it stopped (not those the command had stopped itself). A
// process is signalled through a pidfd opened, and found still below the
// init, after its pid was listed: a pid reused meanwhile by a process
// outside the sandbox is never signalled. The listing goes again until a
// pass finds every process stopped: a process forked while the listing
// ran has a parent that is stopped by the next pass.
func pauseSandbox(initPID int, limit time.Duration) (resume func(), err error) {
	stopped := map[int]int{} // pid -> pidfd
	resume = func() {
		for _, fd := range stopped {
			_ = unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0)
			unix.Close(fd)
		}
	}
	deadline := time.Now().Add(limit)
	for {
		running := false
		for _, pid := range descendants(initPID) {
			if !runningTasks(pid) {
				continue
			}
			running = true
			if _, sent := stopped[pid]; sent {
				continue // signalled, not stopped yet
			}
			if fd, ok := stopBelow(pid, initPID); ok {
				stopped[pid] = fd
			}
		}
		if !running {
			return resume, nil
		}
		if time.Now().After(deadline) {
			resume()
			return nil, fmt.Errorf("a process of the sandbox did not stop within %v", limit)
		}
		time.Sleep(time.Millisecond)
	}
}

// stopBelow sends SIGSTOP to pid through a pidfd, if the process that
// pidfd holds is below initPID.
func stopBelow(pid, initPID int) (int, bool) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, false // gone
	}
	if !below(pid, initPID) || unix.PidfdSendSignal(fd, unix.SIGSTOP, nil, 0) != nil {
		unix.Close(fd)
		return -1, false
	}
	return fd, true
}

// descendants lists the processes below pid (breadth first, bounded).
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 && len(out) < 1<<16 {
		p := queue[0]
		queue = queue[1:]
		kids, err := childrenOf(p)
		if err != nil {
			continue // it exited meanwhile
		}
		out = append(out, kids...)
		queue = append(queue, kids...)
	}
	return out
}

// below reports whether pid's chain of parents reaches ancestor.
func below(pid, ancestor int) bool {
	for i := 0; i < 4096 && pid > 1; i++ {
		f, err := statFields(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil {
			return false
		}
		if ppid == ancestor {
			return true
		}
		pid = ppid
	}
	return false
}

// runningTasks reports whether a thread of pid is neither stopped nor
// dead (false when pid is gone).
func runningTasks(pid int) bool {
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	for _, f := range stats {
		st, err := statFields(f)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // a thread that exited
		}
		if err != nil || !strings.Contains("TtZX", st[0]) {
			return true
		}
	}
	return false
}
