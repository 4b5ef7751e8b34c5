//go:build linux && !sbxinner

package linux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/pipeline"
)

// txCtl is sbx's side of the transaction helper: the control socket (the
// spec goes out, the report comes back) and the helper's argv.
type txCtl struct {
	parent, child *os.File
	argv          []string
	spec          TxSpec
}

// newTxCtl prepares a helper call with spec; the helper finds its control
// socket at descriptor 3+nfiles.
func newTxCtl(exe string, spec TxSpec, nfiles int) (*txCtl, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("linux: transaction helper: %w", err)
	}
	return &txCtl{
		parent: os.NewFile(uintptr(fds[0]), "tx-control"),
		child:  os.NewFile(uintptr(fds[1]), "tx-control"),
		argv:   []string{exe, TxHelperArg, strconv.Itoa(3 + nfiles)},
		spec:   spec,
	}, nil
}

// txSpec is the transaction of this run: its writable roots, its policy,
// and where it stages and saves. It is written to the run directory before
// the helper starts, so that a clean-up can finish what a killed helper
// left.
func (r *run) txSpec(bwrap string, args []string, nfiles int) (TxSpec, error) {
	spec := TxSpec{
		Bwrap: bwrap, BwrapArgs: args, NFiles: nfiles, InfoFD: 4,
		RunDir: r.runDir, StateDir: r.e.StateDir, NetDir: r.rec.NetDir, AckReport: true,
		Size:       r.spec.Limits.MaxDisk,
		Roots:      r.spec.FS.Writable,
		Policy:     r.spec.FS,
		Discard:    r.spec.Discard,
		BestEffort: r.spec.Limits.Soft(pipeline.LimitDisk),
	}
	saved := spec
	saved.BwrapArgs, saved.Bwrap, saved.InnerFD = nil, "", 0
	return spec, writeJSON(filepath.Join(r.runDir, txFile), saved)
}

// sysProcAttr puts the helper in a user namespace of its own (the caller's
// uid and gid mapped to themselves) and a mount namespace, with
// CAP_SYS_ADMIN there to mount the overlays (and CAP_DAC_OVERRIDE, which
// overlayfs needs in its mode-0 work directory and the merge in
// directories the command made unreadable; both hold only over files of
// the caller's own uid). If sbx dies, the helper gets SIGTERM: it kills
// the sandbox and still merges.
func txSysProcAttr(a *syscall.SysProcAttr) {
	uid, gid := os.Getuid(), os.Getgid()
	// A pid namespace of its own: whatever way the helper ends, the
	// kernel kills every process below it, bubblewrap's sandbox child
	// too, even one still waiting for a bubblewrap parent that is gone.
	a.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	a.GidMappingsEnableSetgroups = false
	if uid != 0 {
		a.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_DAC_OVERRIDE}
	}
	a.Pdeathsig = syscall.SIGTERM
}

// exchange sends the spec, then the start clock when it comes, and
// delivers the report (nil if none came).
func (d *txCtl) exchange(out chan<- *TxReport, start <-chan TxStart) {
	enc := json.NewEncoder(d.parent)
	if err := enc.Encode(&d.spec); err != nil {
		out <- nil
		return
	}
	stop, sent := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sent)
		select {
		case c := <-start:
			enc.Encode(c)
		case <-stop:
		}
	}()
	var rep TxReport
	err := json.NewDecoder(d.parent).Decode(&rep)
	close(stop)
	<-sent
	// The helper waits for this before it exits (a helper that is
	// already gone makes it fail, which is fine): without it, it cleans
	// up after sbx as after a dead one.
	_ = enc.Encode(TxStart{Ack: true})
	if err != nil {
		out <- nil
		return
	}
	out <- &rep
}

// callHelper runs a helper that needs no bubblewrap (a probe, a recovery)
// and returns its report.
func callHelper(ctx context.Context, exe string, spec TxSpec) (*TxReport, error) {
	spec.AckReport = true // exchange acknowledges
	d, err := newTxCtl(exe, spec, 0)
	if err != nil {
		return nil, err
	}
	defer d.parent.Close()
	cmd := exec.CommandContext(ctx, exe, TxHelperArg, "3")
	cmd.ExtraFiles = []*os.File{d.child}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	txSysProcAttr(cmd.SysProcAttr)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		d.child.Close()
		return nil, fmt.Errorf("cannot start the transaction helper in a user and mount namespace of its own: %w", err)
	}
	d.child.Close()
	ch := make(chan *TxReport, 1)
	start := make(chan TxStart, 1)
	now := coarseNow()
	start <- TxStart{Clock: &now}
	d.exchange(ch, start)
	rep := <-ch
	werr := cmd.Wait()
	if rep == nil {
		return nil, fmt.Errorf("the transaction helper failed: %v %s", werr, strings.TrimSpace(out.String()))
	}
	return rep, nil
}

