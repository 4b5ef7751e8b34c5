//go:build linux

package linux

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// fakeV2 plays a cgroup v2 hierarchy by the kernel's rules, as far as sbx
// depends on them: a cgroup offers the controllers its parent enabled;
// a cgroup other than the root may enable controllers for its children
// only while no process is in it, and no process may join a cgroup that
// has (EBUSY); files are written by their cgroup's owner or root; moving a
// process needs write access to the destination and to the common
// ancestor of source and destination; a cgroup with processes or
// children cannot be removed. Every change is logged in order.
type fakeV2 struct {
	nodes map[string]*fakeCG
	euid  int
	log   []string
}

type fakeCG struct {
	owner   int
	subtree []string
	procs   []int
	files   map[string]string
}

func newFakeV2(euid int) *fakeV2 {
	f := &fakeV2{nodes: map[string]*fakeCG{}, euid: euid}
	f.nodes["/"] = &fakeCG{subtree: []string{"cpu", "io", "memory", "pids"}, files: map[string]string{}}
	return f
}

// add makes a cgroup (with its ancestors) owned by owner, enabling
// subtree for its children and holding procs.
func (f *fakeV2) add(p string, owner int, subtree string, procs ...int) {
	if p != "/" && f.nodes[path.Dir(p)] == nil {
		f.add(path.Dir(p), 0, "memory pids")
	}
	n := f.nodes[p]
	if n == nil {
		n = &fakeCG{files: map[string]string{}}
		f.nodes[p] = n
	}
	n.owner, n.subtree = owner, strings.Fields(subtree)
	for _, pid := range procs {
		f.move(pid, p)
	}
}

func (f *fakeV2) split(file string) (*fakeCG, string, string) {
	dir, base := path.Dir(file), path.Base(file)
	return f.nodes[dir], dir, base
}

func (f *fakeV2) offered(dir string) []string {
	if dir == "/" {
		return f.nodes["/"].subtree
	}
	return f.nodes[path.Dir(dir)].subtree
}

func (f *fakeV2) where(pid int) string {
	for p, n := range f.nodes {
		if slices.Contains(n.procs, pid) {
			return p
		}
	}
	return ""
}

func (f *fakeV2) move(pid int, to string) {
	if from := f.where(pid); from != "" {
		n := f.nodes[from]
		n.procs = slices.DeleteFunc(n.procs, func(p int) bool { return p == pid })
	}
	f.nodes[to].procs = append(f.nodes[to].procs, pid)
}

func (f *fakeV2) self(pid int) func() ([]byte, error) {
	return func() ([]byte, error) { return []byte("0::" + f.where(pid) + "\n"), nil }
}

func (f *fakeV2) ReadFile(file string) ([]byte, error) {
	n, dir, base := f.split(file)
	if n == nil {
		return nil, fs.ErrNotExist
	}
	switch base {
	case "cgroup.controllers":
		return []byte(strings.Join(f.offered(dir), " ")), nil
	case "cgroup.subtree_control":
		return []byte(strings.Join(n.subtree, " ")), nil
	case "cgroup.procs":
		var s []string
		for _, p := range n.procs {
			s = append(s, strconv.Itoa(p))
		}
		return []byte(strings.Join(s, "\n")), nil
	}
	ctrl, _, _ := strings.Cut(base, ".")
	if dir == "/" || !slices.Contains(f.offered(dir), ctrl) {
		return nil, fs.ErrNotExist
	}
	return []byte(n.files[base]), nil
}

func (f *fakeV2) may(n *fakeCG) bool { return f.euid == 0 || n.owner == f.euid }

func (f *fakeV2) WriteFile(file string, data []byte) error {
	n, dir, base := f.split(file)
	if n == nil {
		return fs.ErrNotExist
	}
	if !f.may(n) {
		return fs.ErrPermission
	}
	switch base {
	case "cgroup.subtree_control":
		if dir != "/" && len(n.procs) > 0 {
			return syscall.EBUSY
		}
		for _, t := range strings.Fields(string(data)) {
			if !slices.Contains(f.offered(dir), t[1:]) {
				return fs.ErrNotExist
			}
			if !slices.Contains(n.subtree, t[1:]) {
				n.subtree = append(n.subtree, t[1:])
			}
		}
	case "cgroup.procs":
		pid, _ := strconv.Atoi(string(data))
		from := f.where(pid)
		common := from
		for !strings.HasPrefix(dir+"/", strings.TrimSuffix(common, "/")+"/") {
			common = path.Dir(common)
		}
		if !f.may(f.nodes[common]) {
			return fs.ErrPermission
		}
		if dir != "/" && len(n.subtree) > 0 {
			return syscall.EBUSY
		}
		f.move(pid, dir)
	default:
		if _, err := f.ReadFile(file); err != nil {
			return err
		}
		n.files[base] = string(data)
	}
	f.log = append(f.log, fmt.Sprintf("write %s %s", file, data))
	return nil
}

