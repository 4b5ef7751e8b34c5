//go:build linux && !sbxinner

package linux

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
func (r *run) pause() (func() error, error) {
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
// waits until every thread of each has stopped. A process is signalled
// through a pidfd opened, and found still below the init, after its pid
// was listed: a pid reused meanwhile by a process outside the sandbox is
// never signalled. The listing goes again until a pass finds every
// process stopped.
//
// Stopped is not held: the kernel may continue a stopped process (a
// SIGCONT from a timer it armed, or as its parent-death signal), and a
// fork under way when its parent stopped may add a child after the
// listing. So the pause records, once it stays still, every thread of the
// sandbox and its time on a CPU; resume compares them again before it
// continues the processes it stopped (not those the command had stopped
// itself), and reports an error when anything ran, appeared or went
// meanwhile: what was shown or answered then cannot be trusted.
func pauseSandbox(initPID int, limit time.Duration) (resume func() error, err error) {
	stopped := map[int]int{} // pid -> pidfd
	cont := func() {
		for _, fd := range stopped {
			_ = unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0)
			unix.Close(fd)
		}
	}
	deadline := time.Now().Add(limit)
	if err := stopAll(initPID, stopped, deadline, limit); err != nil {
		cont()
		return nil, err
	}
	still, err := settled(initPID, deadline)
	if err != nil {
		cont()
		return nil, err
	}
	return func() error {
		now, err := cpuTimes(initPID)
		cont()
		if err != nil || !maps.Equal(now, still) {
			return errors.New("a process of the sandbox ran while it was paused (something continued it, or it was forked as the pause began)")
		}
		return nil
	}, nil
}

// stopAll signals every process below initPID until a pass finds all of
// them stopped (stopped: the pidfds of those signalled).
func stopAll(initPID int, stopped map[int]int, deadline time.Time, limit time.Duration) error {
	for {
		running := 0 // one still running, 0 when none
		for _, pid := range descendants(initPID) {
			_, sent := stopped[pid]
			if !mayRun("/proc", pid, sent, vforkHeld) {
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
			return nil
		}
		if time.Now().After(deadline) {
			_, sent := stopped[running]
			return fmt.Errorf("a process of the sandbox did not stop within %v (%s, signalled: %v)", limit, describeProc(running), sent)
		}
		time.Sleep(time.Millisecond)
	}
}

// settled returns the sandbox's threads' CPU times once two readings a
// few milliseconds apart agree (a thread that has just stopped may still
// be switching out), or an error at the deadline.
func settled(initPID int, deadline time.Time) (map[string]uint64, error) {
	prev, err := cpuTimes(initPID)
	for err == nil {
		time.Sleep(2 * time.Millisecond)
		var now map[string]uint64
		if now, err = cpuTimes(initPID); err == nil && maps.Equal(now, prev) {
			if len(now) > 0 && !slices.ContainsFunc(slices.Collect(maps.Values(now)), func(ns uint64) bool { return ns > 0 }) {
				// A kernel without CONFIG_SCHED_INFO reads 0 for all.
				return nil, errors.New("cannot tell whether the paused sandbox stays still: the kernel counts no CPU time in schedstat")
			}
			return now, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.New("the sandbox did not stay still once paused: a process of it keeps running")
		}
		prev = now
	}
	return nil, fmt.Errorf("cannot tell whether the paused sandbox stays still: %w", err)
}

// cpuTimes maps every live thread below initPID ("pid/tid") to its time
// on a CPU in nanoseconds (the first field of its schedstat). A thread
// that exits while paused has run: it leaves the map.
func cpuTimes(initPID int) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, pid := range descendants(initPID) {
		tids, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
		for _, dir := range tids {
			if st, err := statFields(dir + "/stat"); err == nil && strings.Contains("ZX", st[0]) {
				continue // exited: it runs no more, and the unpaused init may reap it
			}
			b, err := os.ReadFile(dir + "/schedstat")
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
				continue // gone: missing from the map, which then differs
			}
			if err != nil {
				return nil, err
			}
			f := strings.Fields(string(b))
			if len(f) == 0 {
				return nil, fmt.Errorf("%s/schedstat: empty", dir)
			}
			ns, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s/schedstat: %w", dir, err)
			}
			out[strconv.Itoa(pid)+"/"+filepath.Base(dir)] = ns
		}
	}
	return out, nil
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
// may still run: it is neither stopped nor dead, nor, once signalled
// (sent), a vfork parent held for good. The parent of a vfork child that
// the pause stopped before its exec waits for the child in an
// uninterruptible sleep that ends only when the child runs again, and it
// stops before it runs code of its own: SIGSTOP is pending for the
// process, or another of its threads has stopped. heldByVfork says whether
// pid has a stopped child sharing its memory. Any other uninterruptible
// wait counts as running, as it ends by itself (a write under way then
// lands before the pause is over). False when pid is gone.
func mayRun(proc string, pid int, sent bool, heldByVfork func(pid int) bool) bool {
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
		case st[0] == "D":
			waiting++
		default:
			return true
		}
	}
	if waiting == 0 {
		return false
	}
	return !sent || stopped == 0 && !stopPending(proc, pid) || !heldByVfork(pid)
}

// vforkHeld reports whether a child of pid that shares its memory (a
// vfork child, by kcmp) is stopped.
func vforkHeld(pid int) bool {
	kids, _ := childrenOf(pid)
	for _, kid := range kids {
		if !mayRun("/proc", kid, false, nil) && sameMemory(pid, kid) {
			return true
		}
	}
	return false
}

// sameMemory reports whether processes a and b share one address space
// (false when the kernel cannot tell: no kcmp, or no access).
func sameMemory(a, b int) bool {
	const kcmpVM = 1 // KCMP_VM
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(a), uintptr(b), kcmpVM, 0, 0, 0)
	return errno == 0 && r == 0
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
