//go:build linux && !sbxinner

package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// cgroups is a per-run cgroup (v2, where the host delegates one to sbx, or
// v1 controllers sbx may write as root) that bounds processes and memory.
type cgroups struct {
	fs      cgroupFS
	v2      bool
	pidsDir string // where pids.max lives
	memDir  string // where the memory limit lives
	dirs    []string
	// selfProcs and selfPID are sbx's own cgroup.procs and pid, and
	// stopWarm ends their writes: see warmAttach.
	selfProcs string
	selfPID   int
	stopWarm  func()
}

// cgroupFS is the cgroup filesystem as the cgroup code uses it; tests
// give it a fake that plays the kernel's rules.
type cgroupFS interface {
	ReadFile(path string) ([]byte, error)
	WriteFile(path string, data []byte) error
	Mkdir(path string) error
	Remove(path string) error
}

// osFS is the real cgroup filesystem.
type osFS struct{}

func (osFS) ReadFile(p string) ([]byte, error)  { return os.ReadFile(p) }
func (osFS) WriteFile(p string, b []byte) error { return os.WriteFile(p, b, 0o644) }
func (osFS) Mkdir(p string) error               { return os.Mkdir(p, 0o755) }
func (osFS) Remove(p string) error              { return os.Remove(p) }

// cgroupHost is what the cgroup code reads of the host: the hierarchy's
// mount point and filesystem, this process's membership
// (/proc/self/cgroup), its pid and effective uid.
type cgroupHost struct {
	fs   cgroupFS
	root string
	self func() ([]byte, error)
	pid  int
	euid int
}

func realCgroupHost() cgroupHost {
	return cgroupHost{fs: osFS{}, root: "/sys/fs/cgroup", self: func() ([]byte, error) { return os.ReadFile("/proc/self/cgroup") },
		pid: os.Getpid(), euid: os.Geteuid()}
}

func (h cgroupHost) exists(p string) bool {
	_, err := h.fs.ReadFile(p)
	return err == nil
}

// supervisorLeaf is the sub-cgroup sbx moves itself into when its own
// cgroup holds no other process: cgroup v2 lets a cgroup enable
// controllers for its children only while no process is in it.
const supervisorLeaf = "sbx-supervisor"

