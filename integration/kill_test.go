//go:build linux

package integration

import (
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
