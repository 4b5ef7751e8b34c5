//go:build linux

package linux

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// CleanStale waits only for the merge of a run whose sbx was killed. A run
// of a live sbx (another session's, being set up or just ended and
// removed since the directory was listed) is skipped at once: before, a
// run directory without a record made every other sbx on the machine wait
// the whole bound (10 s per such directory, measured with two `sbx serve`
// sessions).
func TestCleanStaleSkipsLiveRuns(t *testing.T) {
	start, err := procStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	live := fmt.Sprintf("%d-%d-", os.Getpid(), start)
	dead := fmt.Sprintf("%d-%d-", os.Getpid(), start+1)
	cases := []struct {
		name, dir string
		record    bool
		old       bool // made setupGrace ago or more
		removed   bool // a dead run: cleaned up
	}{
		{"a live run being set up (no record)", live + "setup", false, false, false},
		{"a live run with its record", live + "recorded", true, false, false},
		{"a dead run without a record", dead + "dead", false, true, true},
		// Dead by its pid, but young: an sbx in another pid or time
		// namespace, before its lock and record.
		{"a run being set up in another namespace", dead + "young", false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			dir := filepath.Join(state, "runs", c.dir)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if c.record {
				if err := writeJSON(filepath.Join(dir, recordFile), record{PID: os.Getpid(), Start: start}); err != nil {
					t.Fatal(err)
				}
			}
			if c.old {
				then := time.Now().Add(-2 * setupGrace)
				os.Chtimes(dir, then, then)
			}
			done := cleanStaleAsync(state)
			var r cleanResult
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("CleanStale still waits after 20 s (bound: 1 h) for a run whose sbx lives")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			_, statErr := os.Stat(dir)
			if gone := os.IsNotExist(statErr); gone != c.removed {
				t.Errorf("run directory removed: %v, want %v (%v)", gone, c.removed, statErr)
			}
			if got := slices.Contains(r.rep.Runs, dir); got != c.removed {
				t.Errorf("reported as removed: %v, want %v (%q)", got, c.removed, r.rep.Runs)
			}
		})
	}
}

// cleanResult is what CleanStale returned.
type cleanResult struct {
	rep *CleanReport
	err error
}

// cleanStaleAsync runs CleanStale on state (a wait bound of an hour, no
// helper binary) and delivers its result.
func cleanStaleAsync(state string) <-chan cleanResult {
	done := make(chan cleanResult, 1)
	go func() {
		rep, err := CleanStale(context.Background(), state, "/nonexistent/sbx", time.Hour)
		done <- cleanResult{rep, err}
	}()
	return done
}

// childrenOf finds the children forked from any thread of a process, as
// the slower scan of every process's parent does, and fails for a process
// that is gone.
func TestChildrenOf(t *testing.T) {
	var want []int
	for i := 0; i < 4; i++ {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		want = append(want, cmd.Process.Pid)
	}
	got, err := childrenOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	byStat, err := childrenByStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	slices.Sort(got)
	slices.Sort(byStat)
	if !slices.Equal(got, want) || !slices.Equal(byStat, want) {
		t.Errorf("children %v (by stat %v), want %v", got, byStat, want)
	}
	if kids, err := childrenOf(1 << 30); err == nil {
		t.Errorf("a process that does not exist has children %v", kids)
	}
}

// What finishing a killed run did is said whole: what was applied, and
// how many changes were not, beside the lines that say which.
func TestStaleNotes(t *testing.T) {
	cases := []struct {
		name string
		m    MergeReport
		want []string
	}{
		{"nothing to do", MergeReport{}, nil},
		{"applied", MergeReport{Applied: 3}, []string{"an earlier run was killed (r); the merge of its writes was finished: 3 change(s) applied"}},
		{"lost", MergeReport{Lost: []string{"/w/a: the stage is gone"}}, []string{
			"an earlier run was killed (r); the merge of its writes was finished: 0 change(s) applied, 1 not (below)",
			"earlier run: LOST: a change could be neither applied nor saved: /w/a: the stage is gone"}},
		{"conflict", MergeReport{Applied: 1, Conflicts: []Conflict{{Path: "/w/b", Saved: "/s/b"}}}, []string{
			"an earlier run was killed (r); the merge of its writes was finished: 1 change(s) applied, 1 not (below)",
			"earlier run: conflict: /w/b changed on the host during the run; the host's version is kept, the command's is saved at /s/b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := staleNotes(&CleanReport{Merged: map[string]MergeReport{"/state/runs/r": c.m}})
			if !slices.Equal(got, c.want) {
				t.Errorf("got %q\nwant %q", got, c.want)
			}
		})
	}
}

