//go:build linux && !sbxinner

package linux

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/syntax"

	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/proxy"
)

// Executor runs commands in a bubblewrap sandbox. It implements
// [pipeline.Executor].
type Executor struct {
	// Bwrap is the bubblewrap binary; empty means "bwrap" on PATH.
	Bwrap string
	// Exe is the sbx binary to run as the transaction helper and the
	// in-sandbox init. Empty means the sbx-inner this build embeds (run
	// from a sealed memfd: see innerExe), or the running executable when
	// it embeds none.
	Exe string
	// StateDir holds run directories and the quarantine; required.
	StateDir string
	// RequireLandlock fails a run when the kernel has no Landlock, instead of
	// relying on the mount namespace alone.
	RequireLandlock bool
	// Audit receives the proxy's events; nil drops them.
	Audit func(proxy.Event)
	// Ask decides a host no rule names when the network policy is not
	// strict; nil denies. Its pause stops the sandbox (pauseSandbox).
	Ask pipeline.NetAsk
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
	// Warm keeps one sandbox launched ahead for the next Run with the same
	// policy, for a long-lived session (sbx serve, sbx mcp): a Run with no
	// input and its output into writers then skips the start-up. Each
	// sandbox runs one command; the next is launched only after a Run has
	// ended. Close throws the waiting one away.
	Warm bool
	pool warmPool
	// floors are the filesystems seen to follow the kernel's timestamp
	// floor (see conflictClock).
	floors floorFilesystems
	// inner is the sealed memfd the helper and the init run from, once
	// made (innerExe).
	innerOnce sync.Once
	inner     *os.File
	innerErr  error
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

// Clean finishes what killed runs left behind (see [CleanStale]), and
// removes the proxy directories and cgroups of this user's dead runs that
// no state directory names any more.
func (e *Executor) Clean(ctx context.Context) (*CleanReport, error) {
	_, exe, err := e.paths()
	if err != nil {
		return nil, err
	}
	rep, err := CleanStale(ctx, e.StateDir, exe, 30*time.Second)
	if rep == nil {
		return nil, err
	}
	failed := len(rep.Errors)
	sweepOrphans(rep)
	if err == nil && len(rep.Errors) > failed {
		err = fmt.Errorf("clean: %s", strings.Join(rep.Errors[failed:], "; "))
	}
	return rep, err
}

// Run implements [pipeline.Executor].
func (e *Executor) Run(ctx context.Context, s *pipeline.Spec, stdio pipeline.Stdio) (*pipeline.Result, error) {
	if s.FS == nil || len(s.Argv) == 0 {
		return nil, errors.New("linux: spec needs a filesystem policy and a command")
	}
	if e.StateDir == "" {
		return nil, errors.New("linux: Executor.StateDir is required")
	}
	tr := pipeline.TraceFrom(ctx)
	called := unix.NsecToTimespec(pipeline.ArrivalFrom(ctx).UnixNano())
	if w := e.takeWarm(ctx, s, stdio); w != nil {
		w.r.called = called
		tr.Mark("sbx: warm sandbox taken")
		res, err := w.call(ctx, s, stdio, tr)
		var ns notStarted
		if !errors.As(err, &ns) {
			if err == nil {
				res.Warnings = append(res.Warnings, e.laterWarnings()...)
				e.refill(s)
			}
			return res, err
		}
		// Nothing ran: the host may have changed since the launch (a
		// workspace removed and made again). Start cold, as a call
		// without a warm sandbox would.
		tr.Mark("sbx: warm sandbox could not start the command; cold start")
	}
	r, err := e.newRun(ctx, s, tr)
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.called = called
	if ctx.Err() != nil {
		return nil, context.Cause(ctx) // a signal while it was set up
	}
	l, err := r.launch(stdio)
	if err != nil {
		return nil, err
	}
	if err := r.complete(ctx, l, s); err != nil {
		return nil, err
	}
	r.res.Warnings = append(r.res.Warnings, e.laterWarnings()...)
	e.refill(s)
	return r.res, nil
}

// notStarted is an error after which nothing of the command ran: the
// sandbox could not be set up.
type notStarted struct{ err error }

func (e notStarted) Error() string { return e.err.Error() }
func (e notStarted) Unwrap() error { return e.err }

// newRun prepares everything a sandbox needs before its helper starts:
// the run directory, the proxy, the cgroups, the mount plan. On error,
// what was made is removed.
func (e *Executor) newRun(ctx context.Context, s *pipeline.Spec, tr *pipeline.Trace) (_ *run, err error) {
	bwrap, exe, err := e.paths()
	if err != nil {
		return nil, err
	}
	s, err = e.protectState(s)
	if err != nil {
		return nil, err
	}
	tr.Mark("sbx: binaries found, state protected")
	res := &pipeline.Result{}
	// An earlier run's helper that outlived its killed sbx merges on its
	// own: this run waits for it (for a while), so as not to start on a
	// half-merged workspace.
	if rep, err := CleanStale(ctx, e.StateDir, exe, orphanMergeWait); err != nil {
		res.Warnings = append(res.Warnings, "finishing an earlier killed run: "+err.Error())
	} else {
		res.Warnings = append(res.Warnings, staleNotes(rep)...)
	}
	if e.Warm {
		e.pool.noteTried(deadRuns(e.StateDir)) // what takeWarm need not wait for
	}
	runDir, rec, err := newRunDir(e.StateDir)
	if err != nil {
		return nil, fmt.Errorf("linux: run directory: %w", err)
	}
	tr.Mark("sbx: earlier runs checked, run directory made")
	r := &run{e: e, spec: s, runDir: runDir, rec: rec, res: res, trace: tr, bwrap: bwrap, exe: exe}
	if r.inner, err = e.innerExe(); err != nil {
		tr.Printf("the helper and the init are sbx itself: %v", err)
	}
	r.stamps.Store(tr)
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if s.Net != nil {
		if err := r.startProxy(); err != nil {
			return nil, err
		}
		tr.Mark("sbx: proxy serving")
	}
	if s.Limits.MaxDisk > 0 {
		r.budgetStage = filepath.Join(runDir, "disk")
	}
	if err := r.checkTmpLimit(); err != nil {
		return nil, err
	}
	if err := r.makeCgroups(); err != nil {
		return nil, err
	}
	tr.Mark("sbx: cgroups")
	if err := r.buildPlan(); err != nil {
		return nil, err
	}
	tr.Mark("sbx: credential files, mount plan")
	return r, nil
}

// makeCgroups creates the run's cgroups, or the rlimits that stand in for
// them.
func (r *run) makeCgroups() error {
	cg, err := newCgroups(r.spec.Limits, "sbx-"+filepath.Base(r.runDir))
	if err != nil {
		fb, ferr := fallbackLimits(r.spec.Limits, err, os.Getuid())
		if ferr != nil {
			return ferr
		}
		r.rl = fb
		r.res.Warnings = append(r.res.Warnings, fb.notes...)
	}
	r.cg = cg
	cg.warmAttach() // the command's move into it comes once the init forked it
	return nil
}

// buildPlan writes the masked credential files and builds the mount plan
// (and the fallback plan of a best-effort disk budget).
func (r *run) buildPlan() error {
	s := r.spec
	var socks []string
	socks, r.res.Warnings = allowedSockets(s.Platform.UnixSockets, r.res.Warnings)
	r.sockets = socks
	masked, err := writeMasked(r.runDir, s.MaskedFiles)
	if err != nil {
		return fmt.Errorf("linux: masked credential files: %w", err)
	}
	in := PlanInput{
		Masked:        masked,
		UnixSockets:   socks,
		Policy:        s.FS,
		EmptyFile:     filepath.Join(r.runDir, emptyFile),
		Exe:           r.exe,
		ProxySocket:   r.proxySocket,
		HandoffSocket: r.handoffSocket,
		ExtraROBinds:  r.trust.Files(),
		TmpSize:       s.Limits.MaxTmp,
		BudgetStage:   r.budgetStage,
		StateDir:      realDir(r.e.StateDir),
	}
	r.plan = BuildPlan(in)
	r.hidden = hiddenIDs(r.plan)
	if r.budgetStage != "" && s.Limits.Soft(pipeline.LimitDisk) {
		// A default budget the host cannot set up: the writes are staged
		// on disk, /tmp stays bounded.
		in.BudgetStage = ""
		if in.TmpSize == 0 {
			in.TmpSize = s.Limits.MaxDisk
		}
		r.fallbackPlan = BuildPlan(in)
	}
	return nil
}

// close removes the run's cgroups, stops its proxy and removes its
// directory.
func (r *run) close() {
	r.cg.remove()
	keep := r.keepUnmerged()
	r.res.Warnings = append(r.res.Warnings, r.removeNet()...)
	if !keep {
		r.res.Warnings = append(r.res.Warnings, r.removeRun()...)
	}
	r.rec.release()
}

// closeLater is close for a warm call, whose executor outlives it: the
// cgroups and the check that the writes were merged now, the proxy and
// the directories once the result is out (their warnings come with the
// executor's next result).
func (r *run) closeLater() {
	r.cg.remove()
	keep := r.keepUnmerged()
	r.e.later(func() []string {
		ws := r.removeNet()
		if !keep {
			ws = append(ws, r.removeRun()...)
		}
		r.rec.release()
		return ws
	})
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
			if !l.Soft(pipeline.LimitTmp) {
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
		msg := fmt.Sprintf("an earlier run was killed (%s); the merge of its writes was finished: %d change(s) applied", filepath.Base(dir), m.Applied)
		if n := len(m.Refused) + len(m.Conflicts) + len(m.Lost); n > 0 {
			msg += fmt.Sprintf(", %d not (below)", n)
		}
		out = append(out, msg)
		for _, l := range lines {
			out = append(out, "earlier run: "+l)
		}
	}
	for _, n := range rep.Notes {
		out = append(out, "earlier run: "+n)
	}
	return out
}

type run struct {
	e *Executor
	// sandbox is the launched sandbox's init, for pause.
	sandbox atomic.Pointer[sandboxPID]
	spec    *pipeline.Spec
	runDir  string
	// called is when the call came: the host's changes before it are the
	// command's starting point, not conflicts.
	called unix.Timespec
	// bwrap and exe are the binaries; plan is the mount plan.
	bwrap, exe string
	// inner is the sealed memfd the helper and the init run from; nil
	// when they run from exe.
	inner *os.File
	plan  []Op
	// hidden are the identities of the host paths the plan hides or masks
	// when it was built (hiddenIDs).
	hidden map[string]hiddenID
	// readHidden are the hidden paths Landlock keeps unreadable to the
	// command whatever the host puts there (see InitSpec.Hidden).
	readHidden []string
	rec        *record
	res        *pipeline.Result
	// proxy serves the sandbox's network; proxySocket is its Unix socket.
	proxy       *proxy.Server
	proxySocket string
	// handoffSocket is where the bridge hands the command's connections
	// to the proxy.
	handoffSocket string
	// trace records the run's phases for --debug (nil: none).
	trace *pipeline.Trace
	// stamps is where the init's stamps go, read by the goroutine that
	// reads them: the run's trace, or the call's once a warm call takes
	// the run.
	stamps atomic.Pointer[pipeline.Trace]
	// trust is the per-run CA and its files, when TLS is terminated for
	// bound credentials.
	trust *proxy.Trust
	// blocked collects the destinations the proxy refused.
	blocked proxy.Blocked
	// cg holds the run's cgroups when limits need them; cgErr is set if
	// the command could not join them (it is then never run), cgWarn
	// instead when the limits were best-effort defaults.
	cg     *cgroups
	cgErr  error
	cgWarn string
	// tmpLimited: the private /tmp is a size-limited tmpfs.
	tmpLimited bool
	// sockets are the host Unix sockets the command may connect to (real
	// paths, bound into the sandbox).
	sockets []string
	// tmpFull is set when the init reported the size-limited /tmp full.
	tmpFull bool
	// budgetStage is set when the writes are staged in a disk budget
	// (--max-disk); txRep is what the transaction helper reported.
	budgetStage string
	txRep       *TxReport
	// deadStatus is the command's status when its helper died before its
	// report and sbx finished the merge (finishDeadHelper).
	deadStatus *int
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
	// The directory is recorded before it exists, so a kill at any moment
	// leaves none that a later clean-up does not know of.
	dir := filepath.Join(os.TempDir(), "sbx-net-"+randomSuffix())
	r.rec.NetDir = dir
	if err := writeJSON(filepath.Join(r.runDir, recordFile), r.rec); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		r.rec.NetDir = "" // not ours: never removed
		return fmt.Errorf("linux: proxy directory: %w", err)
	}
	// Locked before its owner is named: a sweep that finds the owner
	// link finds the lock too (and without the link, the directory is
	// too young to sweep).
	r.rec.hold(dir)
	if err := markNetDir(dir, r.rec); err != nil {
		return fmt.Errorf("linux: proxy directory: %w", err)
	}
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
		Ask:           r.ask,
		Resolve:       r.e.Resolve,
		Audit:         r.blocked.Wrap(r.e.Audit),
		Secrets:       r.spec.Secrets,
	}
	go r.proxy.Serve(ln)
	r.handoffSocket = filepath.Join(dir, "handoff.sock")
	h, err := proxy.ListenHandoff(r.handoffSocket)
	if err != nil {
		return fmt.Errorf("linux: proxy hand-over socket: %w", err)
	}
	go r.proxy.Serve(h)
	if r.e.OnProxyStart != nil {
		r.e.OnProxyStart(r.proxy.Close)
	}
	return nil
}

