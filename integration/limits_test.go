//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireCgroupLimits skips (fails in CI) when this host cannot give sbx a
// cgroup for process and memory limits.
func requireCgroupLimits(t *testing.T, e *env) {
	t.Helper()
	r := e.sbx("run", "--max-procs", "64", "--max-memory", "256M", "--", "true")
	if r.code == 0 {
		return
	}
	if inCI() {
		t.Fatalf("cgroup limits unavailable in CI: %s", r.stderr)
	}
	t.Skipf("cgroup limits unavailable on this host: %s", r.stderr)
}

// sbxCgroups lists the per-run cgroups sbx left on the host.
func sbxCgroups(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"/sys/fs/cgroup/sbx-*", "/sys/fs/cgroup/*/sbx-*", "/sys/fs/cgroup/*/*/sbx-*"} {
		m, _ := filepath.Glob(pat)
		out = append(out, m...)
	}
	return out
}

func hostProcs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range ents {
		if _, err := strconv.Atoi(d.Name()); err == nil {
			n++
		}
	}
	return n
}

func TestForkBombStaysUnderProcessLimit(t *testing.T) {
	e := newEnv(t)
	requireCgroupLimits(t, e)
	before := hostProcs(t)
	cgBefore := sbxCgroups(t)
	// Watch the run's pids cgroup from outside while the bomb goes off
	// (-1: no cgroup seen).
	w := WatchPeak(func() int {
		peak := -1
		for _, d := range sbxCgroups(t) {
			b, err := os.ReadFile(filepath.Join(d, "pids.current"))
			if err != nil {
				continue
			}
			n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			peak = max(peak, n)
		}
		return peak
	})
	start := time.Now()
	bombed := make(chan result, 1)
	go func() {
		bombed <- e.sh(`echo before > kept.txt; bomb() { bomb | bomb & }; bomb 2>/dev/null; sleep 30`, "--max-procs", "40", "--timeout", "4s")
	}()
	// While the bomb is at its limit, the host (and sbx) still answer: a
	// second sandbox runs.
	full := waitFor(3*time.Second, func() bool { return w.Peak() >= 40 })
	if !full {
		t.Log("the bomb did not reach 40 processes within 3 s; checking a second run anyway")
	}
	t0 := time.Now()
	if other := e.sh("echo alive"); other.stdout != "alive\n" {
		t.Errorf("a second sandbox during the bomb: exit %d, %q %q", other.code, other.stdout, other.stderr)
	} else {
		t.Logf("a second sandbox answered in %s during the bomb", time.Since(t0).Round(time.Millisecond))
	}
	r := <-bombed
	elapsed := time.Since(start)
	peak := w.Stop()
	if r.code != 124 {
		t.Errorf("exit %d, want 124 (the wall clock ends the bomb); stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "process limit (--max-procs 40)") {
		t.Errorf("stderr does not name the process limit:\n%s", r.stderr)
	}
	if elapsed > 30*time.Second {
		t.Errorf("sbx took %s to come back from a fork bomb", elapsed)
	}
	if peak < 1 || peak > 40 {
		t.Errorf("pids seen from outside: peak %d, want 1 to 40 (-1: the run's cgroup was never seen)", peak)
	}
	assertContent(t, e.path("kept.txt"), "before\n")
	// Everything is gone: processes and the run's cgroups.
	deadline := time.Now().Add(5 * time.Second)
	for hostProcs(t) > before+5 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if after := hostProcs(t); after > before+5 {
		t.Errorf("host processes: %d before, %d after the run", before, after)
	}
	// The run's cgroup is gone: a new one that is empty is left behind (a
	// new one with processes belongs to another sbx running meanwhile).
	leaked := func() []string {
		var out []string
		for _, d := range sbxCgroups(t) {
			procs, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if !slices.Contains(cgBefore, d) && err == nil && len(strings.TrimSpace(string(procs))) == 0 {
				out = append(out, d)
			}
		}
		return out
	}
	for len(leaked()) > 0 && time.Now().Before(deadline.Add(2*time.Second)) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := leaked(); len(left) > 0 {
		t.Errorf("cgroups left behind: %v", left)
	}
}

func TestMemoryBalloonStopped(t *testing.T) {
	e := newEnv(t)
	requireCgroupLimits(t, e)
	// tail keeps a line with no newline in memory: 1 GiB of zeros.
	r := e.sh(`echo before > kept.txt; head -c 1G /dev/zero | tail -n 1 > /dev/null; echo "tail: $?"`, "--max-memory", "64M", "--timeout", "30s")
	if !strings.Contains(r.stdout, "tail: 137") {
		t.Errorf("the balloon was not killed: stdout %q stderr:\n%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "memory limit (--max-memory 64M)") {
		t.Errorf("stderr does not name the memory limit:\n%s", r.stderr)
	}
	assertContent(t, e.path("kept.txt"), "before\n")
	// Page cache at the limit is reclaimed, not a limit reached: writing
	// and reading back more than the limit is fine and reports nothing.
	if r := e.sh(`head -c 150M /dev/zero > big && cat big > /dev/null && rm big && echo ok`, "--max-memory", "64M"); r.stdout != "ok\n" || strings.Contains(r.stderr, "limit") {
		t.Errorf("file I/O beyond --max-memory: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// sbx still answers after the OOM.
	if r := e.sh("echo alive"); r.stdout != "alive\n" {
		t.Errorf("after the balloon: %q %q", r.stdout, r.stderr)
	}
}

func TestCPUAndWallClockLimits(t *testing.T) {
	e := newEnv(t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	r := e.sh(`while :; do :; done`, "--max-cpu", "1s", "--timeout", "30s", "--audit", audit)
	if r.code != 128+24 { // SIGXCPU
		t.Errorf("busy loop under --max-cpu 1s: exit %d, want 152; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "CPU time (--max-cpu 1s)") {
		t.Errorf("stderr does not name the CPU limit:\n%s", r.stderr)
	}
	if b, _ := os.ReadFile(audit); !strings.Contains(string(b), `"event":"limit","limit":"CPU time (--max-cpu 1s)","exitCode":152`) {
		t.Errorf("audit log has no limit event:\n%s", b)
	}
	start := time.Now()
	r = e.sh(`while :; do :; done`, "--timeout", "1s")
	if r.code != 124 || !strings.Contains(r.stderr, "timed out after 1s (--timeout)") {
		t.Errorf("busy loop under --timeout 1s: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("--timeout 1s took %s", d)
	}
}

func TestOutputFloodCapped(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	r := e.sh(`yes sbx | head -c 50000000; echo done >&2`, "--max-output", "1000")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if len(r.stdout) != 1000 || !strings.HasPrefix(r.stdout, "sbx\nsbx\n") {
		t.Errorf("stdout is %d bytes, want the first 1000", len(r.stdout))
	}
	if !strings.Contains(r.stderr, "output limit (--max-output 1000 bytes): 49999") {
		t.Errorf("stderr does not say what was discarded:\n%s", r.stderr)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("a capped flood took %s", d)
	}
}

func TestTmpAndOpenFileLimits(t *testing.T) {
	e := newEnv(t)
	r := e.sh(`dd if=/dev/zero of=/tmp/fill bs=64k count=64 2>/dev/null; echo "dd: $?"; stat -c %s /tmp/fill; ulimit -n`,
		"--max-tmp", "1M", "--max-open-files", "32")
	want := "dd: 1\n1048576\n32\n"
	if r.stdout != want {
		t.Errorf("stdout %q, want %q; stderr:\n%s", r.stdout, want, r.stderr)
	}
	if !strings.Contains(r.stderr, "limit reached: the private /tmp is full (--max-tmp 1M)") {
		t.Errorf("stderr does not name the /tmp limit:\n%s", r.stderr)
	}
	// Under the limit, nothing is reported.
	if r := e.sh(`echo small > /tmp/x`, "--max-tmp", "1M"); r.code != 0 || strings.Contains(r.stderr, "limit") {
		t.Errorf("a small write under --max-tmp: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestLimitSettings(t *testing.T) {
	e := newEnv(t)
	r := e.sh(`ulimit -n`, "--settings", `{"sandbox":{"limits":{"maxOpenFiles":48}}}`)
	if r.stdout != "48\n" {
		t.Errorf("sandbox.limits.maxOpenFiles: %q %q", r.stdout, r.stderr)
	}
	r = e.sh(`ulimit -n`, "--settings", `{"sandbox":{"limits":{"maxOpenFiles":48}}}`, "--max-open-files", "40")
	if r.stdout != "40\n" {
		t.Errorf("a flag should win over settings: %q %q", r.stdout, r.stderr)
	}
	for _, bad := range []struct{ json, want string }{
		{`{"sandbox":{"limits":{"maxDisk":"a lot"}}}`, "sandbox.limits.maxDisk"},
		{`{"sandbox":{"limits":{"maxMemry":"1G"}}}`, "sandbox.limits.maxMemry"},
		{`{"sandbox":{"limits":{"maxMemory":"lots"}}}`, "sandbox.limits.maxMemory"},
		{`{"sandbox":{"limits":{"maxProcs":"many"}}}`, "sandbox.limits.maxProcs"},
	} {
		e.write("marker", "")
		r := e.sh(`rm marker`, "--settings", bad.json)
		if r.code == 0 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("%s: exit %d, stderr %q; want a refusal naming %s", bad.json, r.code, r.stderr, bad.want)
		}
		assertContent(t, e.path("marker"), "")
	}
}

func TestToolResultNamesTheLimit(t *testing.T) {
	e := newEnv(t)
	requireCgroupLimits(t, e)
	call := `{"type":"tool_use","id":"toolu_lim","name":"Bash","input":{"command":"for i in $(seq 60); do sleep 5 & done 2>/dev/null; wait"}}`
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	r := e.tool(call, "--max-procs", "10", "--mode", "bypassPermissions", "--audit", audit)
	if !strings.Contains(r.stdout, `"tool_use_id":"toolu_lim"`) || !strings.Contains(r.stdout, "limit reached: process limit (--max-procs 10)") {
		t.Errorf("tool_result:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(audit); !strings.Contains(string(b), `"event":"limit","limit":"process limit (--max-procs 10)"`) {
		t.Errorf("audit log has no limit event:\n%s", b)
	}
}

func TestStaleCgroupCleanedAfterSIGKILL(t *testing.T) {
	e := newEnv(t)
	requireCgroupLimits(t, e)
	before := len(sbxCgroups(t))
	cmd := e.startReady(nil, "run", "--max-procs", "64", "-c", "echo ready; sleep 60")
	if n := len(sbxCgroups(t)); n != before+1 {
		t.Errorf("%d sbx cgroups during the run, want %d", n, before+1)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// The sandbox dies with sbx; its cgroup stays until the next clean.
	var r result
	if !waitFor(10*time.Second, func() bool {
		r = e.sbx("doctor", "--clean", "--json")
		return len(sbxCgroups(t)) == before
	}) {
		t.Errorf("cgroups left after doctor --clean: %v\n%s", sbxCgroups(t), r.stdout)
	}
}
