//go:build linux

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeHoldsSteady sends 1,000 Bash calls through one sbx serve: every
// call answers, joins its cgroup (the default limits hold: no "not
// enforced" warning), and the server's descriptors and memory stay flat.
func TestServeHoldsSteady(t *testing.T) {
	e := newEnv(t)
	requireCgroupLimits(t, e)
	srv := e.startServe()
	cmd, in, out, stderr := srv.cmd, srv.in, srv.out, srv.stderr
	const calls = 1000
	var fds, rss [2]int
	for i := range calls {
		fmt.Fprintf(in, `{"type":"tool_use","id":"c%d","name":"Bash","input":{"command":"echo %d"}}`+"\n", i, i)
		if !out.Scan() {
			t.Fatalf("call %d: no result (stderr %s)", i, stderr.String())
		}
		line := out.Text()
		if !strings.Contains(line, fmt.Sprintf(`"tool_use_id":"c%d","content":"%d\n"`, i, i)) {
			t.Fatalf("call %d: %s", i, line)
		}
		// Sampled once the next call's warm sandbox is launched: the same
		// state both times.
		switch i {
		case 99:
			time.Sleep(500 * time.Millisecond)
			fds[0], rss[0] = fdCount(cmd.Process.Pid), rssKiB(cmd.Process.Pid)
		case calls - 1:
			time.Sleep(500 * time.Millisecond)
			fds[1], rss[1] = fdCount(cmd.Process.Pid), rssKiB(cmd.Process.Pid)
		}
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve: %v: %s", err, stderr.String())
	}
	t.Logf("after 100 calls: %d fds, %d KiB; after %d: %d fds, %d KiB", fds[0], rss[0], calls, fds[1], rss[1])
	if fds[1] > fds[0] {
		t.Errorf("descriptors grew from %d to %d over %d calls", fds[0], fds[1], calls-100)
	}
	if rss[1] > rss[0]+16<<10 {
		t.Errorf("RSS grew from %d KiB to %d KiB over %d calls", rss[0], rss[1], calls-100)
	}
}

// sbx serve launches each call's sandbox ahead: its first call (the
// sandbox launched at start-up) and the next (launched after the first
// ended) are warm, and answer as a cold `sbx tool` does.
func TestServeCallsAreWarm(t *testing.T) {
	e := newEnv(t)
	srv := e.startServe("--debug")
	cmd, in, out, stderr := srv.cmd, srv.in, srv.out, srv.stderr
	const call = `{"type":"tool_use","id":"w","name":"Bash","input":{"command":"echo out; echo err >&2; exit 3"}}`
	var results []string
	for range 2 {
		time.Sleep(300 * time.Millisecond) // the caller thinks
		fmt.Fprintln(in, call)
		if !out.Scan() {
			t.Fatalf("no result: %s", stderr.String())
		}
		results = append(results, out.Text())
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v: %s", err, stderr.String())
	}
	if n := strings.Count(stderr.String(), "warm sandbox taken"); n != 2 {
		t.Errorf("%d warm calls of 2:\n%s", n, stderr.String())
	}
	cold := e.sbxIn(strings.NewReader(call), "tool")
	for _, r := range results {
		if r+"\n" != cold.stdout {
			t.Errorf("warm %s, cold %s", r, cold.stdout)
		}
	}
	if runs, _ := os.ReadDir(e.home + "/.local/state/sbx/runs"); len(runs) != 0 {
		t.Errorf("serve left runs behind: %v", runs)
	}
}

// The conflict clock of a warm call: a host change made just before the
// call, stamped finely (the file looked at, then changed again within the
// tick), is the command's starting point, not a conflict; a host change
// made while the command runs is one (the host's version kept, the
// command's saved aside).
func TestServeConflictClock(t *testing.T) {
	e := newEnv(t)
	srv := e.startServe()
	call := func(id, command string) string {
		t.Helper()
		b, _ := json.Marshal(command)
		fmt.Fprintf(srv.in, `{"type":"tool_use","id":%q,"name":"Bash","input":{"command":%s}}`+"\n", id, b)
		if !srv.out.Scan() {
			t.Fatalf("no result: %s", srv.stderr.String())
		}
		return srv.out.Text()
	}
	for i := range 10 {
		time.Sleep(100 * time.Millisecond) // the next sandbox is launched
		p := e.write("a.txt", "one\n")
		os.Stat(p)
		e.write("a.txt", "two\n")
		if res := call(fmt.Sprint("a", i), "echo sandbox >> a.txt"); strings.Contains(res, `"is_error":true`) {
			t.Fatalf("call %d after a host edit: %s", i, res)
		}
		assertContent(t, p, "two\nsandbox\n")
	}
	p := e.write("b.txt", "before\n")
	time.AfterFunc(300*time.Millisecond, func() { os.WriteFile(p, []byte("host\n"), 0o644) })
	res := call("b", "sleep 0.6; echo sandbox >> b.txt")
	if !strings.Contains(res, "conflict") {
		t.Errorf("a host edit during the run was not a conflict: %s", res)
	}
	assertContent(t, p, "host\n")
}