// keepUnmerged reports whether the run directory holds writes the merge
// did not take (the helper recorded, no report), and says so in the
// result: they are kept for the next run to merge.
func (r *run) keepUnmerged() bool {
	if fileExists(filepath.Join(r.runDir, helperFile)) && !fileExists(filepath.Join(r.runDir, reportFile)) {
		r.res.Warnings = append(r.res.Warnings, "the command's writes were not merged; they are kept in "+r.runDir+" for the next run (or sbx doctor --clean) to merge")
		return true
	}
	return false
}

// removeNet stops the proxy and removes its directory.
func (r *run) removeNet() []string {
	if r.proxy != nil {
		r.proxy.Close()
	}
	if r.rec.NetDir != "" {
		if err := os.RemoveAll(r.rec.NetDir); err != nil {
			return []string{err.Error()}
		}
	}
	return nil
}

// removeRun removes the run directory of a merged run.
func (r *run) removeRun() []string {
	// The helper's record goes first: a removal cut short by a kill never
	// leaves a directory that looks like an unmerged run.
	_ = os.Remove(filepath.Join(r.runDir, helperFile))
	if err := forceRemoveAll(r.runDir); err != nil {
		return []string{err.Error()}
	}
	return nil
}

// randomSuffix is 16 random hex digits.
func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// launched is a sandbox whose init has been started and waits for its
// spec (the command) on fd 3.
type launched struct {
	fds    *childFDs
	cmd    *exec.Cmd
	tx     *txCtl
	out    *helperOut
	exited <-chan error
	txRep  chan *TxReport
	trace  *pipeline.Trace
	// rep is the helper's report, once finished has delivered.
	rep       *TxReport
	target    *sandboxPID
	initState <-chan initState
	// running is closed once the init runs (its signal handlers set), or
	// its messages ended without that.
	running <-chan struct{}
	// spec is the init's spec pipe; start takes the clock from which the
	// host's changes are conflicts.
	spec  *specOut
	start chan TxStart
}

