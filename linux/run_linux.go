//go:build linux

package linux

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/netrules"
	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/proxy"
)

// Executor runs commands in a bubblewrap sandbox. It implements
// [pipeline.Executor].
type Executor struct {
	// Bwrap is the bubblewrap binary; empty means "bwrap" on PATH.
	Bwrap string
	// Exe is the sbx binary to run as the in-sandbox init; empty means the
	// running executable.
	Exe string
	// StateDir holds run directories and the quarantine; required.
	StateDir string
	// RequireLandlock fails a run when the kernel has no Landlock, instead of
	// relying on the mount namespace alone.
	RequireLandlock bool
	// Audit receives the proxy's events; nil drops them.
	Audit func(proxy.Event)
	// Ask decides a host no rule names when the network policy is not
	// strict; nil denies.
	Ask func(host string, port int) bool
	// Resolve replaces the system resolver in the proxy (tests, embedders);
	// nil means the system resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// UpstreamRoots verifies the real servers behind terminated TLS; nil
	// means the system roots.
	UpstreamRoots *x509.CertPool
	// OnProxyStart, when set, is called once the proxy serves, with a
	// function that stops it: from then on the sandbox has no network at
	// all (an embedder's kill switch; tests use it too).
	OnProxyStart func(stop func() error)
}

var _ pipeline.Executor = (*Executor)(nil)

func (e *Executor) paths() (bwrap, exe string, err error) {
	bwrap = e.Bwrap
	if bwrap == "" {
		bwrap = "bwrap"
	}
	if bwrap, err = exec.LookPath(bwrap); err != nil {
		return "", "", fmt.Errorf("%w: bubblewrap not found (%v); install it (Debian/Ubuntu: apt-get install bubblewrap) or set sandbox.bwrapPath", pipeline.ErrUnavailable, err)
	}
	exe = e.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return "", "", fmt.Errorf("%w: cannot find the sbx binary: %v", pipeline.ErrUnavailable, err)
		}
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", "", fmt.Errorf("%w: sbx binary: %v", pipeline.ErrUnavailable, err)
	}
	return bwrap, exe, nil
}

// protectState returns s with the state directory among the policy's own
// paths (an embedder's policy may not name it), and refuses a writable root
// inside it.
func (e *Executor) protectState(s *pipeline.Spec) (*pipeline.Spec, error) {
	state, err := filepath.Abs(e.StateDir)
	if err != nil {
		return nil, err
	}
	if r, err := filepath.EvalSymlinks(state); err == nil {
		state = r
	}
	for _, w := range s.FS.Writable {
		if fsrules.Within(w.Path, state) {
			return nil, fmt.Errorf("linux: writable root %s (%s) lies in sbx's state directory %s", w.Path, w.Origin, state)
		}
	}
	for _, p := range s.FS.Self {
		if fsrules.Within(state, p.Path) {
			return s, nil
		}
	}
	fs := *s.FS
	fs.Self = append(slices.Clone(fs.Self), fsrules.Path{Path: state, Exists: true, Dir: true, Origin: "sbx's state directory"})
	spec := *s
	spec.FS = &fs
	return &spec, nil
}

// Clean finishes what killed runs left behind (see [CleanStale]).
func (e *Executor) Clean(ctx context.Context) (*CleanReport, error) {
	_, exe, err := e.paths()
	if err != nil {
		return nil, err
	}
	return CleanStale(ctx, e.StateDir, exe, 30*time.Second)
}