// txResult reads the helper's report into the result: a transaction that
// could not be set up stops the run with an error (nothing ran); a helper
// that died says whether the command ran (initRan).
func (r *run) txResult(ctx context.Context, initRan bool) error {
	rep := r.txRep
	switch {
	case rep == nil && !initRan && r.res.TimedOut:
		// The timeout stopped the helper before the command started (a
		// timeout of a few milliseconds): nothing ran, nothing was
		// written, and the result says it timed out.
		r.res.Warnings = append(r.res.Warnings, "the timeout came before the sandbox was up: nothing ran")
		status := 128 + int(syscall.SIGKILL)
		r.deadStatus = &status
		return nil
	case rep == nil && !initRan:
		return fmt.Errorf("%w: the transaction helper exited without a report; the command's writes are kept in %s and the next run (or sbx doctor --clean) merges them", pipeline.ErrUnavailable, r.runDir)
	case rep == nil:
		return r.finishDeadHelper(ctx)
	}
	if rep.Error != "" {
		// The helper's error says why (a mount point in the workspace, a
		// budget too small for what must be staged): this names only what
		// was tried, without blaming the budget for what is not its.
		what := "the writable roots cannot be made transactional here"
		if r.spec.Limits.MaxDisk > 0 {
			what += " with the disk budget (--max-disk)"
		}
		return notStarted{fmt.Errorf("%w: %s: %s", pipeline.ErrUnavailable, what, rep.Error)}
	}
	if rep.Notice != "" {
		r.res.Warnings = append(r.res.Warnings, "default limits not enforced: disk budget: "+rep.Notice)
	}
	r.res.Warnings = append(r.res.Warnings, rep.Warnings...)
	r.res.Changes = changesOf(&rep.Merge, r.spec.Discard)
	return nil
}

// finishDeadHelper finishes, at once, the merge of a helper that died
// during it (killed, out of memory) while sbx lives, as the next run
// would: the result then says what reached the host, and no later run
// reports the same writes again. The helper was PID 1 of its PID
// namespace, so nothing of the sandbox is left to write; what it staged
// in a memory-backed disk budget went with it, and the merge says so. The
// command's status is the one the helper noted when bubblewrap exited; a
// helper that died before that took the command with it (SIGKILL).
func (r *run) finishDeadHelper(ctx context.Context) error {
	const died = "the command ran, but the transaction helper died before its merge was complete"
	m, err := finishMerge(ctx, r.runDir, r.exe)
	if err != nil {
		return fmt.Errorf("%s: part of the command's writes may be applied; finishing the merge failed (%v): the rest is kept in %s and the next run (or sbx doctor --clean) merges it", died, err, r.runDir)
	}
	// Merged now: the run directory goes as a merged run's does.
	_ = os.Remove(filepath.Join(r.runDir, helperFile))
	r.res.Changes = changesOf(&m, r.spec.Discard)
	s, err := os.Readlink(filepath.Join(r.runDir, statusFile))
	status, convErr := strconv.Atoi(s)
	if err != nil || convErr != nil {
		status = 128 + int(syscall.SIGKILL)
		r.res.Warnings = append(r.res.Warnings, "the transaction helper died while the command ran, and the command was killed with its sandbox; sbx merged what it had written (the changes below)")
	} else {
		r.res.Warnings = append(r.res.Warnings, died+"; sbx finished the merge (the changes below)")
	}
	r.deadStatus = &status
	return nil
}

// changesOf turns a merge report into the result's changes.
func changesOf(m *MergeReport, discarded bool) *pipeline.Changes {
	c := &pipeline.Changes{Applied: m.Applied, Refused: m.Refused, Lost: m.Lost, Discarded: discarded,
		Would: m.Would, WouldMore: m.WouldMore}
	for _, k := range m.Conflicts {
		c.Conflicts = append(c.Conflicts, pipeline.Conflict(k))
	}
	for _, s := range m.Skipped {
		c.Notes = append(c.Notes, "not merged: "+s)
	}
	return c
}

