//go:build linux

package linux

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// cgroups is a per-run cgroup (v2, where the host delegates one to sbx, or
// v1 controllers sbx may write as root) that bounds processes and memory.
type cgroups struct {
	v2      bool
	pidsDir string // where pids.max lives
	memDir  string // where the memory limit lives
	dirs    []string
}

// ownCgroup returns this process's cgroup path for a v1 controller, or for
// the v2 hierarchy when controller is "".
func ownCgroup(controller string) (string, bool) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if controller == "" && parts[0] == "0" && parts[1] == "" {
			return parts[2], true
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				return parts[2], true
			}
		}
	}
	return "", false
}

// cgroupDir creates a per-run directory under base/own for a controller
// and checks the controller's file is there.
func cgroupDir(base, own, name, probe string) (string, error) {
	dir := filepath.Join(base, own, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, probe)); err != nil {
		os.Remove(dir)
		return "", err
	}
	return dir, nil
}

// newCgroups creates the run's cgroups for the limits that need one. A
// limit that cannot be enforced is an ErrUnavailable error: never ignored.
func newCgroups(l pipeline.Limits, name string) (*cgroups, error) {
	if l.MaxProcs <= 0 && l.MaxMemory <= 0 {
		return nil, nil
	}
	c := &cgroups{}
	// cgroup v2, delegated: the unified hierarchy at /sys/fs/cgroup.
	if own, ok := ownCgroup(""); ok {
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			probe := "pids.max"
			if l.MaxProcs <= 0 {
				probe = "memory.max"
			}
			if dir, err := cgroupDir("/sys/fs/cgroup", own, name, probe); err == nil {
				if l.MaxMemory <= 0 || exists(filepath.Join(dir, "memory.max")) {
					c.v2, c.pidsDir, c.memDir, c.dirs = true, dir, dir, []string{dir}
				} else {
					os.Remove(dir)
				}
			}
		}
	}
	if !c.v2 {
		// cgroup v1 controllers (as root, or where delegated).
		if l.MaxProcs > 0 {
			own, ok := ownCgroup("pids")
			dir, err := "", errors.New("no pids controller")
			if ok {
				dir, err = cgroupDir("/sys/fs/cgroup/pids", own, name, "pids.max")
			}
			if err != nil {
				return nil, fmt.Errorf("%w: cannot enforce the process limit (--max-procs, sandbox.limits.maxProcs) on this host: no writable pids cgroup (delegated cgroup v2, or v1 as root): %v", pipeline.ErrUnavailable, err)
			}
			c.pidsDir, c.dirs = dir, append(c.dirs, dir)
		}
		if l.MaxMemory > 0 {
			own, ok := ownCgroup("memory")
			dir, err := "", errors.New("no memory controller")
			if ok {
				dir, err = cgroupDir("/sys/fs/cgroup/memory", own, name, "memory.limit_in_bytes")
			}
			if err != nil {
				c.remove()
				return nil, fmt.Errorf("%w: cannot enforce the memory limit (--max-memory, sandbox.limits.maxMemory) on this host: no writable memory cgroup (delegated cgroup v2, or v1 as root): %v", pipeline.ErrUnavailable, err)
			}
			c.memDir, c.dirs = dir, append(c.dirs, dir)
		}
	}
	write := func(dir, file, v string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
			c.remove()
			return fmt.Errorf("%w: cgroup %s: %v", pipeline.ErrUnavailable, file, err)
		}
		return nil
	}
	if l.MaxProcs > 0 {
		if err := write(c.pidsDir, "pids.max", strconv.Itoa(l.MaxProcs)); err != nil {
			return nil, err
		}
	}
	if l.MaxMemory > 0 {
		file := "memory.limit_in_bytes"
		if c.v2 {
			file = "memory.max"
			write(c.memDir, "memory.swap.max", "0") // best effort: no swap to escape to
		}
		if err := write(c.memDir, file, strconv.FormatInt(l.MaxMemory, 10)); err != nil {
			return nil, err
		}
		if !c.v2 && exists(filepath.Join(c.memDir, "memory.memsw.limit_in_bytes")) {
			write(c.memDir, "memory.memsw.limit_in_bytes", strconv.FormatInt(l.MaxMemory, 10))
		}
	}
	return c, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// add moves a process (and so everything it starts later) into the cgroups.
func (c *cgroups) add(pid int) error {
	for _, d := range c.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
	}
	return nil
}

// counter reads "key N" from a cgroup file.
func counter(file, key string) int64 {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// hit names the limit that was reached, if any.
func (c *cgroups) hit(l pipeline.Limits) string {
	if c.pidsDir != "" && counter(filepath.Join(c.pidsDir, "pids.events"), "max") > 0 {
		return fmt.Sprintf("process limit (--max-procs %d)", l.MaxProcs)
	}
	if c.memDir != "" {
		var oom int64
		if c.v2 {
			oom = counter(filepath.Join(c.memDir, "memory.events"), "oom_kill")
		} else {
			// Not memory.failcnt: it counts every reclaim at the limit,
			// which is normal for page cache and stops nothing.
			oom = counter(filepath.Join(c.memDir, "memory.oom_control"), "oom_kill")
		}
		if oom > 0 {
			return fmt.Sprintf("memory limit (--max-memory %d bytes)", l.MaxMemory)
		}
	}
	return ""
}

// remove deletes the run's cgroups once their processes are gone.
func (c *cgroups) remove() {
	if c == nil {
		return
	}
	for _, d := range c.dirs {
		// The last processes may still be exiting: retry for up to 1 s.
		for i := 0; i < 200; i++ {
			if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
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