// launch opens the descriptor table and starts the transaction helper
// (which mounts the writable roots and runs bubblewrap, which runs the
// init); the init then waits for its spec.
func (r *run) launch(stdio pipeline.Stdio) (*launched, error) {
	init, plan := r.initSpec(r.plan)
	if len(init.ReadOnly) > 0 {
		r.trace.Printf("init: read-only binds: %s", shellQuote(init.ReadOnly))
	}
	r.trace.Printf("init: writable (Landlock): %s", shellQuote(init.Writable))
	fds, err := openChildFDs(stdio, r.cg != nil)
	if err != nil {
		return nil, err
	}
	init.QuietFD = quietFD(len(fds.table()))
	policy, err := json.Marshal(init)
	if err != nil {
		fds.closeChildEnds()
		fds.closeParentEnds()
		return nil, err
	}
	l := &launched{fds: fds, target: newSandboxPID()}
	r.sandbox.Store(l.target)
	cmd, tx, out, err := r.helperCmd(r.bwrap, r.exe, plan, fds)
	if err != nil {
		fds.closeChildEnds()
		l.release()
		return nil, err
	}
	l.cmd, l.tx, l.out = cmd, tx, out
	r.trace.Mark("sbx: helper's command prepared")
	l.exited, err = startOnLockedThread(cmd)
	fds.closeChildEnds()
	if err != nil {
		l.release()
		return nil, fmt.Errorf("%w: start bubblewrap: %v", pipeline.ErrUnavailable, err)
	}
	r.trace.Mark("sbx: helper started")
	l.spec = sendPolicy(fds.specW, policy)
	fds.specW = nil
	l.txRep = make(chan *TxReport, 1)
	l.start = make(chan TxStart, 1)
	go tx.exchange(l.txRep, l.start)
	initPID := r.watchInfo(fds.infoR, cmd.Process.Pid, l.target)
	l.initState, l.running = r.watchReady(fds.readyR, fds.holdW, initPID, l.target)
	fds.infoR, fds.readyR, fds.holdW = nil, nil, nil
	return l, nil
}