// Run implements [pipeline.Executor].
func (e *Executor) Run(ctx context.Context, s *pipeline.Spec, stdio pipeline.Stdio) (*pipeline.Result, error) {
	if s.FS == nil || len(s.Argv) == 0 {
		return nil, errors.New("linux: spec needs a filesystem policy and a command")
	}
	if e.StateDir == "" {
		return nil, errors.New("linux: Executor.StateDir is required")
	}
	bwrap, exe, err := e.paths()
	if err != nil {
		return nil, err
	}
	s, err = e.protectState(s)
	if err != nil {
		return nil, err
	}
	res := &pipeline.Result{}
	if rep, err := CleanStale(ctx, e.StateDir, exe, 0); err != nil {
		res.Warnings = append(res.Warnings, "finishing an earlier killed run: "+err.Error())
	} else {
		res.Warnings = append(res.Warnings, staleNotes(rep)...)
	}
	runDir, rec, err := newRunDir(e.StateDir)
	if err != nil {
		return nil, fmt.Errorf("linux: run directory: %w", err)
	}
	r := &run{e: e, spec: s, runDir: runDir, rec: rec, res: res}
	defer r.cleanup()
	if s.Net != nil {
		if err := r.startProxy(); err != nil {
			return nil, err
		}
		if err := writeJSON(filepath.Join(runDir, recordFile), rec); err != nil {
			return nil, err
		}
	}
	if s.Limits.MaxDisk > 0 {
		r.budgetStage = filepath.Join(runDir, "disk")
	}
	if err := r.checkTmpLimit(); err != nil {
		return nil, err
	}
	cg, err := newCgroups(s.Limits, "sbx-"+filepath.Base(runDir))
	if err != nil {
		fb, ferr := fallbackLimits(s.Limits, err, os.Getuid())
		if ferr != nil {
			return nil, ferr
		}
		r.rl = fb
		res.Warnings = append(res.Warnings, fb.notes...)
	}
	r.cg = cg
	defer cg.remove()
	in := PlanInput{
		Policy:       s.FS,
		EmptyFile:    filepath.Join(runDir, emptyFile),
		Exe:          exe,
		ProxySocket:  r.proxySocket,
		ExtraROBinds: r.trust.Files(),
		TmpSize:      s.Limits.MaxTmp,
		BudgetStage:  r.budgetStage,
		StateDir:     e.StateDir,
	}
	plan := BuildPlan(in)
	if r.budgetStage != "" && s.Limits.BestEffort {
		// A default budget the host cannot set up: the writes are staged
		// on disk, /tmp stays bounded.
		in.BudgetStage = ""
		if in.TmpSize == 0 {
			in.TmpSize = s.Limits.MaxDisk
		}
		r.fallbackPlan = BuildPlan(in)
	}
	if err := r.start(ctx, bwrap, exe, plan, stdio); err != nil {
		return nil, err
	}
	return res, nil
}

// checkTmpLimit refuses a /tmp size limit that cannot hold because a
// writable root makes the host's /tmp writable (a default limit only
// warns).
func (r *run) checkTmpLimit() error {
	l := r.spec.Limits
	r.tmpLimited = l.MaxTmp > 0
	if l.MaxTmp == 0 {
		return nil
	}
	for _, w := range r.spec.FS.Writable {
		if w.Path == "/tmp" || strings.HasPrefix("/tmp/", w.Path+"/") {
			err := fmt.Errorf("the /tmp size limit (--max-tmp) cannot hold: /tmp is the host's, writable through %s (%s); drop that write path or the limit", w.Path, w.Origin)
			if !l.BestEffort {
				return fmt.Errorf("linux: %w", err)
			}
			r.res.Warnings = append(r.res.Warnings, "default limits not enforced: "+err.Error())
			r.tmpLimited = false
			break
		}
	}
	return nil
}

// staleNotes describes what finishing earlier killed runs did.
func staleNotes(rep *CleanReport) []string {
	var out []string
	for dir, m := range rep.Merged {
		lines := changesOf(&m, false).Lines()
		if len(lines) == 0 && m.Applied == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("an earlier run was killed (%s); its writes were merged: %d change(s) applied", filepath.Base(dir), m.Applied))
		for _, l := range lines {
			out = append(out, "earlier run: "+l)
		}
	}
	return out
}

