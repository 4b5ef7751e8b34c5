//go:build darwin

package darwin

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/proxy"
)

// Run implements [pipeline.Executor]: a private TMPDIR, the proxy on a
// per-run localhost port with a per-run token, the profile, and
// sandbox-exec.
func (e *Executor) Run(ctx context.Context, s *pipeline.Spec, stdio pipeline.Stdio) (*pipeline.Result, error) {
	if _, err := os.Stat(SandboxExec); err != nil {
		return nil, fmt.Errorf("%w: %s not found: %v", pipeline.ErrUnavailable, SandboxExec, err)
	}
	if s.FS == nil || len(s.Argv) == 0 {
		return nil, errors.New("darwin: spec needs a filesystem policy and a command")
	}
	if s.Discard {
		return nil, fmt.Errorf("%w: --discard needs transactional writes, which are not implemented on macOS (the command would write the workspace directly)", pipeline.ErrUnavailable)
	}
	// Resource limits are not implemented on macOS yet: refuse a limit the
	// user asked for; defaults become a warning.
	var limitWarn string
	if s.Limits != (pipeline.Limits{BestEffort: s.Limits.BestEffort, Set: s.Limits.Set}) {
		msg := "resource limits (--max-procs, --max-memory, --max-cpu, --max-tmp, --max-open-files, --max-disk) are not implemented on macOS yet"
		if !s.Limits.BestEffort || s.Limits.Set != 0 {
			return nil, fmt.Errorf("%w: %s; remove them (--timeout and --max-output work)", pipeline.ErrUnavailable, msg)
		}
		limitWarn = "default limits not enforced: " + msg
	}
	dirs, dirsWarn, err := runDirs()
	if err != nil {
		return nil, err
	}
	defer dirs.Remove()
	tmp := dirs.Temp
	in := ProfileInput{FS: s.FS, TmpDir: tmp, UserCacheDir: dirs.Cache, UnixSockets: s.Platform.UnixSockets, EvalSymlinks: filepath.EvalSymlinks,
		LocalBinding: s.Platform.LocalBinding, TrustdLookup: s.Platform.WeakerNetworkIsolation, MachLookup: s.Platform.MachLookup}
	marker := "TMPDIR=" + tmp + "/"
	env := append(append([]string(nil), s.Env...), dirs.Env()...)
	var blocked proxy.Blocked
	if s.Net != nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("darwin: proxy: %w", err)
		}
		tok := make([]byte, 16)
		rand.Read(tok)
		token := hex.EncodeToString(tok)
		trust, err := proxy.NewTrust(tmp, s.Secrets)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("darwin: %w", err)
		}
		srv := &proxy.Server{Rules: s.Net.Rules, Strict: s.Net.Strict, Ask: e.ask, Resolve: e.Resolve,
			Audit: blocked.Wrap(e.Audit), Secrets: s.Secrets, Token: token}
		if trust != nil {
			srv.CA = trust.CA
		}
		env = trust.Env(env)
		go srv.Serve(ln)
		defer srv.Close()
		in.ProxyPort = ln.Addr().(*net.TCPAddr).Port
		env = proxy.EnvAuth(env, in.ProxyPort, in.ProxyPort, token)
	}
	var stopLog func()
	if e.Violations != nil {
		in.Tag = NewTag()
		stopLog = e.streamViolations(in.Tag)
	}
	prof, err := Profile(in)
	if err != nil {
		if stopLog != nil {
			stopLog()
		}
		return nil, err
	}
	if stopLog != nil {
		defer stopLog()
	}
	cmd := exec.Command(SandboxExec, append([]string{"-p", prof, "--"}, s.Argv...)...)
	cmd.Env, cmd.Dir = env, s.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	// A terminal on stdin is handed to the command (pagers, REPLs and
	// prompts would stop on SIGTTIN/SIGTTOU in a background group) and
	// taken back when it is done; without one, a new session.
	job, tty := stdinJob(stdio.Stdin)
	cmd.SysProcAttr = job.sysProcAttr(tty)
	if job.Foreground {
		defer takeTerminal(tty)
	}
	gitDirs := gitLinkDirs(s.FS)
	linksBefore, _ := linksIn(gitDirs)
	indexesBefore := gitIndexes(gitDirs)
	if err := pipeline.CommandStarts(ctx); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: sandbox-exec: %v", pipeline.ErrUnavailable, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	res := &pipeline.Result{}
	for _, w := range []string{limitWarn, dirsWarn} {
		if w != "" {
			res.Warnings = append(res.Warnings, w)
		}
	}
	if s.Net != nil {
		if n := goTLSNote(s.Secrets); n != "" {
			res.Warnings = append(res.Warnings, n)
		}
	}
	group := func(sig os.Signal) { _ = syscall.Kill(-cmd.Process.Pid, sig.(syscall.Signal)) }
	sv := pipeline.Supervision{Timeout: s.Timeout, Signal: group, Kill: func() { group(syscall.SIGKILL) }}
	_, timedOut, ctxErr := sv.Supervise(ctx, exited)
	// Nothing the command started may outlive it: its process group, then
	// whatever left the group but carries the run's TMPDIR.
	group(syscall.SIGKILL)
	n := killStragglers(marker)
	if ctxErr != nil {
		return nil, ctxErr
	}
	if n > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("killed %d process(es) the command had detached from its process group", n))
	}
	res.Warnings = append(res.Warnings, removeNewGitLinks(gitDirs, linksBefore)...)
	res.Warnings = append(res.Warnings, setAsideBadIndexes(gitDirs, indexesBefore)...)
	res.TimedOut = timedOut
	res.ExitCode = pipeline.ExitStatus(cmd.ProcessState)
	res.Blocked = blocked.Lines()
	return res, nil
}

