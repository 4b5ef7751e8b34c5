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
		running := 0 // one still running, 0 when none
		for _, pid := range descendants(initPID) {
			_, sent := stopped[pid]
			if !mayRun("/proc", pid, sent) {
				continue
			}
			running = pid
			if sent {
				continue // signalled, not stopped yet
			}
			if fd, ok := stopBelow(pid, initPID); ok {
				stopped[pid] = fd
			}
		}
		if running == 0 {
			return resume, nil
		}
		if time.Now().After(deadline) {
			resume()
			_, sent := stopped[running]
			return nil, fmt.Errorf("a process of the sandbox did not stop within %v (%s, signalled: %v)", limit, describeProc(running), sent)
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

// mayRun reports whether a thread of pid (under the proc mount at proc)
// may still run code of its own: it is neither stopped nor dead, nor, once
// signalled (sent), in an uninterruptible wait with the stop still to
// come. Such a thread stops before it returns to its code: SIGSTOP is
// pending for the process (in the wait of a parent for its vfork child,
// which the pause stopped before its exec, the parent would otherwise be
// waited for forever), or another of its threads has stopped (the group
// stop is under way). False when pid is gone.
func mayRun(proc string, pid int, sent bool) bool {
	stopped, waiting := 0, 0
	stats, _ := filepath.Glob(fmt.Sprintf("%s/%d/task/*/stat", proc, pid))
	for _, f := range stats {
		st, err := statFields(f)
		switch {
		case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH):
			// a thread that exited
		case err != nil:
			return true
		case strings.Contains("TtZX", st[0]):
			stopped++
		case st[0] == "D" && sent:
			waiting++
		default:
			return true
		}
	}
	return waiting > 0 && stopped == 0 && !stopPending(proc, pid)
}

// stopPending reports whether SIGSTOP is pending for the whole process
// (ShdPnd in its status).
func stopPending(proc string, pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/status", proc, pid))
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "ShdPnd:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(unix.SIGSTOP-1)) != 0
		}
	}
	return false
}

// describeProc names pid, its command and the states of its threads, for
// an error.
func describeProc(pid int) string {
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	var states []string
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	for _, f := range stats {
		if st, err := statFields(f); err == nil {
			states = append(states, st[0])
		}
	}
	return fmt.Sprintf("pid %d %q, threads %s", pid, strings.TrimSpace(string(comm)), strings.Join(states, ""))
}
