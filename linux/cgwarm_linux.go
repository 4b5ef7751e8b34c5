//go:build linux && !sbxinner

package linux

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Moving a process into a cgroup (a write to cgroup.procs) takes the
// kernel's cgroup_threadgroup_rwsem for writing. Unless a hierarchy is
// mounted with favordynmods, that lock is a per-CPU rwsem whose writer
// first waits for an RCU grace period; a writer that comes within a grace
// period of the last one does not (the rwsem is still in its writer mode).
// The command's move into the run's cgroup is on a run's critical path
// (5–13 ms on this project's test VM, most of the cost of the limits), so
// from the run's launch until that move, sbx writes its own pid into the
// cgroup it is already in, every attachWarmEvery: a move that changes
// nothing, and keeps the lock in its writer mode. Measured on that VM: the
// command's move 9 ms → 0.03 ms.
const (
	attachWarmEvery = 2 * time.Millisecond
	// attachWarmFor bounds the warming of a run whose command never
	// comes to be moved (an init that cannot start).
	attachWarmFor = 5 * time.Second
)

// selfProcs returns the cgroup.procs file of the cgroup this process is
// in, in the hierarchy of the run's cgroups ("" when it cannot tell).
func (h cgroupHost) selfProcs(c *cgroups) string {
	controller := ""
	if !c.v2 {
		controller = "memory"
		if c.pidsDir != "" {
			controller = "pids"
		}
	}
	own, ok := h.own(controller)
	if !ok {
		return ""
	}
	return filepath.Join(h.root, controller, own, "cgroup.procs")
}

// warmAttach starts keeping the cgroup attach lock in its writer mode
// (see attachWarmEvery) until [cgroups.add] moves the command, the
// cgroups are removed, or attachWarmFor passed. Where sbx may not write
// its own cgroup's cgroup.procs, the first write fails and nothing more
// is tried; errors after the lock was taken (a cgroup v2 refusing the
// move) do not matter: the lock was taken.
func (c *cgroups) warmAttach() {
	if c == nil || c.selfProcs == "" {
		return
	}
	stop := make(chan struct{})
	var once sync.Once
	c.stopWarm = func() { once.Do(func() { close(stop) }) }
	pid := []byte(strconv.Itoa(c.selfPID))
	go func() {
		if err := c.fs.WriteFile(c.selfProcs, pid); errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) {
			return // not sbx's to write: the move waits as it did
		}
		tick := time.NewTicker(attachWarmEvery)
		defer tick.Stop()
		end := time.After(attachWarmFor)
		for {
			select {
			case <-stop:
				return
			case <-end:
				return
			case <-tick.C:
				c.fs.WriteFile(c.selfProcs, pid)
			}
		}
	}()
}

// endWarm stops warmAttach's writes (it does not wait for one under way).
func (c *cgroups) endWarm() {
	if c != nil && c.stopWarm != nil {
		c.stopWarm()
	}
}