// specOut is sbx's end of the init's spec pipe: the policy goes at the
// launch, the command with the call, then EOF (EOF with no command means
// none).
type specOut struct {
	w    *os.File
	sent chan error // the policy's write ended
}

// sendPolicy writes the init's policy in the background (a large one
// fills the pipe until the init reads it).
func sendPolicy(w *os.File, policy []byte) *specOut {
	o := &specOut{w: w, sent: make(chan error, 1)}
	go func() {
		_, err := w.Write(policy)
		o.sent <- err
	}()
	return o
}

// send writes the command (nil: none) once the policy is written, and
// closes the pipe. What fits in the pipe now is written from the caller's
// goroutine: a hand-over to another goroutine waited behind whatever sbx
// did next (the signal set-up of the supervision, ~0.3 ms). It never
// blocks: a policy not yet written (a cold run: the init is still starting)
// or a command larger than the pipe's free room is left to a goroutine, so
// the supervision's timeout and context hold from here on.
func (o *specOut) send(call []byte) {
	select {
	case err := <-o.sent:
		if err != nil || call == nil {
			o.w.Close()
			return
		}
		n := o.writeNow(call)
		if n == len(call) {
			o.w.Close()
			return
		}
		call = call[n:]
		go func() {
			o.w.Write(call) // an error: the init is gone, and says so
			o.w.Close()
		}()
	default:
		go func() {
			if err := <-o.sent; err == nil && call != nil {
				o.w.Write(call)
			}
			o.w.Close()
		}()
	}
}

// writeNow writes what of b the pipe takes without waiting (the pipe is
// non-blocking: os.Pipe), and says how much.
func (o *specOut) writeNow(b []byte) int {
	rc, err := o.w.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, err := unix.Write(int(fd), b[n:])
			if err == unix.EINTR {
				continue
			}
			if err != nil || m <= 0 {
				break
			}
			n += m
		}
		return true
	})
	return n
}

// release closes sbx's ends of the launched sandbox's descriptors.
func (l *launched) release() {
	l.fds.closeParentEnds()
	if l.tx != nil {
		l.tx.parent.Close()
	}
	l.target.close()
}