type run struct {
	e      *Executor
	spec   *pipeline.Spec
	runDir string
	rec    *record
	res    *pipeline.Result
	// proxy serves the sandbox's network; proxySocket is its Unix socket.
	proxy       *proxy.Server
	proxySocket string
	// trust is the per-run CA and its files, when TLS is terminated for
	// bound credentials.
	trust *proxy.Trust
	// cg holds the run's cgroups when limits need them; cgErr is set if
	// the command could not join them (it is then never run), cgWarn
	// instead when the limits were best-effort defaults.
	cg     *cgroups
	cgErr  error
	cgWarn string
	// tmpLimited: the private /tmp is a size-limited tmpfs.
	tmpLimited bool
	// tmpFull is set when the init reported the size-limited /tmp full.
	tmpFull bool
	// budgetStage is set when the writes are staged in a disk budget
	// (--max-disk); txRep is what the transaction helper reported.
	budgetStage string
	txRep       *TxReport
	// fallbackPlan is the plan without the budget, for a best-effort
	// budget the helper cannot set up.
	fallbackPlan []Op
	// rl are the rlimits standing in for a cgroup that cannot be had.
	rl *rlimitFallback
}

// startProxy listens on a Unix socket in a private directory (mode 0700,
// short path: socket paths are limited to 107 bytes) and serves the proxy
// from this process. The directory is recorded so a later run removes it if
// sbx is killed.
func (r *run) startProxy() error {
	dir, err := os.MkdirTemp("", "sbx-net-")
	if err != nil {
		return fmt.Errorf("linux: proxy directory: %w", err)
	}
	r.rec.NetDir = dir
	r.proxySocket = filepath.Join(dir, "proxy.sock")
	ln, err := net.Listen("unix", r.proxySocket)
	if err != nil {
		return fmt.Errorf("linux: proxy socket: %w", err)
	}
	// TLS termination only when a masked credential is bound to a host:
	// the CA's certificate and bundle are bound into the sandbox.
	if r.trust, err = proxy.NewTrust(dir, r.spec.Secrets); err != nil {
		return fmt.Errorf("linux: %w", err)
	}
	var ca *proxy.CA
	if r.trust != nil {
		ca = r.trust.CA
	}
	r.proxy = &proxy.Server{
		CA:            ca,
		UpstreamRoots: r.e.UpstreamRoots,
		Rules:         r.spec.Net.Rules,
		Strict:        r.spec.Net.Strict,
		Ask:           r.e.Ask,
		Resolve:       r.e.Resolve,
		Audit:         r.e.Audit,
		Secrets:       r.spec.Secrets,
	}
	go r.proxy.Serve(ln)
	if r.e.OnProxyStart != nil {
		r.e.OnProxyStart(r.proxy.Close)
	}
	return nil
}

// cleanup stops the proxy and removes the run directory, unless the
// transaction helper died before its merge was complete: the next run (or
// sbx doctor --clean) finishes it from there.
func (r *run) cleanup() {
	if r.proxy != nil {
		r.proxy.Close()
	}
	if r.rec.NetDir != "" {
		if err := os.RemoveAll(r.rec.NetDir); err != nil {
			r.res.Warnings = append(r.res.Warnings, err.Error())
		}
	}
	if fileExists(filepath.Join(r.runDir, helperFile)) && !fileExists(filepath.Join(r.runDir, reportFile)) {
		r.res.Warnings = append(r.res.Warnings, "the command's writes were not merged; they are kept in "+r.runDir+" for the next run (or sbx doctor --clean) to merge")
		return
	}
	if err := forceRemoveAll(r.runDir); err != nil {
		r.res.Warnings = append(r.res.Warnings, err.Error())
	}
}

// reachesHostLoopback reports whether a rule lets the sandbox reach the
// host's loopback (localhost by name, or a loopback address), in which case
// loopback requests must go through the proxy rather than stay in the
// sandbox.
func reachesHostLoopback(rules *netrules.Set) bool {
	for _, r := range rules.Allow {
		if r.Host == "localhost" || (r.IP.IsValid() && r.IP.IsLoopback()) {
			return true
		}
	}
	return false
}

// forwarded are the signals sbx passes on to the sandbox.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT}