// A process that exited and was not reaped is not alive: a run whose sbx
// or helper is a zombie (its parent never reaps, as a container's PID 1
// that is not an init) is finished at once, not waited for every time.
func TestAliveZombie(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read x")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start, err := procStart(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !alive(pid, start) {
		t.Fatal("a running process is not alive")
	}
	if alive(pid, start+1) {
		t.Error("another start time is alive")
	}
	in.Close() // sh exits; not reaped until Wait
	for i := 0; ; i++ {
		if _, st, err := procStat(pid); err == nil && st == 'Z' {
			break
		}
		if i == 500 {
			t.Fatal("the process never became a zombie")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if alive(pid, start) {
		t.Error("a zombie is alive")
	}
	cmd.Wait()
}

// Two sbx that list a dead run at once finish it once: the second waits
// for the first (its lock on the run directory) and then finds it gone,
// with nothing to report. Before, both finished it, and the second said
// "no helper record" for a run the first had removed.
func TestCleanStaleWaitsForAnotherFinisher(t *testing.T) {
	start, err := procStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	dir := filepath.Join(state, "runs", fmt.Sprintf("%d-%d-dead", os.Getpid(), start+1))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-2 * setupGrace) // dead, not being set up
	os.Chtimes(dir, then, then)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := cleanStaleAsync(state)
	select {
	case r := <-done:
		t.Fatalf("CleanStale did not wait for the other finisher's lock: %+v %v", r.rep, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := os.RemoveAll(dir); err != nil { // the other finisher's work
		t.Fatal(err)
	}
	unix.Close(fd)
	r := <-done
	if r.err != nil || len(r.rep.Runs) != 0 || len(r.rep.Errors) != 0 || len(r.rep.Notes) != 0 {
		t.Errorf("after the other finisher: %+v %v; want nothing done, nothing said", r.rep, r.err)
	}
}

// deadRuns finds a run whose sbx is gone, and not a live one; a killed
// run a clean-up already tried (and could not finish) no longer sends warm
// calls to a cold start, a new one does.
func TestDeadRuns(t *testing.T) {
	start, err := procStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	if got := deadRuns(state); got != nil {
		t.Errorf("no runs directory: dead runs %q", got)
	}
	live := fmt.Sprintf("%d-%d-live", os.Getpid(), start)
	os.MkdirAll(filepath.Join(state, "runs", live), 0o700)
	writeJSON(filepath.Join(state, "runs", live, recordFile), record{PID: os.Getpid(), Start: start})
	if got := deadRuns(state); got != nil {
		t.Errorf("a live run counts as dead: %q", got)
	}
	dead := fmt.Sprintf("%d-%d-dead", os.Getpid(), start)
	os.MkdirAll(filepath.Join(state, "runs", dead), 0o700)
	writeJSON(filepath.Join(state, "runs", dead, recordFile), record{PID: os.Getpid(), Start: start + 1})
	got := deadRuns(state)
	if !slices.Equal(got, []string{dead}) {
		t.Errorf("dead runs %q, want %q", got, dead)
	}
	var p warmPool
	if !p.untried(got) {
		t.Error("a killed run no clean-up tried does not count")
	}
	p.noteTried(got)
	if p.untried(got) {
		t.Error("a killed run a clean-up tried still counts")
	}
	if !p.untried(append(got, "other")) {
		t.Error("a new killed run beside a tried one does not count")
	}
}

// A run whose sbx or helper lives in another pid or time namespace has a
// pid and a start time that name no live process here: the lock it holds
// on its run directory (sbx) or its record (the helper) keeps it from a
// clean-up. Before, the next run or doctor --clean finished its merge
// mid-run and removed its directories.
func TestCleanStaleKeepsLockedRuns(t *testing.T) {
	start, err := procStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, lockOn := range []string{emptyFile, helperFile} {
		t.Run("lock on "+lockOn, func(t *testing.T) {
			state := t.TempDir()
			dir := filepath.Join(state, "runs", fmt.Sprintf("%d-%d-other", os.Getpid(), start+1))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			dead := record{PID: os.Getpid(), Start: start + 1}
			if err := writeJSON(filepath.Join(dir, recordFile), dead); err != nil {
				t.Fatal(err)
			}
			if err := writeJSON(filepath.Join(dir, helperFile), helperRecord{PID: os.Getpid(), Start: start + 1}); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, emptyFile), nil, 0o444); err != nil {
				t.Fatal(err)
			}
			f := holdLock(filepath.Join(dir, lockOn))
			if f == nil {
				t.Fatal("no lock")
			}
			defer f.Close()
			rep, err := CleanStale(context.Background(), state, "/nonexistent/sbx", 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, helperFile)); err != nil || slices.Contains(rep.Runs, dir) {
				t.Errorf("a locked run was cleaned: %v, %q", err, rep.Runs)
			}
			f.Close()
			if rep, err = CleanStale(context.Background(), state, "/nonexistent/sbx", 200*time.Millisecond); err == nil && !slices.Contains(rep.Runs, dir) {
				t.Errorf("unlocked, the dead run stays: %q", rep.Runs)
			}
		})
	}
}