// probeTx has the helper mount what a run would (an overlay; with size, a
// disk budget too) in a namespace of its own, staging in the state
// directory as runs do (the temporary directory when there is none).
func probeTx(ctx context.Context, exe, stateDir string, size int64) (*TxReport, error) {
	parent := ""
	if stateDir != "" {
		parent = filepath.Join(stateDir, "doctor")
		if err := os.MkdirAll(parent, 0o700); err != nil {
			return nil, &stateDirError{err}
		}
	}
	dir, err := os.MkdirTemp(parent, "sbx-doctor-tx-")
	if err != nil {
		return nil, &stateDirError{err}
	}
	defer forceRemoveAll(dir)
	return callHelper(ctx, exe, TxSpec{Probe: true, RunDir: dir, Size: size})
}

// stateDirError is a state directory sbx cannot write to.
type stateDirError struct{ err error }

func (e *stateDirError) Error() string { return "sbx's state directory: " + e.err.Error() }
func (e *stateDirError) Unwrap() error { return e.err }

// overlayfsMagic is OVERLAYFS_SUPER_MAGIC (statfs(2)).
const overlayfsMagic = 0x794c7630

// stagingFix is the fix for an overlay that cannot be mounted: named for
// the common cause, a state directory that is itself on overlayfs (a
// container's root file system), which overlayfs cannot stage on.
func stagingFix(stateDir string) string {
	var st unix.Statfs_t
	if stateDir != "" && unix.Statfs(stateDir, &st) == nil && st.Type == overlayfsMagic {
		return "sbx's state directory " + stateDir + " is on overlayfs (a container's root file system?), where an overlay cannot stage: " +
			"put it on a volume (docker run -v sbx-state:" + stateDir + ", as the Dockerfile's VOLUME does) or export XDG_STATE_HOME=/a/dir/on/ext4"
	}
	return "a kernel with overlayfs mountable in a user namespace (5.11 or later) and a state directory on a file system with user extended attributes (ext4, xfs, btrfs; tmpfs from 6.6), not on overlayfs"
}

// checkTx reports whether writes can be staged as a run stages them.
func checkTx(ctx context.Context, exe, stateDir string) Check {
	c := Check{Name: "transactional writes"}
	rep, err := probeTx(ctx, exe, stateDir, 0)
	var sde *stateDirError
	switch {
	case errors.As(err, &sde):
		c.Detail = "writes cannot be staged: " + err.Error()
		c.Fix = "make sbx's state directory writable: check HOME, or export XDG_STATE_HOME=/a/writable/dir"
	case err != nil:
		c.Detail = "writes cannot be staged: " + err.Error()
		c.Fix = "allow unprivileged user namespaces (see the user namespaces check)"
	case rep.Error != "":
		c.Detail = "NO overlay can be mounted in a user namespace here, so no command can run: " + rep.Error
		c.Fix = stagingFix(stateDir)
	default:
		c.OK = true
		c.Detail = "each writable root is an overlay; the command's writes reach the host through one checked merge when it ends"
	}
	return c
}

// checkBudget does the same with a disk budget (--max-disk).
func checkBudget(ctx context.Context, exe, stateDir string) Check {
	c := Check{Name: "disk budget"}
	rep, err := probeTx(ctx, exe, stateDir, 1<<20)
	switch {
	case err != nil:
		c.Detail = "--max-disk: NOT enforceable here: " + err.Error()
	case rep.Error != "":
		c.Detail = "--max-disk: NOT enforceable here: " + rep.Error
		c.Fix = "a kernel whose tmpfs has user extended attributes (6.6 or later)"
	default:
		c.OK = true
		c.Detail = "--max-disk: the writes are staged in a size-limited tmpfs"
	}
	return c
}

// CleanReport says what [CleanStale] did.
type CleanReport struct {
	Runs []string `json:"runs"` // stale run directories removed
	// Merged are the reports of killed runs whose writes were merged now
	// (or whose merge had completed), by run directory.
	Merged map[string]MergeReport `json:"merged,omitempty"`
	// Orphans are what runs whose sbx is gone left outside any state
	// directory and sbx doctor --clean removed: proxy directories in the
	// system's temporary directory, empty cgroups.
	Orphans []string `json:"orphans,omitempty"`
	// Notes are what was found and dealt with (a lost report).
	Notes  []string `json:"notes,omitempty"`
	Errors []string `json:"errors,omitempty"`
}