// complete sends the init the command of s (nil: none, and the init exits
// without running anything), supervises until the helper has exited, and
// fills the run's result.
func (r *run) complete(ctx context.Context, l *launched, s *pipeline.Spec) error {
	defer l.release()
	r.sendClock(l, s)
	// Until the init runs, a signal stops the run (pipeline.CatchSignals):
	// the command is not sent, and the sandbox ends by itself; it is not
	// killed, as the helper may not yet handle the SIGTERM that kill sends
	// it (a Go process ends by one that comes before its handler is set:
	// the run's writes, none, would wait for the next run to merge).
	l.awaitInit(ctx, s)
	svCtx := ctx
	stopped := s != nil && pipeline.CommandStarts(ctx) != nil
	if stopped {
		s, svCtx = nil, context.WithoutCancel(ctx)
	}
	if err := r.sendCall(l, s); err != nil {
		return err
	}
	target, cmd := l.target, l.cmd
	sv := pipeline.Supervision{Signal: target.signal, Kill: func() {
		target.signal(syscall.SIGKILL) // PID 1: the whole namespace goes
		// The helper kills bubblewrap, then merges what was written.
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}}
	if s != nil {
		sv.Timeout = s.Timeout
	}
	l.trace = r.trace
	waitErr, timedOut, ctxErr := sv.Supervise(svCtx, l.finished())
	r.trace.Mark("sbx: helper done (report and output in)")
	r.res.TimedOut = timedOut
	if timedOut || ctxErr != nil {
		// Stopped, not ended: what the command wrote goes to readers that
		// may not be reading (a full pipe); sbx returns, as timeout(1)
		// does, after a bounded wait.
		if !waitWithin(l.fds.waitCopies, stoppedOutputWait) {
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("not all of the command's last output was delivered: its reader did not take it within %s", stoppedOutputWait))
		}
	} else {
		l.fds.waitCopies()
	}
	st := <-l.initState
	r.txRep = l.rep
	if r.txRep != nil {
		for _, s := range r.txRep.Stamps {
			r.trace.Add(pipeline.Stamp(s))
		}
	}
	switch {
	case ctxErr != nil:
		return ctxErr
	case stopped:
		return context.Cause(ctx)
	}
	r.tmpFull = st.tmpFull
	status, known := l.status()
	return r.finish(ctx, waitErr, st.ran, status, known, l.out.buf.String())
}

// sendClock sends the helper the clock from which the host's changes are
// conflicts: none can be when nothing runs (s nil).
func (r *run) sendClock(l *launched, s *pipeline.Spec) {
	if s == nil {
		now := coarseNow()
		l.start <- TxStart{Clock: &now}
		return
	}
	l.start <- r.e.conflictClock(r.called, r.spec.FS.Writable)
	r.trace.Mark("sbx: conflict clock past the call")
}

// awaitInit waits until the init runs, ctx ends, or s's timeout passes
// (a sandbox that never starts is then supervised, and killed, as any).
func (l *launched) awaitInit(ctx context.Context, s *pipeline.Spec) {
	var timeout <-chan time.Time
	if s != nil && s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-l.running:
	case <-ctx.Done():
	case <-timeout:
	}
}

// sendCall sends the init the command of s (nil: none).
func (r *run) sendCall(l *launched, s *pipeline.Spec) error {
	if s == nil {
		l.spec.send(nil)
		return nil
	}
	call, err := r.callSpec(s).MarshalBinary()
	if err != nil {
		l.spec.send(nil)
		return err
	}
	l.spec.send(call)
	return nil
}

// finished delivers once sbx is done with the helper: its report, which
// says bubblewrap's status (so the sandbox is gone and the merge made),
// and the end of its output came, or it exited. The helper's own exit
// goes on in the background (the exit channel reaps it).
func (l *launched) finished() <-chan error {
	done := make(chan error, 1)
	go func() {
		select {
		case rep := <-l.txRep:
			l.rep = rep
			if rep != nil && rep.Status != nil {
				l.trace.Mark("sbx: report received")
				l.out.drain()
				done <- nil
				return
			}
			err := <-l.exited
			<-l.out.done
			done <- err
		case err := <-l.exited:
			l.rep = <-l.txRep // the helper is gone: the report, or nil, is there
			<-l.out.done
			done <- err
		}
	}()
	return done
}

// status is the command's exit status: from the helper's report, or from
// the helper's own exit.
func (l *launched) status() (int, bool) {
	if l.rep != nil && l.rep.Status != nil {
		return *l.rep.Status, true
	}
	if st := l.cmd.ProcessState; st != nil {
		return pipeline.ExitStatus(st), true
	}
	return 0, false
}

// helperOut is the helper's (and bubblewrap's) stdout and stderr: done is
// closed at its end.
type helperOut struct {
	buf  bytes.Buffer
	done chan struct{}
	r    *os.File
}

// drain ends the reading once what is in the pipe now is read: once the
// helper has sent its report, all it had to say is in the pipe, and
// bubblewrap, which may still be exiting (it holds the pipe until then),
// says nothing more.
func (o *helperOut) drain() {
	_ = o.r.SetReadDeadline(time.Now())
	<-o.done
}

