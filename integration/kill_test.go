//go:build linux

package integration

import (
	"bufio"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKillCampaign SIGKILLs sbx at random moments of its start-up (and,
// for half the runs, within its first 100 ms) and checks that nothing of
// the run outlives the clean-up: no process, no run or proxy directory, no
// mount, no cgroup, and the workspace holds only what the command wrote.
func TestKillCampaign(t *testing.T) {
	e := newEnv(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	tmp := t.TempDir()
	cgBefore := sbxCgroups(t)
	const runs = 40
	for i := range runs {
		delay := time.Duration(rng.IntN(100)) * time.Millisecond
		if i%2 == 1 {
			delay = time.Duration(rng.IntN(400)) * time.Millisecond
		}
		args := []string{"run", "-c", "echo x > f" + string(rune('a'+i%26)) + "; sleep 30"}
		if i%3 == 0 {
			args = append([]string{"run", "--max-procs", "256"}, args[1:]...)
		}
		cmd := exec.Command(sbxBin, args...)
		cmd.Dir, cmd.Env = e.ws, append(e.environ(), "TMPDIR="+tmp)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if !waitFor(10*time.Second, func() bool { return len(SbxPids(sbxBin)) == 0 }) {
			t.Fatalf("run %d (killed after %s): processes left: %s", i, delay, cmdlines(SbxPids(sbxBin)))
		}
	}
	if r := e.sbx("doctor", "--clean", "--json"); r.code != 0 {
		t.Fatalf("doctor --clean: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if left := SbxPids(sbxBin); len(left) > 0 {
		t.Errorf("processes left: %s", cmdlines(left))
	}
	if runs, _ := os.ReadDir(filepath.Join(e.home, ".local/state/sbx/runs")); len(runs) != 0 {
		t.Errorf("run directories left: %v", runs)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in TMPDIR: %v", ents)
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), e.home) || strings.Contains(string(mi), e.ws) {
		t.Errorf("mounts left on the host:\n%s", mi)
	}
	if after := sbxCgroups(t); !slices.Equal(after, cgBefore) {
		t.Errorf("cgroups left: %v (before: %v)", after, cgBefore)
	}
	ents, _ := os.ReadDir(e.ws)
	for _, en := range ents {
		if len(en.Name()) != 2 || en.Name()[0] != 'f' {
			t.Errorf("in the workspace: %s (only the command's f? files may be)", en.Name())
		}
	}
}

func cmdlines(pids []int) string {
	var b strings.Builder
	for _, p := range pids {
		data, _ := os.ReadFile(filepath.Join("/proc", itoa(p), "cmdline"))
		stat, _ := os.ReadFile(filepath.Join("/proc", itoa(p), "stat"))
		b.WriteString("\n  " + itoa(p) + ": " + strings.ReplaceAll(string(data), "\x00", " ") + " [" + string(stat) + "]")
	}
	return b.String()
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestCleanFindsOrphansWithoutTheirState: a job killed whole (sbx and its
// helper, which has a process group of its own, with SIGKILL)
// leaves its run directory, its proxy directory and its cgroups; with the
// state directory removed as well (a home wiped), nothing names the last
// two any more, and only sbx doctor --clean's sweep finds them: by the
// owner the proxy directory names, by the pid in the cgroup's name (and
// its age).
func TestCleanFindsOrphansWithoutTheirState(t *testing.T) {
	e := newEnv(t)
	tmp := t.TempDir()
	cgBefore := sbxCgroups(t)
	cmd := exec.Command(sbxBin, "run", "--max-procs", "256", "-c", "echo ready; sleep 30.5151")
	cmd.Dir, cmd.Env = e.ws, append(e.environ(), "TMPDIR="+tmp)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !bufio.NewScanner(stdout).Scan() {
		t.Fatal("no ready line")
	}
	// Stopped first, sbx cannot see its helper die.
	syscall.Kill(cmd.Process.Pid, syscall.SIGSTOP)
	for _, pid := range PidsWith("__sbx_tx") {
		if procParent(pid) == cmd.Process.Pid {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if !waitFor(10*time.Second, func() bool { return len(PidsWith("30.5151")) == 0 }) {
		t.Fatalf("processes left: %v", PidsWith("30.5151"))
	}
	nets, _ := filepath.Glob(filepath.Join(tmp, "sbx-net-*"))
	cgs := sbxCgroups(t)
	if len(nets) == 0 || slices.Equal(cgs, cgBefore) {
		t.Fatalf("the killed job left no proxy directory (%v) or no cgroup (%v): nothing to test", nets, cgs)
	}
	if err := os.RemoveAll(filepath.Join(e.home, ".local/state/sbx")); err != nil {
		t.Fatal(err)
	}
	// A dead run's cgroup is taken for an orphan once it is 10 minutes
	// old (a younger one may be a run being set up in another pid
	// namespace): this one is made older.
	old := time.Now().Add(-time.Hour)
	for _, cg := range cgs {
		if !slices.Contains(cgBefore, cg) {
			if err := os.Chtimes(cg, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := e.sbxEnv([]string{"TMPDIR=" + tmp}, "doctor", "--clean", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"orphans"`) {
		t.Fatalf("doctor --clean: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in TMPDIR: %v", ents)
	}
	if after := sbxCgroups(t); !slices.Equal(after, cgBefore) {
		t.Errorf("cgroups left: %v (before: %v)", after, cgBefore)
	}
}