// CleanStale finishes what killed runs of sbx left behind: a merge that
// did not complete is completed (with exe, the sbx binary, as the helper),
// temporaries are removed, and the run directories go. Runs whose sbx
// still lives are skipped, and so are those whose helper (outliving a
// killed sbx, it merges on its own) still lives after wait.
func CleanStale(ctx context.Context, stateDir, exe string, wait time.Duration) (*CleanReport, error) {
	rep := &CleanReport{Merged: map[string]MergeReport{}}
	cleanStaging(stateDir)
	runs := filepath.Join(stateDir, "runs")
	ents, err := os.ReadDir(runs)
	if errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		dir := filepath.Join(runs, e.Name())
		deadline := time.Now().Add(wait)
		for busy(dir) && time.Now().Before(deadline) && !sbxAlive(dir) {
			time.Sleep(50 * time.Millisecond)
		}
		if busy(dir) {
			if _, err := os.Stat(filepath.Join(dir, recordFile)); err == nil && !sbxAlive(dir) {
				rep.Notes = append(rep.Notes, fmt.Sprintf("the merge of %s, whose sbx was killed, was still under way after %s: this run may see part of its changes", e.Name(), wait))
			}
			continue
		}
		if err := cleanRun(ctx, dir, e.Name(), exe, rep); err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", dir, err))
		}
	}
	if len(rep.Errors) > 0 {
		return rep, fmt.Errorf("clean: %s", strings.Join(rep.Errors, "; "))
	}
	return rep, nil
}

// deadRuns lists the run directories of the state directory whose sbx is
// gone (killed): their merges may be under way or half done.
func deadRuns(stateDir string) []string {
	runs := filepath.Join(stateDir, "runs")
	ents, err := os.ReadDir(runs)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		dir := filepath.Join(runs, e.Name())
		if !sbxAlive(dir) && fileExists(dir) {
			out = append(out, e.Name())
		}
	}
	return out
}

// sbxAlive reports whether the sbx process of the run in dir lives, by its
// record or, without one (a run being set up, or one that ended and was
// removed since the directory was listed), by the pid in the directory's
// name. A live sbx's run is its own to finish: nothing to wait for.
func sbxAlive(dir string) bool {
	if lockHeld(filepath.Join(dir, emptyFile)) {
		return true // its sbx holds it, seen from any pid or time namespace
	}
	var rec record
	if readJSON(filepath.Join(dir, recordFile), &rec) != nil {
		return !staleEnough(dir)
	}
	return alive(rec.PID, rec.Start)
}

// busy reports whether the run in dir still has sbx or its helper alive,
// or is being set up right now.
func busy(dir string) bool {
	if lockHeld(filepath.Join(dir, emptyFile)) || lockHeld(filepath.Join(dir, helperFile)) {
		return true // sbx or its helper, seen from any pid or time namespace
	}
	var rec record
	if err := readJSON(filepath.Join(dir, recordFile), &rec); err != nil {
		return !staleEnough(dir)
	}
	if alive(rec.PID, rec.Start) {
		return true
	}
	var h helperRecord
	return readJSON(filepath.Join(dir, helperFile), &h) == nil && alive(h.PID, h.Start)
}

// cleanRun finishes one dead run, holding a lock on its directory: two
// sbx that list it at once (two runs started after a kill) finish it once,
// and the second finds it gone.
func cleanRun(ctx context.Context, dir, name, exe string, rep *CleanReport) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		return err
	}
	if !fileExists(dir) || busy(dir) {
		return nil // finished by the process that held the lock, or alive
	}
	var rec record
	_ = readJSON(filepath.Join(dir, recordFile), &rec)
	if rec.NetDir != "" && strings.HasPrefix(filepath.Base(rec.NetDir), "sbx-net-") {
		if err := os.RemoveAll(rec.NetDir); err != nil {
			return err
		}
	}
	if errs := removeStaleCgroups("sbx-" + name); len(errs) > 0 {
		return errs[0]
	}
	var done TxReport
	switch err := readJSON(filepath.Join(dir, reportFile), &done); {
	case err == nil:
		rep.Merged[dir] = done.Merge
	case !errors.Is(err, fs.ErrNotExist):
		// The report is written once the merge is complete: the merge was
		// done, only its account is lost.
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s: the report of a finished merge cannot be read (%v); the run directory is removed", dir, err))
	case fileExists(filepath.Join(dir, helperFile)):
		m, err := finishMerge(ctx, dir, exe)
		if errors.Is(err, fs.ErrNotExist) {
			// tx.json is written before the helper starts and goes only
			// with the whole directory: the run was killed while its own
			// clean-up removed it, after the merge.
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: killed while its directory was being removed; removed", dir))
			break
		}
		if err != nil {
			return err
		}
		rep.Merged[dir] = m
	}
	if err := forceRemoveAll(dir); err != nil {
		return err
	}
	rep.Runs = append(rep.Runs, dir)
	return nil
}