// writeMasked writes each masked file's content into the run directory
// (read-only) and maps its path to that copy.
func writeMasked(runDir string, files []pipeline.MaskedFile) (map[string]string, error) {
	out := map[string]string{}
	for i, f := range files {
		p := filepath.Join(runDir, fmt.Sprintf("masked-%d", i))
		if err := os.WriteFile(p, f.Content, 0o444); err != nil {
			return nil, err
		}
		out[f.Path] = p
	}
	return out, nil
}

// roots are the paths of the run's writable roots (each an overlay).
func (r *run) roots() []string {
	var out []string
	for _, w := range r.spec.FS.Writable {
		out = append(out, w.Path)
	}
	return out
}

// initSpec is the init's part of the run; with root, the read-only binds
// move from bubblewrap's plan to the init (see SplitPlan).
func (r *run) initSpec(plan []Op) (InitSpec, []Op) {
	writable := []string{"/dev", "/tmp"}
	for _, w := range append(slices.Clone(r.spec.FS.Writable), r.spec.FS.Caches...) {
		writable = append(writable, w.Path)
	}
	var missing []string
	for _, m := range r.spec.FS.DenyReadMissing {
		missing = append(missing, m.Path)
	}
	hidden, files, readable := ReadHiding(plan, r.roots(), writable, missing)
	var names []HiddenName
	for _, n := range r.spec.FS.DenyReadNames {
		if !slices.ContainsFunc(append(slices.Clone(writable), "/proc"), func(w string) bool { return fsrules.Within(n.Dir, w) }) {
			names = append(names, HiddenName{Dir: n.Dir, Name: n.Name})
		}
	}
	if _, err := LandlockABI(); err == nil {
		r.readHidden = hidden
	}
	var masks []MaskFile
	for _, op := range files {
		var st unix.Stat_t
		if err := unix.Stat(op.Src, &st); err == nil {
			masks = append(masks, MaskFile{Path: op.Dst, Dev: uint64(st.Dev), Ino: st.Ino})
		}
	}
	// The init can make its read-only binds only where the sandbox's user
	// namespace owns its mount namespace: when sbx runs as root. For other
	// users bubblewrap nests the sandbox in a second user namespace (to map
	// the caller's uid), so bubblewrap makes every mount itself.
	var readOnly []string
	if os.Getuid() == 0 {
		plan, readOnly = SplitPlan(plan)
	}
	init := InitSpec{Writable: writable, Hidden: hidden, HiddenNames: names, Readable: readable, Masks: masks,
		ReadOnly: readOnly, RequireLandlock: r.e.RequireLandlock, TmpLimited: r.tmpLimited, Hold: r.cg != nil,
		UnixSockets: r.sockets, AllUnixSockets: r.spec.Platform.AllUnixSockets}
	for _, c := range r.spec.FS.Caches {
		init.Direct = append(init.Direct, c.Path)
	}
	if l := r.spec.Limits; l.MaxCPU > 0 || l.MaxOpenFiles > 0 {
		init.CPUSeconds = uint64((l.MaxCPU + time.Second - 1) / time.Second)
		init.OpenFiles = uint64(l.MaxOpenFiles)
	}
	if r.rl != nil {
		init.Procs, init.DataBytes = r.rl.procs, r.rl.data
	}
	if r.proxy != nil {
		init.Bridge = &BridgeSpec{Socket: r.proxySocket, Handoff: r.handoffSocket, HTTPPort: BridgeHTTPPort, SOCKSPort: BridgeSOCKSPort}
	}
	return init, plan
}

// callSpec is the init's call for the command of s: the command, its
// environment (with the proxy's and the run's CA variables, and git told
// to cross the workspace's mount when the repository's top lies above it)
// and its directory.
func (r *run) callSpec(s *pipeline.Spec) InitCall {
	c := InitCall{Argv: s.Argv, Env: s.Env, Dir: s.Dir, Trace: r.trace != nil}
	if s.FS != nil && s.FS.GitAbove != "" && !slices.ContainsFunc(c.Env, func(kv string) bool {
		return strings.HasPrefix(kv, gitAcrossMounts+"=")
	}) {
		c.Env = append(slices.Clip(c.Env), gitAcrossMounts+"=1")
	}
	if r.proxy != nil {
		c.Env = proxy.Env(c.Env, BridgeHTTPPort, BridgeSOCKSPort)
		c.Env = r.trust.Env(c.Env)
	}
	return c
}

// gitAcrossMounts lets git's discovery of the repository cross mount
// points: each writable root is a mount of its own in the sandbox, where
// git would otherwise stop ("Stopping at filesystem boundary").
const gitAcrossMounts = "GIT_DISCOVERY_ACROSS_FILESYSTEM"

// procShadowed reports whether the plan mounts over /proc or a path in
// it (a denyRead of /proc/1, say): /proc/self/fd may then not be there
// for bubblewrap to run the init from, which runs from exe instead.
func procShadowed(plan []Op) bool {
	for _, op := range plan {
		if op.Dst == "/proc" || strings.HasPrefix(op.Dst, "/proc/") {
			return true
		}
	}
	return false
}

