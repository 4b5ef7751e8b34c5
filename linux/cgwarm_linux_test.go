//go:build linux

package linux

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// lockedFS serialises a fake hierarchy's use by the warming goroutine
// and the test, and counts every write tried, refused ones too.
type lockedFS struct {
	mu    sync.Mutex
	f     *fakeV2
	tries map[string]int
}

func (l *lockedFS) ReadFile(p string) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.ReadFile(p)
}

func (l *lockedFS) WriteFile(p string, b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tries[p]++
	return l.f.WriteFile(p, b)
}

func (l *lockedFS) Mkdir(p string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Mkdir(p)
}

func (l *lockedFS) Remove(p string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Remove(p)
}

func (l *lockedFS) do(fn func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn()
}

// The writes that keep the attach lock ready move nothing: each writes
// sbx's own pid into the cgroup it is in, they stop once the command is
// moved, and where sbx may not write its own cgroup only one is tried.
func TestWarmAttachMovesNothing(t *testing.T) {
	tests := []struct {
		name    string
		euid    int
		setup   func(f *fakeV2)
		refused bool // sbx's own cgroup is not sbx's to write
		own     string
	}{
		{"delegated scope: sbx in its supervisor leaf", userUID,
			func(f *fakeV2) { f.add(userScope, userUID, "", sbxPID) }, false, userScope + "/" + supervisorLeaf},
		{"root in a service with other processes", 0,
			func(f *fakeV2) { f.add("/system.slice/runner.service", 0, "", shellPID, sbxPID) }, false, "/system.slice/runner.service"},
		{"own cgroup handed back to root after the run's was made", userUID,
			func(f *fakeV2) { f.add(userScope, userUID, "", sbxPID) }, true, userScope + "/" + supervisorLeaf},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeV2(tt.euid)
			tt.setup(f)
			fs := &lockedFS{f: f, tries: map[string]int{}}
			h := cgroupHost{fs: fs, root: "/", self: f.self(sbxPID), pid: sbxPID, euid: tt.euid}
			c, err := h.newCgroups(pipeline.Limits{MaxProcs: 64, MaxMemory: 1 << 20}, "R")
			if err != nil {
				t.Fatal(err)
			}
			self := tt.own + "/cgroup.procs"
			if c.selfProcs != self {
				t.Fatalf("own cgroup.procs %q, want %q", c.selfProcs, self)
			}
			if tt.refused {
				f.nodes[tt.own].owner = 0
			}
			start := len(f.log)
			clear(fs.tries) // newCgroups itself may have moved sbx into its leaf
			c.warmAttach()
			warm := func() (n int) { fs.do(func() { n = fs.tries[self] }); return n }
			deadline := time.Now().Add(5 * time.Second)
			for warm() < 3 && !tt.refused && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			fs.do(func() { f.nodes[tt.own].procs = append(f.nodes[tt.own].procs, cmdPID) })
			if err := c.add(cmdPID); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * attachWarmEvery) // a write under way lands
			n := warm()
			time.Sleep(10 * attachWarmEvery)
			switch {
			case warm() != n:
				t.Fatalf("writes went on after the command was moved: %d, then %d", n, warm())
			case tt.refused && n != 1:
				t.Fatalf("%d writes tried into a cgroup sbx may not write, want 1", n)
			case !tt.refused && n < 3:
				t.Fatalf("only %d writes in 5 s", n)
			}
			fs.do(func() {
				if where := f.where(sbxPID); where != tt.own {
					t.Errorf("sbx moved to %s", where)
				}
				if where := f.where(cmdPID); where != c.dirs[0] {
					t.Errorf("command in %s, want %s", where, c.dirs[0])
				}
				for _, w := range f.log[start:] {
					if w != "write "+self+" 4242" && w != "write "+c.dirs[0]+"/cgroup.procs 4343" {
						t.Errorf("unexpected change %q", w)
					}
				}
			})
		})
	}
}

// On cgroup v1 the writes go to sbx's own cgroup in the hierarchy of the
// run's first cgroup.
func TestSelfProcsV1(t *testing.T) {
	self := func() ([]byte, error) {
		return []byte("9:name=systemd:/\n8:pids:/a\n4:memory:/b/c\n0::/\n"), nil
	}
	h := cgroupHost{root: "/sys/fs/cgroup", self: self}
	for _, tt := range []struct {
		c    *cgroups
		want string
	}{
		{&cgroups{pidsDir: "/x", memDir: "/y"}, "/sys/fs/cgroup/pids/a/cgroup.procs"},
		{&cgroups{memDir: "/y"}, "/sys/fs/cgroup/memory/b/c/cgroup.procs"},
		{&cgroups{v2: true, pidsDir: "/x"}, "/sys/fs/cgroup/cgroup.procs"},
	} {
		if got := h.selfProcs(tt.c); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.c, got, tt.want)
		}
	}
}

// On this host's kernel: while the writes run, sbx stays in its cgroup
// and a process moved into the run's cgroup is there.
func TestWarmAttachOnTheHost(t *testing.T) {
	c, err := newCgroups(pipeline.Limits{MaxProcs: 16}, fmt.Sprintf("sbx-warm-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no cgroup for the test: %v", err)
		}
		t.Skipf("no cgroup for the test: %v", err)
	}
	defer c.remove()
	before, _ := os.ReadFile("/proc/self/cgroup")
	c.warmAttach()
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	time.Sleep(20 * time.Millisecond)
	if err := c.add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile("/proc/self/cgroup")
	if string(after) != string(before) {
		t.Fatalf("sbx's cgroups changed:\n%s\nto\n%s", before, after)
	}
	procs, _ := os.ReadFile(filepath.Join(c.pidsDir, "cgroup.procs"))
	if !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("the process is not in the run's cgroup: %q", procs)
	}
}