// server is a running sbx serve: its stdin, its stdout line by line (lines
// up to 1 MiB), its stderr (read it once the server has exited).
type server struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *strings.Builder
}

// startServe starts sbx serve with args in the workspace; it is killed
// when the test ends.
func (e *env) startServe(args ...string) *server {
	e.t.Helper()
	cmd := exec.Command(sbxBin, append([]string{"serve"}, args...)...)
	cmd.Dir, cmd.Env = e.ws, e.environ()
	in, err := cmd.StdinPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	srv := &server{cmd: cmd, in: in, stderr: &strings.Builder{}}
	cmd.Stderr = srv.stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cmd.Process.Kill() })
	srv.out = bufio.NewScanner(outPipe)
	srv.out.Buffer(make([]byte, 1<<20), 1<<20)
	return srv
}

func fdCount(pid int) int {
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(ents)
}

func rssKiB(pid int) int {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// SIGTERM ends sbx serve: a call under way is killed and still answered,
// and the warm sandbox is thrown away (no run directory is left).
func TestServeStopsOnSIGTERM(t *testing.T) {
	e := newEnv(t)
	srv := e.startServe()
	cmd, in := srv.cmd, srv.in
	time.Sleep(500 * time.Millisecond) // the warm sandbox is launched
	marker := fmt.Sprintf("30.%d", os.Getpid())
	fmt.Fprintf(in, `{"type":"tool_use","id":"s","name":"Bash","input":{"command":"echo started; echo err >&2; sleep %s"}}`+"\n", marker)
	if !waitFor(10*time.Second, func() bool { return len(PidsWith(marker)) > 0 }) {
		t.Fatal("the call's sleep did not start")
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	out := srv.out
	if !out.Scan() || !strings.Contains(out.Text(), `"tool_use_id":"s"`) || !strings.Contains(out.Text(), `"is_error":true`) {
		t.Errorf("the call under way was not answered: %q", out.Text())
	}
	// What the command wrote before it was stopped is in the answer.
	if !strings.Contains(out.Text(), `started\nerr`) {
		t.Errorf("the call's output is not in its answer: %q", out.Text())
	}
	if err := cmd.Wait(); err != nil || time.Since(start) > 10*time.Second {
		t.Errorf("serve after SIGTERM: %v after %s", err, time.Since(start))
	}
	if runs, _ := os.ReadDir(e.home + "/.local/state/sbx/runs"); len(runs) != 0 {
		t.Errorf("runs left behind: %v", runs)
	}
}

// SIGHUP (its terminal gone) ends sbx serve between calls as SIGTERM
// does: the warm sandbox is thrown away, nothing is left. Before, serve
// died of it and left the waiting sandbox's run and proxy directories.
func TestServeStopsOnSIGHUP(t *testing.T) {
	e := newEnv(t)
	srv := e.startServe()
	fmt.Fprintln(srv.in, `{"type":"tool_use","id":"a","name":"Bash","input":{"command":"true"}}`)
	if !srv.out.Scan() {
		t.Fatalf("no result: %s", srv.stderr)
	}
	time.Sleep(500 * time.Millisecond) // the next sandbox is launched
	netDirs := e.waitingNetDirs()
	srv.cmd.Process.Signal(syscall.SIGHUP)
	if err := srv.cmd.Wait(); err != nil {
		t.Errorf("serve after SIGHUP: %v", err)
	}
	e.assertSessionGone(netDirs)
}

// waitingNetDirs are the proxy directories of the runs in the state
// directory: a long-lived session's waiting sandbox's (there must be one).
func (e *env) waitingNetDirs() []string {
	e.t.Helper()
	records, _ := filepath.Glob(e.home + "/.local/state/sbx/runs/*/record.json")
	var netDirs []string
	for _, r := range records {
		var rec struct {
			NetDir string `json:"netDir"`
		}
		if b, err := os.ReadFile(r); err == nil && json.Unmarshal(b, &rec) == nil && rec.NetDir != "" {
			netDirs = append(netDirs, rec.NetDir)
		}
	}
	if len(netDirs) == 0 {
		e.t.Fatalf("no waiting sandbox with a proxy directory: %v", records)
	}
	return netDirs
}

// assertSessionGone checks, once a session's process has exited, that no
// run directory and none of netDirs is left.
func (e *env) assertSessionGone(netDirs []string) {
	e.t.Helper()
	if runs, _ := os.ReadDir(e.home + "/.local/state/sbx/runs"); len(runs) != 0 {
		e.t.Errorf("runs left behind: %v", runs)
	}
	for _, d := range netDirs {
		if _, err := os.Stat(d); err == nil {
			e.t.Errorf("the waiting sandbox's proxy directory %s is left", d)
		}
	}
}

// A long-lived session resolves its paths again for each call: a denyRead
// file that appears after sbx serve started is hidden from the next call
// (warm or not), as from a fresh sbx tool.
func TestServeHidesDenyReadThatAppears(t *testing.T) {
	e := newEnv(t)
	srv := e.startServe("--settings", `{"permissions":{"deny":["Read(./.env)"]}}`)
	cmd, in, out := srv.cmd, srv.in, srv.out
	// The name is built at run time: the gate cannot see it, the sandbox must.
	const call = `{"type":"tool_use","id":"r%d","name":"Bash","input":{"command":"f=.en; cat ${f}v || echo absent"}}`
	fmt.Fprintf(in, call+"\n", 1)
	if !out.Scan() || !strings.Contains(out.Text(), "absent") {
		t.Fatalf("first call: %q", out.Text())
	}
	e.write(".env", "API_KEY=sk-live-123\n")
	time.Sleep(300 * time.Millisecond)
	fmt.Fprintf(in, call+"\n", 2)
	if !out.Scan() || strings.Contains(out.Text(), "sk-live") {
		t.Errorf("a denyRead file made after the start was read: %q", out.Text())
	}
	in.Close()
	cmd.Wait()
}

// A denyRead file the host replaces (a rename over it, as git
// credential-store and editors do) detaches the sandbox's mount over it:
// a warm sandbox launched before the replacement is not used (its path
// would show the new file, real content and all), and a run during which
// it happened says so. Before, the next serve call printed the new file.
func TestReplacedDenyReadFile(t *testing.T) {
	e := newEnv(t)
	secret := filepath.Join(e.home, "secret.txt")
	replace := func(content string) {
		t.Helper()
		os.WriteFile(secret+".new", []byte(content), 0o600)
		if err := os.Rename(secret+".new", secret); err != nil {
			t.Fatal(err)
		}
	}
	replace("OLD-SECRET\n")
	settings := fmt.Sprintf(`{"sandbox":{"filesystem":{"denyRead":[%q]}}}`, secret)
	srv := e.startServe("--settings", settings)
	const call = `{"type":"tool_use","id":"r%d","name":"Bash","input":{"command":"cat %s; echo done"}}`
	fmt.Fprintf(srv.in, call+"\n", 1, secret)
	if !srv.out.Scan() || strings.Contains(srv.out.Text(), "SECRET") {
		t.Fatalf("first call: %q", srv.out.Text())
	}
	time.Sleep(500 * time.Millisecond) // the next sandbox launched
	// Two editor-style saves: ext4 may give the file its first inode
	// number back, which a device and inode check took for no change.
	replace("NEWER-SECRET\n")
	replace("NEW-SECRET\n")
	fmt.Fprintf(srv.in, call+"\n", 2, secret)
	if !srv.out.Scan() || strings.Contains(srv.out.Text(), "SECRET") || !strings.Contains(srv.out.Text(), "done") {
		t.Errorf("the call after the host replaced the file: %q", srv.out.Text())
	}
	srv.in.Close()
	srv.cmd.Wait()

	// A cold run during which the file is replaced.
	_, stderr := e.duringRun(func() {
		replace("NEWEST-SECRET\n")
		replace("NEWER-SECRET\n")
	}, "run", "--settings", settings, "-c", hostStepScript+`cat `+secret+` >/dev/null 2>&1; true`)
	if !strings.Contains(stderr, secret+" was replaced on the host during the run") {
		t.Errorf("no warning of the replaced file: %q", stderr)
	}
}

// A warm sandbox's read rules are made when its call comes: a file the
// host saves by rename (git config --global) or makes in the home while
// the sandbox waits is readable to the call. Before, the rules were made
// when the sandbox was launched, and the call's git failed on
// ~/.gitconfig (a red-team pass).
func TestWarmCallReadsWhatTheHostSavedMeanwhile(t *testing.T) {
	e := newEnv(t)
	home := e.home
	save := func(rel, content string) {
		t.Helper()
		p := filepath.Join(home, rel)
		if err := os.WriteFile(p+".lock", []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".lock", p); err != nil {
			t.Fatal(err)
		}
	}
	save(".gitconfig", "[user]\n\tname = First\n")
	save(".npmrc", "//registry.example/:_authToken=npm_OLDSECRETaaaaaaaaaaaaaaaaaaaaaaaa\n")
	srv := e.startServe()
	const call = `{"type":"tool_use","id":"r%d","name":"Bash","input":{"command":"cat ~/.gitconfig ~/made-meanwhile; echo done"}}`
	fmt.Fprintf(srv.in, call+"\n", 1)
	if !srv.out.Scan() || !strings.Contains(srv.out.Text(), "First") {
		t.Fatalf("first call: %q", srv.out.Text())
	}
	time.Sleep(500 * time.Millisecond) // the next sandbox launched
	save(".gitconfig", "[user]\n\tname = Second\n")
	save("made-meanwhile", "MADE\n")
	fmt.Fprintf(srv.in, call+"\n", 2)
	if !srv.out.Scan() || !strings.Contains(srv.out.Text(), "Second") || !strings.Contains(srv.out.Text(), "MADE") {
		t.Errorf("the call after the host saved: %q (stderr %q)", srv.out.Text(), srv.stderr.String())
	}
	srv.in.Close()
	srv.cmd.Wait()
}

// Once nobody reads serve's results (its stdout closed), it runs nothing
// more: the result it could not write ends it. Before, the next call
// still ran.
func TestServeStopsWhenItsResultsCannotBeWritten(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command(sbxBin, "serve")
	cmd.Dir, cmd.Env = e.ws, e.environ()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r.Close() // the reader is gone
	const call = `{"type":"tool_use","id":"r%d","name":"Bash","input":{"command":"touch %s"}}` + "\n"
	fmt.Fprintf(in, call, 1, "first")
	fmt.Fprintf(in, call, 2, "second")
	in.Close()
	err = cmd.Wait()
	if err == nil {
		t.Error("serve exited 0 with its results unwritten")
	}
	assertAbsent(t, e.path("second"))
}

// The Read tool of a long-lived session hides what the sandbox hides as
// the policy is at the call: a denyRead file made after the start was
// returned in full (the start-up policy had no such file).
func TestServeReadHidesDenyReadThatAppears(t *testing.T) {
	e := newEnv(t)
	srv := e.startServe("--settings", `{"sandbox":{"filesystem":{"denyRead":["./prod.env"]}}}`)
	e.write("prod.env", "DB_PASSWORD=PROD-SECRET-LATER\n")
	fmt.Fprintf(srv.in, `{"type":"tool_use","id":"r1","name":"Read","input":{"file_path":%q}}`+"\n", e.path("prod.env"))
	if !srv.out.Scan() || strings.Contains(srv.out.Text(), "PROD-SECRET") || !strings.Contains(srv.out.Text(), "hidden by the sandbox policy") {
		t.Errorf("Read of a denyRead file made after the start: %q", srv.out.Text())
	}
	srv.in.Close()
	srv.cmd.Wait()
	// A credential file made after the start (git credential-store's).
	srv = e.startServe("--mode", "bypassPermissions")
	creds := filepath.Join(e.home, ".git-credentials")
	os.WriteFile(creds, []byte("https://u:GH-REAL-TOKEN-LATER@example.test\n"), 0o600)
	fmt.Fprintf(srv.in, `{"type":"tool_use","id":"r2","name":"Read","input":{"file_path":%q}}`+"\n", creds)
	if !srv.out.Scan() || strings.Contains(srv.out.Text(), "GH-REAL-TOKEN") {
		t.Errorf("Read of a credential file made after the start: %q", srv.out.Text())
	}
	srv.in.Close()
	srv.cmd.Wait()
}