// procFD is the path by which a process runs the file at its descriptor
// fd (the kernel opens it before it closes the close-on-exec ones).
func procFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// helperCmd prepares the transaction helper's process: bubblewrap's argv
// (and the fallback's), the transaction spec recorded in the run
// directory, and the descriptor table of initspec.go.
func (r *run) helperCmd(bwrap, exe string, plan []Op, fds *childFDs) (*exec.Cmd, *txCtl, *helperOut, error) {
	extra := fds.table()
	initPath := exe
	if r.inner != nil && !procShadowed(plan) {
		initPath = procFD(innerBwrapFD(len(extra)))
	}
	args := BwrapArgs(plan, BwrapOptions{InfoFD: infoFD}, []string{initPath, InitArg})
	r.trace.Printf("bubblewrap: %s", shellQuote(append([]string{bwrap}, args...)))
	txs, err := r.txSpec(bwrap, args, len(extra))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("linux: run directory: %w", err)
	}
	if fb := r.fallbackPlan; fb != nil {
		if os.Getuid() == 0 {
			fb, _ = SplitPlan(fb)
		}
		txs.FallbackArgs = BwrapArgs(fb, BwrapOptions{InfoFD: infoFD}, []string{initPath, InitArg})
	}
	// The helper runs from exe, or from the memfd at the descriptor
	// after the control socket's (its argv[0] names sbx either way).
	path, files := exe, append(slices.Clip(extra), nil)
	if r.inner != nil {
		txs.InnerFD = 3 + len(files)
		files = append(files, r.inner)
		path = procFD(txs.InnerFD)
	}
	tx, err := newTxCtl(exe, txs, len(extra))
	if err != nil {
		return nil, nil, nil, err
	}
	files[len(extra)] = tx.child
	fds.later = append(fds.later, tx.child)
	pr, pw, err := os.Pipe()
	if err != nil {
		tx.parent.Close()
		return nil, nil, nil, err
	}
	fds.later = append(fds.later, pw)
	out := &helperOut{done: make(chan struct{}), r: pr}
	go func() {
		defer close(out.done)
		defer pr.Close()
		io.Copy(&out.buf, io.LimitReader(pr, 1<<20))
		io.Copy(io.Discard, pr)
	}()
	cmd := &exec.Cmd{
		Path:        path,
		Args:        tx.argv,
		Env:         txEnv(),
		Dir:         "/",
		Stdout:      pw,
		Stderr:      pw,
		ExtraFiles:  files,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	txSysProcAttr(cmd.SysProcAttr)
	return cmd, tx, out, nil
}

// finish turns bubblewrap's exit into a result. bwrap exits with the init's
// status, which is the command's; a bwrap that never started the init is a
// setup failure, reported as an error with bwrap's own message.
func (r *run) finish(ctx context.Context, waitErr error, initRan bool, status int, known bool, bwrapOut string) error {
	if r.cgErr != nil {
		return fmt.Errorf("%w: the command could not join its cgroup: %v", pipeline.ErrUnavailable, r.cgErr)
	}
	if err := r.txResult(ctx, initRan); err != nil {
		return err
	}
	if !known {
		return fmt.Errorf("linux: bubblewrap: %w", waitErr)
	}
	if !initRan && !r.res.TimedOut {
		msg := bytes.TrimSpace([]byte(bwrapOut))
		if len(msg) == 0 {
			msg = []byte(fmt.Sprintf("exit status %d", status))
		}
		if moved := r.movedHidden(); moved != "" {
			// Not the host's lack: a race with it, which a new run wins.
			return notStarted{fmt.Errorf("bubblewrap could not build the sandbox: %s: %s was replaced on the host while the sandbox was set up; nothing was run: run it again", msg, moved)}
		}
		return notStarted{fmt.Errorf("%w: bubblewrap could not build the sandbox: %s", pipeline.ErrUnavailable, msg)}
	}
	if r.deadStatus != nil {
		status = *r.deadStatus
	}
	r.res.ExitCode = status
	r.res.Warnings = append(r.res.Warnings, r.unhidden()...)
	if r.cgWarn != "" {
		r.res.Warnings = append(r.res.Warnings, r.cgWarn)
	} else if r.cg != nil {
		r.res.LimitHit = r.cg.hit(r.spec.Limits)
	}
	if r.res.LimitHit == "" && r.txRep != nil && r.txRep.Full && r.spec.Limits.MaxDisk > 0 {
		r.res.LimitHit = fmt.Sprintf("the disk budget is spent (--max-disk %s)", sizeString(r.spec.Limits.MaxDisk))
	}
	if r.res.LimitHit == "" && r.tmpFull {
		r.res.LimitHit = fmt.Sprintf("the private /tmp is full (--max-tmp %s)", sizeString(r.spec.Limits.MaxTmp))
	}
	if l := r.spec.Limits; r.res.LimitHit == "" && !r.res.TimedOut && l.MaxCPU > 0 &&
		(r.res.ExitCode == 128+int(syscall.SIGXCPU) || r.res.ExitCode == 128+int(syscall.SIGKILL)) {
		r.res.LimitHit = fmt.Sprintf("CPU time (--max-cpu %s)", l.MaxCPU)
	}
	if out := bytes.TrimSpace([]byte(bwrapOut)); len(out) > 0 {
		r.res.Warnings = append(r.res.Warnings, "bubblewrap: "+string(out))
	}
	r.res.Blocked = r.blocked.Lines()
	return nil
}