// own returns this process's cgroup path for a v1 controller, or for the
// v2 hierarchy when controller is "".
func (h cgroupHost) own(controller string) (string, bool) {
	data, err := h.self()
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
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

// cgroupDir creates a per-run directory under parent and checks the
// controller's file is there.
func (h cgroupHost) cgroupDir(parent, name, probe string) (string, error) {
	dir := filepath.Join(parent, name)
	if err := h.fs.Mkdir(dir); err != nil {
		return "", err
	}
	if _, err := h.fs.ReadFile(filepath.Join(dir, probe)); err != nil {
		h.fs.Remove(dir)
		return "", err
	}
	return dir, nil
}

// newCgroups creates the run's cgroups for the limits that need one. A
// limit that cannot be enforced is an ErrUnavailable error: never ignored.
func newCgroups(l pipeline.Limits, name string) (*cgroups, error) {
	return realCgroupHost().newCgroups(l, name)
}

func (h cgroupHost) newCgroups(l pipeline.Limits, name string) (*cgroups, error) {
	if l.MaxProcs <= 0 && l.MaxMemory <= 0 {
		return nil, nil
	}
	var c *cgroups
	var err error
	if h.exists(filepath.Join(h.root, "cgroup.controllers")) {
		c, err = h.newV2(l, name)
	} else {
		c, err = h.newV1(l, name)
	}
	if err != nil {
		return nil, err
	}
	if err := c.setLimits(l); err != nil {
		c.remove()
		return nil, err
	}
	c.selfProcs, c.selfPID = h.selfProcs(c), h.pid
	return c, nil
}

// newV2 makes the run's cgroup in the unified hierarchy, below a cgroup
// that can enable the controllers for it (see [cgroupHost.v2Parent]).
func (h cgroupHost) newV2(l pipeline.Limits, name string) (*cgroups, error) {
	var need []string
	if l.MaxProcs > 0 {
		need = append(need, "pids")
	}
	if l.MaxMemory > 0 {
		need = append(need, "memory")
	}
	parent, err := h.v2Parent(need)
	if err == nil {
		var dir string
		if dir, err = h.cgroupDir(parent, name, need[0]+".max"); err == nil {
			return &cgroups{fs: h.fs, v2: true, pidsDir: dir, memDir: dir, dirs: []string{dir}}, nil
		}
	}
	return nil, fmt.Errorf("%w: cannot enforce %s on this host (cgroup v2): %v; run sbx as the only process of a cgroup delegated to you: "+
		"systemd-run --user --scope -p Delegate=yes sbx …, or see the README's \"Resource limits\"", pipeline.ErrUnavailable, limitNames(need), err)
}

func limitNames(need []string) string {
	var out []string
	for _, n := range need {
		if n == "pids" {
			out = append(out, "the process limit (--max-procs, sandbox.limits.maxProcs)")
		} else {
			out = append(out, "the memory limit (--max-memory, sandbox.limits.maxMemory)")
		}
	}
	return strings.Join(out, " and ")
}

// v2Parent returns the cgroup v2 directory the run's cgroup is made in,
// with the controllers in need enabled for its children: sbx's own cgroup
// (its parent when sbx already moved itself into [supervisorLeaf]); for
// root, where that fails, /sys/fs/cgroup/sbx.
func (h cgroupHost) v2Parent(need []string) (string, error) {
	own, ok := h.own("")
	if !ok {
		return "", errors.New("no cgroup v2 entry in /proc/self/cgroup")
	}
	p := filepath.Join(h.root, own)
	if filepath.Base(own) == supervisorLeaf {
		p = filepath.Dir(p)
	}
	err := h.enable(p, need, true)
	if err == nil || h.euid != 0 {
		return p, err
	}
	q := filepath.Join(h.root, "sbx")
	if merr := h.fs.Mkdir(q); merr != nil && !errors.Is(merr, os.ErrExist) {
		return "", fmt.Errorf("%v; and %v", err, merr)
	}
	if qerr := h.enable(q, need, false); qerr != nil {
		return "", fmt.Errorf("%v; and %v", err, qerr)
	}
	return q, nil
}

// enable makes the controllers in need available to p's children. When p
// holds processes (cgroup v2 then refuses) and the only one is sbx
// itself, sbx moves into p/sbx-supervisor first; other processes are not
// sbx's to move, and the error says so.
func (h cgroupHost) enable(p string, need []string, mayMove bool) error {
	offered, err := h.fs.ReadFile(filepath.Join(p, "cgroup.controllers"))
	if err != nil {
		return err
	}
	enabled, err := h.fs.ReadFile(filepath.Join(p, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	var todo []string
	for _, n := range need {
		if !slices.Contains(strings.Fields(string(offered)), n) {
			return fmt.Errorf("%s does not offer the %s controller (not delegated, or the parent has not enabled it)", p, n)
		}
		if !slices.Contains(strings.Fields(string(enabled)), n) {
			todo = append(todo, "+"+n)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	write := func() error {
		return h.fs.WriteFile(filepath.Join(p, "cgroup.subtree_control"), []byte(strings.Join(todo, " ")))
	}
	err = write()
	if err == nil {
		return nil
	}
	if !errors.Is(err, syscall.EBUSY) || !mayMove {
		return fmt.Errorf("enabling %s for the sub-cgroups of %s: %w", strings.Join(todo, " "), p, err)
	}
	if others := h.otherProcs(p); len(others) > 0 {
		return fmt.Errorf("%s holds other processes (%s), so it cannot enable controllers for sub-cgroups", p, strings.Join(others, " "))
	}
	leaf := filepath.Join(p, supervisorLeaf)
	if err := h.fs.Mkdir(leaf); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := h.fs.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(h.pid))); err != nil {
		return fmt.Errorf("moving sbx into %s: %w", leaf, err)
	}
	if err := write(); err != nil {
		return fmt.Errorf("enabling %s for the sub-cgroups of %s: %w", strings.Join(todo, " "), p, err)
	}
	return nil
}

// otherProcs lists the processes in p other than sbx itself.
func (h cgroupHost) otherProcs(p string) []string {
	data, _ := h.fs.ReadFile(filepath.Join(p, "cgroup.procs"))
	var out []string
	for _, f := range strings.Fields(string(data)) {
		if f != strconv.Itoa(h.pid) {
			out = append(out, f)
		}
	}
	return out
}

// newV1 makes the run's cgroups in the v1 pids and memory hierarchies
// (as root, or where delegated).
func (h cgroupHost) newV1(l pipeline.Limits, name string) (*cgroups, error) {
	c := &cgroups{fs: h.fs}
	for _, v := range []struct {
		on                bool
		controller, probe string
		dst               *string
	}{{l.MaxProcs > 0, "pids", "pids.max", &c.pidsDir}, {l.MaxMemory > 0, "memory", "memory.limit_in_bytes", &c.memDir}} {
		if !v.on {
			continue
		}
		own, ok := h.own(v.controller)
		dir, err := "", fmt.Errorf("no %s controller", v.controller)
		if ok {
			dir, err = h.cgroupDir(filepath.Join(h.root, v.controller, own), name, v.probe)
		}
		if err != nil {
			c.remove()
			return nil, fmt.Errorf("%w: cannot enforce %s on this host: no writable %s cgroup (delegated cgroup v2, or v1 as root): %v",
				pipeline.ErrUnavailable, limitNames([]string{v.controller}), v.controller, err)
		}
		*v.dst, c.dirs = dir, append(c.dirs, dir)
	}
	return c, nil
}

// setLimits writes the limits into the run's cgroups.
func (c *cgroups) setLimits(l pipeline.Limits) error {
	write := func(dir, file, v string) error {
		if err := c.fs.WriteFile(filepath.Join(dir, file), []byte(v)); err != nil {
			return fmt.Errorf("%w: cgroup %s: %v", pipeline.ErrUnavailable, file, err)
		}
		return nil
	}
	if l.MaxProcs > 0 {
		if err := write(c.pidsDir, "pids.max", strconv.Itoa(l.MaxProcs)); err != nil {
			return err
		}
	}
	if l.MaxMemory > 0 {
		file := "memory.limit_in_bytes"
		if c.v2 {
			file = "memory.max"
			write(c.memDir, "memory.swap.max", "0") // best effort: no swap to escape to
		}
		if err := write(c.memDir, file, strconv.FormatInt(l.MaxMemory, 10)); err != nil {
			return err
		}
		if !c.v2 && c.has(filepath.Join(c.memDir, "memory.memsw.limit_in_bytes")) {
			write(c.memDir, "memory.memsw.limit_in_bytes", strconv.FormatInt(l.MaxMemory, 10))
		}
	}
	return nil
}

func (c *cgroups) has(p string) bool {
	_, err := c.fs.ReadFile(p)
	return err == nil
}

// add moves a process (and so everything it starts later) into the cgroups.
func (c *cgroups) add(pid int) error {
	defer c.endWarm()
	for _, d := range c.dirs {
		if err := c.fs.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid))); err != nil {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
	}
	return nil
}

// counter reads "key N" from a cgroup file.
func (c *cgroups) counter(file, key string) int64 {
	data, err := c.fs.ReadFile(file)
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
	if c.pidsDir != "" && c.counter(filepath.Join(c.pidsDir, "pids.events"), "max") > 0 {
		return fmt.Sprintf("process limit (--max-procs %d)", l.MaxProcs)
	}
	if c.memDir != "" {
		// A kill counts only with the run's own limit reached (memory.max
		// on v2, the peak usage on v1): the OOM killer also kills in the
		// run's cgroup for a limit of a cgroup sbx itself runs in, or for
		// the machine's memory.
		var oom, atLimit int64
		if c.v2 {
			oom = c.counter(filepath.Join(c.memDir, "memory.events"), "oom_kill")
			atLimit = c.counter(filepath.Join(c.memDir, "memory.events"), "max")
		} else {
			// Not memory.failcnt: it counts every reclaim at the limit,
			// which is normal for page cache and stops nothing, and
			// this kernel (6.18) leaves it at 0 after an OOM kill at the
			// limit; the peak usage reaches the limit exactly.
			oom = c.counter(filepath.Join(c.memDir, "memory.oom_control"), "oom_kill")
			limit := c.number(filepath.Join(c.memDir, "memory.limit_in_bytes"))
			for _, peak := range []string{"memory.max_usage_in_bytes", "memory.memsw.max_usage_in_bytes"} {
				if limit > 0 && c.number(filepath.Join(c.memDir, peak)) >= limit {
					atLimit++
				}
			}
		}
		switch {
		case oom > 0 && atLimit > 0:
			return fmt.Sprintf("memory limit (--max-memory %s)", sizeString(l.MaxMemory))
		case oom > 0:
			return fmt.Sprintf("out of memory below the run's --max-memory %s: a memory limit of a cgroup sbx runs in, or the machine's memory, made the kernel kill a process of the sandbox", sizeString(l.MaxMemory))
		}
	}
	return ""
}

// number reads a file that holds one number (0 when it cannot be read).
func (c *cgroups) number(file string) int64 {
	data, err := c.fs.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// sizeString writes n bytes as ParseSize reads them: with the largest
// unit that divides n (1G, 512M, 1536K), else in bytes.
func sizeString(n int64) string {
	for _, u := range []struct {
		mult int64
		name string
	}{{1 << 40, "T"}, {1 << 30, "G"}, {1 << 20, "M"}, {1 << 10, "K"}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// remove deletes the run's cgroups once their processes are gone.
func (c *cgroups) remove() {
	if c == nil {
		return
	}
	c.endWarm()
	for _, d := range c.dirs {
		// The last processes may still be exiting: retry for up to 1 s.
		for i := 0; i < 200; i++ {
			if err := c.fs.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