func (r *run) start(ctx context.Context, bwrap, exe string, plan []Op, stdio pipeline.Stdio) error {
	writable := []string{"/dev", "/tmp"}
	for _, w := range r.spec.FS.Writable {
		writable = append(writable, w.Path)
	}
	// The init can make its read-only binds only where the sandbox's user
	// namespace owns its mount namespace: when sbx runs as root. For other
	// users bubblewrap nests the sandbox in a second user namespace (to map
	// the caller's uid), so bubblewrap makes every mount itself.
	var readOnly []string
	if os.Getuid() == 0 {
		plan, readOnly = SplitPlan(plan)
	}
	init := InitSpec{Argv: r.spec.Argv, Env: r.spec.Env, Dir: r.spec.Dir, Writable: writable,
		ReadOnly: readOnly, RequireLandlock: r.e.RequireLandlock, TmpLimited: r.tmpLimited, Hold: r.cg != nil}
	if l := r.spec.Limits; l.MaxCPU > 0 || l.MaxOpenFiles > 0 {
		init.CPUSeconds = uint64((l.MaxCPU + time.Second - 1) / time.Second)
		init.OpenFiles = uint64(l.MaxOpenFiles)
	}
	if r.rl != nil {
		init.Procs, init.DataBytes = r.rl.procs, r.rl.data
	}
	if r.proxy != nil {
		init.Bridge = &BridgeSpec{Socket: r.proxySocket, HTTPPort: BridgeHTTPPort, SOCKSPort: BridgeSOCKSPort}
		init.Env = proxy.Env(init.Env, BridgeHTTPPort, BridgeSOCKSPort, reachesHostLoopback(r.spec.Net.Rules))
		init.Env = r.trust.Env(init.Env)
	}
	specData, err := json.Marshal(init)
	if err != nil {
		return err
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return err
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return err
	}
	files, closeLater, waitCopies, err := fileStdio(stdio)
	if err != nil {
		return err
	}
	closeLater = append(closeLater, readyW)
	// With a cgroup, the command waits on fd 9 until sbx has moved it in.
	var goW *os.File
	extra := append(append([]*os.File{specR, infoW}, files...), readyW)
	if r.cg != nil {
		goR, w, err := os.Pipe()
		if err != nil {
			return err
		}
		goW = w
		defer goW.Close()
		closeLater = append(closeLater, goR)
		extra = append(extra, goR)
	}
	// fds in the child: 3 spec, 4 info, 5-7 the command's stdio, 8 ready.
	args := BwrapArgs(plan, BwrapOptions{InfoFD: 4}, []string{exe, InitArg})
	var bwrapErr bytes.Buffer
	txs, err := r.txSpec(bwrap, args, len(extra))
	if err != nil {
		return fmt.Errorf("linux: run directory: %w", err)
	}
	if fb := r.fallbackPlan; fb != nil {
		if os.Getuid() == 0 {
			fb, _ = SplitPlan(fb)
		}
		txs.FallbackArgs = BwrapArgs(fb, BwrapOptions{InfoFD: 4}, []string{exe, InitArg})
	}
	tx, err := newTxCtl(exe, txs, len(extra))
	if err != nil {
		return err
	}
	defer tx.parent.Close()
	closeLater = append(closeLater, tx.child)
	extra = append(extra, tx.child)
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        tx.argv,
		Env:         txEnv(),
		Dir:         "/",
		Stdin:       nil,
		Stdout:      &bwrapErr,
		Stderr:      &bwrapErr,
		ExtraFiles:  extra,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	txSysProcAttr(cmd.SysProcAttr)

	exited, err := startOnLockedThread(cmd)
	specR.Close()
	infoW.Close()
	for _, f := range closeLater {
		f.Close()
	}
	if err != nil {
		specW.Close()
		infoR.Close()
		readyR.Close()
		return fmt.Errorf("%w: start bubblewrap: %v", pipeline.ErrUnavailable, err)
	}
	go func() {
		specW.Write(specData)
		specW.Close()
	}()
	txRep := make(chan *TxReport, 1)
	go tx.exchange(txRep)

	// The child's pid arrives on the info fd once the namespaces exist.
	pidCh := make(chan int, 1)
	initPID := make(chan int, 1) // the same, for the cgroup hand-off
	go func(pidc chan<- int) {
		defer infoR.Close()
		var info struct {
			ChildPID int `json:"child-pid"`
		}
		if json.NewDecoder(infoR).Decode(&info) == nil && info.ChildPID > 0 {
			initPID <- info.ChildPID
			pidc <- info.ChildPID
		}
		close(pidc)
		io.Copy(io.Discard, infoR)
	}(pidCh)
	pidc := (<-chan int)(pidCh)

	// The init writes one byte once it runs; then InitForked when the
	// command waits to be moved into the cgroup (sbx moves it, the init
	// itself stays out, so a fork bomb or an OOM cannot take it down), and
	// TmpFullReport when the command is done with /tmp full. EOF comes
	// when the init exits.
	ready := make(chan bool, 1)
	report := make(chan []byte, 1)
	go func() {
		defer readyR.Close()
		var b [1]byte
		n, _ := readyR.Read(b[:])
		ready <- n == 1
		var rest []byte
		for len(rest) < 16 {
			if n, _ := readyR.Read(b[:]); n != 1 {
				break
			}
			rest = append(rest, b[0])
			if b[0] == InitForked && goW != nil {
				err := r.joinCgroup(initPID)
				switch {
				case err == nil:
					goW.Write([]byte{1})
				case r.spec.Limits.BestEffort:
					// Default limits only: run, and say so.
					r.cgWarn = "default limits not enforced: the command could not join its cgroup: " + err.Error()
					goW.Write([]byte{1})
				default:
					r.cgErr = err
				}
				goW.Close()
			}
		}
		report <- rest
	}()

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	var timeout <-chan time.Time
	if r.spec.Timeout > 0 {
		t := time.NewTimer(r.spec.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	childPID := 0
	killAll := func() {
		if childPID > 0 {
			_ = unix.Kill(childPID, unix.SIGKILL) // PID 1: the whole namespace goes
		}
		// The helper kills bubblewrap, then merges what was written.
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	var pending []os.Signal
	for {
		select {
		case pid, ok := <-pidc:
			if ok {
				childPID = pid
				for _, s := range pending {
					_ = unix.Kill(childPID, s.(syscall.Signal))
				}
				pending = nil
			}
			pidc = nil
		case s := <-sigs:
			if childPID > 0 {
				_ = unix.Kill(childPID, s.(syscall.Signal))
			} else {
				pending = append(pending, s)
			}
		case <-timeout:
			r.res.TimedOut = true
			killAll()
			timeout = nil
		case <-ctx.Done():
			killAll()
			<-exited
			waitCopies()
			return ctx.Err()
		case waitErr := <-exited:
			waitCopies()
			initRan := <-ready
			select {
			case rep := <-report:
				r.tmpFull = bytes.IndexByte(rep, TmpFullReport) >= 0
			case <-time.After(time.Second):
			}
			select {
			case r.txRep = <-txRep:
			case <-time.After(time.Second):
			}
			return r.finish(waitErr, initRan, cmd, bwrapErr.String())
		}
	}
}

// startOnLockedThread starts cmd, and waits for it, from one goroutine
// locked to its OS thread: Pdeathsig follows the thread that forked the
// child (golang/go#27505). The channel delivers Wait's error.
func startOnLockedThread(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	return exited, <-started
}

// finish turns bubblewrap's exit into a result. bwrap exits with the init's
// status, which is the command's; a bwrap that never started the init is a
// setup failure, reported as an error with bwrap's own message.
func (r *run) finish(waitErr error, initRan bool, cmd *exec.Cmd, bwrapOut string) error {
	if r.cgErr != nil {
		return fmt.Errorf("%w: the command could not join its cgroup: %v", pipeline.ErrUnavailable, r.cgErr)
	}
	if err := r.txResult(); err != nil {
		return err
	}
	st := cmd.ProcessState
	if st == nil {
		return fmt.Errorf("linux: bubblewrap: %w", waitErr)
	}
	if !initRan && !r.res.TimedOut {
		msg := bytes.TrimSpace([]byte(bwrapOut))
		if len(msg) == 0 {
			msg = []byte(st.String())
		}
		return fmt.Errorf("%w: bubblewrap could not build the sandbox: %s", pipeline.ErrUnavailable, msg)
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.res.ExitCode = 128 + int(ws.Signal())
	} else {
		r.res.ExitCode = st.ExitCode()
	}
	if r.cgWarn != "" {
		r.res.Warnings = append(r.res.Warnings, r.cgWarn)
	} else if r.cg != nil {
		r.res.LimitHit = r.cg.hit(r.spec.Limits)
	}
	if r.res.LimitHit == "" && r.txRep.Full && r.spec.Limits.MaxDisk > 0 {
		r.res.LimitHit = fmt.Sprintf("the disk budget is spent (--max-disk %d bytes)", r.spec.Limits.MaxDisk)
	}
	if r.res.LimitHit == "" && r.tmpFull {
		r.res.LimitHit = fmt.Sprintf("the private /tmp is full (--max-tmp %d bytes)", r.spec.Limits.MaxTmp)
	}
	if l := r.spec.Limits; r.res.LimitHit == "" && !r.res.TimedOut && l.MaxCPU > 0 &&
		(r.res.ExitCode == 128+int(syscall.SIGXCPU) || r.res.ExitCode == 128+int(syscall.SIGKILL)) {
		r.res.LimitHit = fmt.Sprintf("CPU time (--max-cpu %s)", l.MaxCPU)
	}
	if out := bytes.TrimSpace([]byte(bwrapOut)); len(out) > 0 {
		r.res.Warnings = append(r.res.Warnings, "bubblewrap: "+string(out))
	}
	return nil
}

// fileStdio turns the streams into files for the child. Non-file readers and
// writers get a pipe and a copying goroutine; waitCopies waits for those to
// drain after the child has exited.
func fileStdio(s pipeline.Stdio) (files, closeLater []*os.File, waitCopies func(), err error) {
	var wg sync.WaitGroup
	in := func(r io.Reader) (*os.File, error) {
		if f, ok := r.(*os.File); ok {
			return f, nil
		}
		if r == nil {
			f, err := os.Open(os.DevNull)
			closeLater = append(closeLater, f)
			return f, err
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		closeLater = append(closeLater, pr)
		go func() {
			io.Copy(pw, r)
			pw.Close()
		}()
		return pr, nil
	}
	out := func(w io.Writer) (*os.File, error) {
		if f, ok := w.(*os.File); ok {
			return f, nil
		}
		if w == nil {
			w = io.Discard
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		closeLater = append(closeLater, pw)
		wg.Add(1)
		go func() {
			defer wg.Done()
			io.Copy(w, pr)
			pr.Close()
		}()
		return pw, nil
	}
	stdin, err := in(s.Stdin)
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := out(s.Stdout)
	if err != nil {
		return nil, nil, nil, err
	}
	// As os/exec does: the same writer for both streams gets one pipe, so
	// only one goroutine ever writes to it.
	stderr := stdout
	if !sameWriter(s.Stdout, s.Stderr) {
		if stderr, err = out(s.Stderr); err != nil {
			return nil, nil, nil, err
		}
	}
	return []*os.File{stdin, stdout, stderr}, closeLater, wg.Wait, nil
}

// sameWriter reports whether two writers are the same comparable value.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false // an incomparable dynamic type
		}
	}()
	return a != nil && a == b
}

// joinCgroup moves the command (the init's only child, held before its
// exec) into the run's cgroups.
func (r *run) joinCgroup(initPID <-chan int) error {
	var pid int
	select {
	case pid = <-initPID:
	case <-time.After(10 * time.Second):
		return errors.New("bubblewrap never reported the sandbox's pid")
	}
	kids, err := childrenOf(pid)
	if err != nil {
		return err
	}
	if len(kids) != 1 {
		return fmt.Errorf("the sandbox's init has %d children, want 1", len(kids))
	}
	return r.cg.add(kids[0])
}

// childrenOf lists a process's children, from /proc/PID/task/*/children
// or, where the kernel lacks that file, from every process's parent.
func childrenOf(pid int) ([]int, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err == nil && len(tasks) > 0 {
		var out []int
		for _, t := range tasks {
			data, err := os.ReadFile(t)
			if errors.Is(err, fs.ErrNotExist) {
				continue // a thread that exited since the glob
			}
			if err != nil {
				return nil, err
			}
			for _, f := range strings.Fields(string(data)) {
				if n, err := strconv.Atoi(f); err == nil {
					out = append(out, n)
				}
			}
		}
		return out, nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses.
		if i := bytes.LastIndexByte(data, ')'); i > 0 {
			if f := strings.Fields(string(data[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(pid) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}