func (f *fakeV2) Mkdir(p string) error {
	parent := f.nodes[path.Dir(p)]
	switch {
	case parent == nil:
		return fs.ErrNotExist
	case f.nodes[p] != nil:
		return fs.ErrExist
	case !f.may(parent):
		return fs.ErrPermission
	}
	f.nodes[p] = &fakeCG{owner: f.euid, files: map[string]string{}}
	f.log = append(f.log, "mkdir "+p)
	return nil
}

func (f *fakeV2) Remove(p string) error {
	n := f.nodes[p]
	if n == nil {
		return fs.ErrNotExist
	}
	if len(n.procs) > 0 {
		return syscall.EBUSY
	}
	for q := range f.nodes {
		if q != p && path.Dir(q) == p {
			return syscall.EBUSY
		}
	}
	delete(f.nodes, p)
	f.log = append(f.log, "rmdir "+p)
	return nil
}

const (
	sbxPID    = 4242
	cmdPID    = 4343
	shellPID  = 4141
	userUID   = 1000
	userScope = "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope"
)

// TestCgroupV2 runs the cgroup v2 logic against a hierarchy that plays the
// kernel (this machine binds pids and memory to cgroup v1, and a test must
// not change the host's mounts): what sbx writes, in which order, for the
// delegated scope, the hand-made delegation a CI runner can do, root in a
// busy service, and the refusals.
func TestCgroupV2(t *testing.T) {
	both := pipeline.Limits{MaxProcs: 64, MaxMemory: 1 << 20}
	tests := []struct {
		name   string
		euid   int
		setup  func(f *fakeV2)
		limits pipeline.Limits
		want   []string // the log, "R" standing for the run's cgroup
		err    string
	}{
		{"delegated scope (systemd-run --user --scope -p Delegate=yes)", userUID,
			func(f *fakeV2) { f.add(userScope, userUID, "", sbxPID) }, both,
			[]string{"mkdir " + userScope + "/sbx-supervisor", "write " + userScope + "/sbx-supervisor/cgroup.procs 4242",
				"write " + userScope + "/cgroup.subtree_control +pids +memory", "mkdir " + userScope + "/R",
				"write " + userScope + "/R/pids.max 64", "write " + userScope + "/R/memory.swap.max 0", "write " + userScope + "/R/memory.max 1048576",
				"write " + userScope + "/R/cgroup.procs 4343", "rmdir " + userScope + "/R"}, ""},
		{"hand-delegated cgroup of a CI runner, process limit only", userUID,
			func(f *fakeV2) { f.add("/sbx-ci", userUID, "", sbxPID) }, pipeline.Limits{MaxProcs: 8},
			[]string{"mkdir /sbx-ci/sbx-supervisor", "write /sbx-ci/sbx-supervisor/cgroup.procs 4242",
				"write /sbx-ci/cgroup.subtree_control +pids", "mkdir /sbx-ci/R", "write /sbx-ci/R/pids.max 8",
				"write /sbx-ci/R/cgroup.procs 4343", "rmdir /sbx-ci/R"}, ""},
		{"root in a service with other processes", 0,
			func(f *fakeV2) { f.add("/system.slice/runner.service", 0, "", shellPID, sbxPID) }, both,
			[]string{"mkdir /sbx", "write /sbx/cgroup.subtree_control +pids +memory", "mkdir /sbx/R",
				"write /sbx/R/pids.max 64", "write /sbx/R/memory.swap.max 0", "write /sbx/R/memory.max 1048576",
				"write /sbx/R/cgroup.procs 4343", "rmdir /sbx/R"}, ""},
		{"a user's session scope, not delegated", userUID,
			func(f *fakeV2) { f.add("/user.slice/user-1000.slice/session-1.scope", 0, "", shellPID, sbxPID) }, both,
			nil, "session-1.scope"},
		{"a delegated scope holding the shell too", userUID,
			func(f *fakeV2) { f.add(userScope, userUID, "", shellPID, sbxPID) }, both,
			nil, "holds other processes (4141)"},
		{"memory not enabled by the parent", userUID,
			func(f *fakeV2) { f.add(path.Dir(userScope), 0, "pids"); f.add(userScope, userUID, "", sbxPID) }, both,
			nil, "does not offer the memory controller"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeV2(tt.euid)
			tt.setup(f)
			h := cgroupHost{fs: f, root: "/", self: f.self(sbxPID), pid: sbxPID, euid: tt.euid}
			c, err := h.newCgroups(tt.limits, "R")
			if tt.err != "" {
				if err == nil || !errors.Is(err, pipeline.ErrUnavailable) || !strings.Contains(err.Error(), tt.err) ||
					!strings.Contains(err.Error(), "systemd-run --user --scope -p Delegate=yes") {
					t.Fatalf("error %v, want ErrUnavailable with %q and the fix", err, tt.err)
				}
				if len(f.log) != 0 || f.where(sbxPID) == "" || strings.HasSuffix(f.where(sbxPID), supervisorLeaf) {
					t.Fatalf("a refusal changed the hierarchy: %q, sbx in %s", f.log, f.where(sbxPID))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f.nodes[f.where(sbxPID)].procs = append(f.nodes[f.where(sbxPID)].procs, cmdPID) // the command starts in sbx's cgroup
			if err := c.add(cmdPID); err != nil {
				t.Fatal(err)
			}
			if got := f.where(cmdPID); got != c.dirs[0] {
				t.Fatalf("command in %s, want %s", got, c.dirs[0])
			}
			f.nodes[c.dirs[0]].procs = nil // the command exits
			c.remove()
			want := strings.Join(tt.want, "\n")
			if got := strings.Join(f.log, "\n"); got != want {
				t.Fatalf("writes:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// A second run of the same sbx (serve, mcp) finds itself in the supervisor
// leaf: the run's cgroup goes beside it, with nothing moved or enabled
// again; a limit reached is reported from memory.events.
func TestCgroupV2SecondRun(t *testing.T) {
	f := newFakeV2(userUID)
	f.add(userScope, userUID, "", sbxPID)
	h := cgroupHost{fs: f, root: "/", self: f.self(sbxPID), pid: sbxPID, euid: userUID}
	l := pipeline.Limits{MaxProcs: 64, MaxMemory: 1 << 20}
	first, err := h.newCgroups(l, "R1")
	if err != nil {
		t.Fatal(err)
	}
	first.remove()
	f.log = nil
	second, err := h.newCgroups(l, "R2")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"mkdir " + userScope + "/R2", "write " + userScope + "/R2/pids.max 64",
		"write " + userScope + "/R2/memory.swap.max 0", "write " + userScope + "/R2/memory.max 1048576"}
	if !slices.Equal(f.log, want) {
		t.Fatalf("second run wrote %q, want %q", f.log, want)
	}
	if second.hit(l) != "" {
		t.Fatal("a limit reported before any was reached")
	}
	// Killed for a limit above the run's (its own never reached): not
	// blamed on --max-memory.
	f.nodes[userScope+"/R2"].files["memory.events"] = "low 0\nhigh 0\nmax 0\noom 1\noom_kill 1\n"
	if got := second.hit(l); !strings.HasPrefix(got, "out of memory below the run's --max-memory 1M") {
		t.Fatalf("hit %q, want an out of memory below the run's limit", got)
	}
	f.nodes[userScope+"/R2"].files["memory.events"] = "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"
	if got := second.hit(l); got != "memory limit (--max-memory 1M)" {
		t.Fatalf("hit %q, want the memory limit", got)
	}
}

// On v1 an OOM kill is the run's memory limit only when the run's peak
// usage reached it (memory.failcnt stays 0 on this kernel).
func TestCgroupV1MemoryHit(t *testing.T) {
	l := pipeline.Limits{MaxMemory: 64 << 20}
	for _, tt := range []struct {
		name, peak, peakSw, oom, want string
	}{
		{"no kill", "67108864", "67108864", "oom_kill 0", ""},
		{"at the limit", "67108864", "1000", "oom_kill 1", "memory limit (--max-memory 64M)"},
		{"swap at the limit", "1000", "67108864", "oom_kill 1", "memory limit (--max-memory 64M)"},
		{"below it", "52428800", "52428800", "oom_kill 2", "out of memory below the run's --max-memory 64M"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeV2(0)
			f.add("/memory/R", 0, "")
			f.nodes["/memory/R"].files = map[string]string{"memory.limit_in_bytes": "67108864\n",
				"memory.max_usage_in_bytes": tt.peak + "\n", "memory.memsw.max_usage_in_bytes": tt.peakSw + "\n",
				"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\n" + tt.oom + "\n"}
			c := &cgroups{fs: f, memDir: "/memory/R"}
			if got := c.hit(l); !strings.HasPrefix(got, tt.want) || (tt.want == "") != (got == "") {
				t.Fatalf("hit %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSizeString(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{1023, "1023"}, {1024, "1K"}, {1536 << 10, "1536K"}, {64 << 20, "64M"}, {1 << 30, "1G"}, {3 << 40, "3T"}, {1<<30 + 1, "1073741825"}} {
		if got := sizeString(tt.n); got != tt.want {
			t.Errorf("sizeString(%d) = %q, want %q", tt.n, got, tt.want)
		}
		if back, err := pipeline.ParseSize(tt.want); err != nil || back != tt.n {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.want, back, err, tt.n)
		}
	}
}