// orphanMergeWait bounds a run's wait for the merge of an earlier run
// whose sbx was killed.
const orphanMergeWait = 10 * time.Second

// stoppedOutputWait bounds the wait for the command's output to reach its
// readers once the command was stopped (timeout, cancellation).
const stoppedOutputWait = time.Second

// waitWithin runs wait and reports whether it returned within d (if not,
// it goes on in the background).
func waitWithin(wait func(), d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// fileStdio turns the streams into files for the child. Non-file readers and
// writers get a pipe and a copying goroutine; waitCopies waits for those to
// drain after the child has exited. On error, closeLater still holds what
// was opened.
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
		return nil, closeLater, wg.Wait, err
	}
	stdout, err := out(s.Stdout)
	if err != nil {
		return nil, closeLater, wg.Wait, err
	}
	// As os/exec does: the same writer for both streams gets one pipe, so
	// only one goroutine ever writes to it.
	stderr := stdout
	if !sameWriter(s.Stdout, s.Stderr) {
		if stderr, err = out(s.Stderr); err != nil {
			return nil, closeLater, wg.Wait, err
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

// hostPIDBelow finds, among the descendants of root (the helper, the first
// process of its own pid namespace), the process whose pid in that
// namespace is nsPID, and returns its pid on the host.
func hostPIDBelow(root, nsPID int) (int, error) {
	queue := []int{root}
	for len(queue) > 0 && len(queue) < 4096 {
		pid := queue[0]
		queue = queue[1:]
		if pid != root {
			if ns, ok := nsPIDs(pid); ok && len(ns) > 1 && ns[1] == nsPID {
				return pid, nil
			}
		}
		kids, err := childrenOf(pid)
		if err != nil {
			continue // it exited meanwhile
		}
		queue = append(queue, kids...)
	}
	return 0, fmt.Errorf("no process below %d has pid %d in its namespace", root, nsPID)
}

// nsPIDs reads a process's pids in each pid namespace it is in, from the
// host's outward in.
func nsPIDs(pid int) ([]int, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			var out []int
			for _, f := range strings.Fields(rest) {
				n, err := strconv.Atoi(f)
				if err != nil {
					return nil, false
				}
				out = append(out, n)
			}
			return out, true
		}
	}
	return nil, false
}

// childrenOf lists a process's children, from /proc/PID/task/*/children
// or, where the kernel lacks that file, from every process's parent. The
// task directory is listed once and each thread's file read by name: a
// glob would list every thread's directory too (~55 entries each, built
// by the kernel on every listing).
func childrenOf(pid int) ([]int, error) {
	taskDir := fmt.Sprintf("/proc/%d/task", pid)
	d, err := os.Open(taskDir)
	if err != nil {
		return nil, err // it exited
	}
	tids, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	var out []int
	read := false
	for _, tid := range tids {
		data, err := os.ReadFile(taskDir + "/" + tid + "/children")
		if errors.Is(err, fs.ErrNotExist) {
			continue // a thread that exited since the listing, or no such file
		}
		if err != nil {
			return nil, err
		}
		read = true
		for _, f := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	if !read && len(tids) > 0 {
		if _, err := os.Stat(taskDir + "/" + tids[0]); err == nil {
			return childrenByStat(pid) // the kernel has no children files
		}
	}
	return out, nil
}

// childrenByStat lists a process's children from every process's parent
// (the fourth field of /proc/PID/stat): slower, but per process.
func childrenByStat(pid int) ([]int, error) {
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

// allowedSockets resolves the host sockets the settings allow
// (sandbox.network.allowUnixSockets) to their real paths; a path that is
// not absolute or is not a socket now is left out, with a warning.
func allowedSockets(paths, warnings []string) ([]string, []string) {
	var out []string
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		switch {
		case !filepath.IsAbs(p):
			err = errors.New("not an absolute path")
		case err == nil:
			var fi os.FileInfo
			if fi, err = os.Stat(real); err == nil && fi.Mode().Type() != os.ModeSocket {
				err = errors.New("not a socket")
			}
		}
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("sandbox.network.allowUnixSockets: %s: %v; left out", p, err))
			continue
		}
		out = append(out, real)
	}
	return out, warnings
}

// shellQuote joins argv as bash would read it back (for --debug); an
// argument bash cannot quote is shown in Go syntax.
func shellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			q = strconv.Quote(a)
		}
		out[i] = q
	}
	return strings.Join(out, " ")
}

// realDir is dir with its symbolic links resolved (a ~/.local that is a
// link: bubblewrap makes a mount point's parents without following
// links), or dir as it is when that fails.
func realDir(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return dir
}