// DoctorCheck reports whether sandbox-exec is present and applies a profile.
func DoctorCheck() (ok bool, detail string) {
	if _, err := os.Stat(SandboxExec); err != nil {
		return false, SandboxExec + " not found"
	}
	out, err := exec.Command(SandboxExec, "-p", "(version 1)(allow default)", "/usr/bin/true").CombinedOutput()
	if err != nil {
		return false, fmt.Sprintf("sandbox-exec cannot apply a profile: %v %s", err, out)
	}
	return true, SandboxExec + " applies profiles"
}

// LogBinary is the unified log's command-line tool.
const LogBinary = "/usr/bin/log"

// streamViolations starts `log stream` for the denials tagged tag and
// passes each to e.Violations. It waits (at most a second) for the
// stream's "Filtering the log data" banner, on stdout or stderr (see
// [IsLogBanner]), so the command's first denials are not missed; the
// returned function waits a little for late messages, then stops the
// stream.
func (e *Executor) streamViolations(tag string) (stop func()) {
	cmd := exec.Command(LogBinary, LogStreamArgs(tag)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return func() {}
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		return func() {}
	}
	if err := cmd.Start(); err != nil {
		return func() {}
	}
	started := make(chan struct{})
	var once sync.Once
	ready := func() { once.Do(func() { close(started) }) }
	done, errDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(errDone)
		sc := bufio.NewScanner(errOut)
		for sc.Scan() {
			if IsLogBanner(sc.Bytes()) {
				ready()
			}
		}
	}()
	go func() {
		defer close(done)
		defer ready()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if IsLogBanner(sc.Bytes()) {
				ready()
				continue
			}
			if v, ok := ParseLogLine(sc.Bytes(), tag); ok {
				e.Violations(v)
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(time.Second):
	}
	return func() {
		time.Sleep(300 * time.Millisecond)
		cmd.Process.Kill()
		<-done
		<-errDone
		cmd.Wait()
	}
}

// killStragglers kills, in a few rounds, the processes that carry the
// run's marker in their environment (see [Stragglers]); it returns how
// many it killed.
func killStragglers(marker string) int {
	killed := 0
	for range 3 {
		out, err := exec.Command("/bin/ps", "-axwwE", "-o", "pid=,command=").Output()
		if err != nil {
			return killed
		}
		pids := Stragglers(out, marker, os.Getpid())
		if len(pids) == 0 {
			return killed
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return killed
}

// runDirs makes the run's private folders in the per-user temporary and
// cache directories (see [RunDirs]). Where those cannot be found, the run
// gets a private TMPDIR alone, and a warning: the tools that write to the
// per-user directories whatever TMPDIR says (xcrun, clang, Foundation)
// will be refused.
func runDirs() (*RunDirs, string, error) {
	u, err := FindUserDirs(os.Getenv("TMPDIR"), func(name string) (string, error) {
		out, err := exec.Command("/usr/bin/getconf", name).Output()
		return string(out), err
	})
	if err == nil {
		d, err := NewRunDirs(u, filepath.EvalSymlinks)
		if err == nil {
			return d, "", nil
		}
	}
	warn := fmt.Sprintf("the per-user temporary and cache directories were not usable (%v): xcrun, clang and Foundation's atomic writes will be refused there", err)
	tmp, err := os.MkdirTemp("", "sbx-run-")
	if err != nil {
		return nil, "", err
	}
	real, err := filepath.EvalSymlinks(tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, "", err
	}
	return &RunDirs{Temp: real}, warn, nil
}

// ask is the proxy's question: Ask with no pause, or a denial.
func (e *Executor) ask(host string, port int) bool {
	return e.Ask != nil && e.Ask(host, port, nil)
}