// finishMerge completes the merge of the run in dir, whose helper died
// before its end, with a recovery helper (exe): what the helper had
// applied stays, the rest of the staged writes is applied now. An error
// wrapping fs.ErrNotExist means the run has no transaction to finish.
func finishMerge(ctx context.Context, dir, exe string) (MergeReport, error) {
	var spec TxSpec
	err := readJSON(filepath.Join(dir, txFile), &spec)
	if errors.Is(err, fs.ErrNotExist) {
		return MergeReport{}, err
	}
	if err != nil {
		return MergeReport{}, fmt.Errorf("the transaction of a killed run cannot be read: %w", err)
	}
	spec.Recover, spec.RunDir = true, dir
	got, err := callHelper(ctx, exe, spec)
	if err != nil {
		return MergeReport{}, err
	}
	if got.Error != "" {
		return MergeReport{}, errors.New(got.Error)
	}
	return got.Merge, nil
}

// staleEnough reports whether a run directory without a record is older
// than its own setup could take: the pid in its name names no live sbx,
// and it was made setupGrace ago or more (an sbx in another pid or time
// namespace, whose pid names no process here, writes its record, after
// taking its lock, within milliseconds).
func staleEnough(dir string) bool {
	pid, start, ok := parseOwner(filepath.Base(dir))
	if ok && alive(pid, start) {
		return false
	}
	var st unix.Stat_t
	return unix.Lstat(dir, &st) != nil || time.Since(time.Unix(st.Mtim.Unix())) >= setupGrace
}

// setupGrace bounds the set-up of a run directory (from its making to its
// record).
const setupGrace = time.Minute

// cleanStaging removes what sbx processes killed while they made their run
// directory left in runs.new: nothing ran in those. One whose lock is
// held, or made less than setupGrace ago, may still be being made.
func cleanStaging(stateDir string) {
	staging := filepath.Join(stateDir, stagingRuns)
	ents, _ := os.ReadDir(staging)
	for _, e := range ents {
		d := filepath.Join(staging, e.Name())
		var st unix.Stat_t
		if lockHeld(filepath.Join(d, emptyFile)) || unix.Lstat(d, &st) != nil || time.Since(time.Unix(st.Mtim.Unix())) < setupGrace {
			continue
		}
		os.RemoveAll(d)
	}
}

// txEnv is the helper's environment: nothing of sbx's own but the merge's
// test hook (see pauseHook).
func txEnv() []string {
	if v := os.Getenv("SBX_TEST_MERGE_PAUSE"); v != "" {
		return []string{"SBX_TEST_MERGE_PAUSE=" + v}
	}
	return []string{}
}

// conflictClock is the conflict clock of a command about to start after
// a call that came at called (a [FileClock] value): a time after called
// that every change made from now on to a writable root reaches. On a
// filesystem stamping whole seconds it is the next even second
// ([secondAfter]): the command waits for it, up to two seconds. Once
// the coarse clock has passed called, it is the coarse clock. Before
// that, when the filesystem of every writable root takes its stamps from
// this kernel's clock with its floor (Linux 6.13 and later), those
// filesystems get a fine-grained stamp taken now, which raises the floor
// ([fineStamp]): every later change on them is stamped at or above it, so
// the command need not wait. Any other filesystem (one mounted in a root)
// gets the coarse clock, under which a change the host made in the tick
// before the call is taken for one made during the run (a conflict: the
// host's version kept, nothing lost). Otherwise the command waits for the
// coarse clock to pass called (one tick at most).
func (e *Executor) conflictClock(called unix.Timespec, roots []fsrules.Path) TxStart {
	if wholeSeconds(roots) {
		t := secondAfter(called)
		for after(t, coarseNow()) {
			time.Sleep(time.Millisecond)
		}
		return TxStart{Clock: &t}
	}
	if c := coarseNow(); after(c, called) {
		return TxStart{Clock: &c}
	}
	if devs, ok := e.floors.all(roots, e.StateDir); ok {
		if s, fine := fineStamp(e.StateDir); fine && after(s, called) {
			c := coarseNow()
			return TxStart{Clock: &c, Fine: &s, FineDevs: devs}
		}
	}
	c := clockAfter(called)
	return TxStart{Clock: &c}
}
