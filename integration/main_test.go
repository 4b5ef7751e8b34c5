//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/internal/sbxtest"
)

// sbxBin is the sbx binary built for this run.
var sbxBin string

func TestMain(m *testing.M) {
	if os.Getenv("SBX_VICTIM") != "" {
		os.Exit(victim(os.Args[1:]))
	}
	if os.Getenv(withoutLandlockEnv) != "" {
		os.Exit(execWithoutLandlock(os.Args[1:]))
	}
	bin, dir, err := sbxtest.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "building sbx:", err)
		os.Exit(1)
	}
	sbxBin = bin
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// inCI reports whether missing prerequisites must fail rather than skip.
func inCI() bool { return os.Getenv("CI") == "true" || os.Getenv("SBX_REQUIRE_ALL") == "1" }

// requireSandbox skips (or, in CI, fails) when this host cannot build the
// sandbox, as sbx doctor reports it.
func requireSandbox(t *testing.T) {
	t.Helper()
	out, err := exec.Command(sbxBin, "doctor").CombinedOutput()
	if err != nil {
		if inCI() {
			t.Fatalf("sandbox unavailable in CI:\n%s", out)
		}
		t.Skipf("sandbox unavailable on this host:\n%s", out)
	}
}

// env is an isolated environment for one test: its own HOME (and so its own
// settings, state directory and quarantine) and workspace.
type env struct {
	t    *testing.T
	home string
	ws   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	requireSandbox(t)
	// Outside /tmp, as a user's home and projects are: the sandbox's
	// private /tmp would otherwise hold everything sbx hides in the home
	// (its state, credential files), and no test would run with the read
	// rules that keep them hidden (see linux.InitSpec.Hidden).
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' {
			return '_'
		}
		return r
	}, t.Name())
	root, err := os.MkdirTemp("/var/tmp", "sbx-it-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, home: filepath.Join(root, "home"), ws: filepath.Join(root, "ws")}
	t.Cleanup(func() {
		// A helper whose sbx the test killed still finishes its run
		// (merge, report) in the run directory: removed under it, the
		// tree is left half made again.
		if !waitFor(10*time.Second, func() bool { return !inUse(root) }) {
			t.Errorf("processes still use %s after the test", root)
		}
		e.cleanState()
		os.RemoveAll(root)
	})
	for _, d := range []string{e.home, e.ws} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// cleanState finishes, as a user's next run would, the runs a killed sbx
// left in the test's state directory: what they left outside it (the
// proxy's directory in /tmp) is named only there.
func (e *env) cleanState() {
	if runs, _ := os.ReadDir(filepath.Join(e.home, ".local/state/sbx/runs")); len(runs) == 0 {
		return
	}
	cmd := exec.Command(sbxBin, "doctor", "--clean")
	cmd.Dir, cmd.Env = e.ws, e.environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Logf("sbx doctor --clean after the test: %v\n%s", err, out)
	}
}

// inUse reports whether a process has its working directory or an open
// descriptor in dir.
func inUse(dir string) bool {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		pd := filepath.Join("/proc", p.Name())
		if l, err := os.Readlink(filepath.Join(pd, "cwd")); err == nil && within(l, dir) {
			return true
		}
		fds, _ := os.ReadDir(filepath.Join(pd, "fd"))
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(pd, "fd", fd.Name())); err == nil && within(l, dir) {
				return true
			}
		}
	}
	return false
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

type result struct {
	stdout, stderr string
	code           int
}

func (e *env) environ() []string {
	return []string{"HOME=" + e.home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C", "SBX_VICTIM=1"}
}

// sbx runs the sbx binary in the workspace and waits at most 60 s.
func (e *env) sbx(args ...string) result {
	e.t.Helper()
	return e.sbxIn(nil, args...)
}

func (e *env) sbxIn(stdin io.Reader, args ...string) result {
	e.t.Helper()
	return e.runSbx(stdin, nil, args...)
}

// sbxEnv runs sbx with extra variables in its environment.
func (e *env) sbxEnv(extra []string, args ...string) result {
	e.t.Helper()
	return e.runSbx(nil, extra, args...)
}

func (e *env) runSbx(stdin io.Reader, extra []string, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sbxBin, args...)
	cmd.Dir = e.ws
	cmd.Env = append(e.environ(), extra...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("sbx %v: %v", args, err)
	}
	if ctx.Err() != nil {
		e.t.Fatalf("sbx %v: timed out; stderr:\n%s", args, stderr.String())
	}
	return result{stdout.String(), stderr.String(), code}
}

// sh runs a shell string in the sandbox with the given extra sbx flags.
func (e *env) sh(script string, flags ...string) result {
	e.t.Helper()
	return e.sbx(append(append([]string{"run"}, flags...), "-c", script)...)
}

// startReady starts sbx with args in the workspace, with extraEnv added,
// and waits (at most 10 s) until the sandboxed command has printed a line
// "ready" (its writes reach the workspace only when it ends, so the
// signal is on stdout). The rest of stdout is drained.
func (e *env) startReady(extraEnv []string, args ...string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(sbxBin, args...)
	cmd.Dir, cmd.Env = e.ws, append(e.environ(), extraEnv...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		seen := false
		for sc.Scan() {
			if sc.Text() == "ready" && !seen {
				close(ready)
				seen = true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		e.t.Fatalf("sbx %q: the command never printed ready", args)
	}
	return cmd
}

// hostStepScript is what a command run by duringRun starts with: it says
// it is ready, then waits (at most 10 s) for the file "go" the host makes
// in the workspace once its step is done.
const hostStepScript = `echo ready; for i in $(seq 200); do [ -e go ] && break; sleep 0.05; done; `

// duringRun runs sbx with args in the workspace, whose command begins with
// hostStepScript, does step on the host while the command waits, and
// returns the command's stdout (without its "ready") and sbx's stderr.
func (e *env) duringRun(step func(), args ...string) (stdout, stderr string) {
	e.t.Helper()
	cmd := exec.Command(sbxBin, args...)
	cmd.Dir, cmd.Env = e.ws, e.environ()
	var errb, outb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		e.t.Fatalf("sbx %q: no ready: %q (stderr %q)", args, sc.Text(), errb.String())
	}
	step()
	e.write("go", "")
	io.Copy(&outb, out)
	cmd.Wait()
	return outb.String(), errb.String()
}

func (e *env) path(rel string) string { return filepath.Join(e.ws, rel) }

func (e *env) write(rel, content string) string {
	e.t.Helper()
	p := e.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) mkdir(rel string) string {
	e.t.Helper()
	p := e.path(rel)
	if err := os.MkdirAll(p, 0o755); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// assertContent checks a host file's content from outside the sandbox.
func assertContent(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if string(got) != want {
		t.Errorf("%s = %q, want %q", path, got, want)
	}
}

// assertAbsent checks from outside the sandbox that path does not exist.
func assertAbsent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		t.Errorf("%s exists on the host, want absent", path)
	} else if !os.IsNotExist(err) {
		t.Errorf("%s: %v", path, err)
	}
}

// listing returns the names in dir, recursively, as relative paths.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p != dir {
			out = append(out, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	return out
}

// victimOnHost runs the victim without a sandbox.
func victimOnHost(t *testing.T, path string, calls ...string) string {
	t.Helper()
	cmd := exec.Command(path, calls...)
	cmd.Env = []string{"SBX_VICTIM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("victim on host: %v: %s", err, out)
	}
	return string(out)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
