//go:build linux

package linux

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// TxHelperArg is argv[1] of the sbx process that makes a run's writes a
// transaction: sbx __sbx_tx CONTROL-FD.
//
// The helper runs in a user and mount namespace of its own, between sbx and
// bubblewrap. Over every writable root it mounts an overlay whose lower
// layer is the host directory and whose upper layer is sbx's own, in the
// run directory (or, with a disk budget, in a size-limited tmpfs); a
// writable file is a copy bound over the host's. Bubblewrap, started from
// that namespace, binds what the helper sees, so nothing the sandbox writes
// reaches the host. When the sandbox is gone the helper merges the final
// tree into the host, checking every change against the policy, and
// reports on the control descriptor.
const TxHelperArg = "__sbx_tx"

// TxSpec is what the helper reads on its control descriptor; the run
// directory keeps a copy (tx.json) for a later clean-up to finish the merge.
type TxSpec struct {
	// term delivers the signals that stop the sandbox (the helper's
	// own; not sent over the control socket).
	term chan os.Signal
	// start delivers TxStart's clock (read from the control socket after
	// the spec).
	start chan TxStart
	// gone is closed when reading the control socket ends before the
	// acknowledgement (its end, or a message that cannot be read): sbx is
	// gone, or not to be waited for.
	gone chan struct{}
	// clockWait bounds the wait for the start clock (0: 2 s).
	clockWait time.Duration
	// inner is InnerFD's file, kept open for a fallback's second start.
	inner *os.File
	// Bwrap and BwrapArgs are the bubblewrap command to run.
	Bwrap     string   `json:"bwrap,omitempty"`
	BwrapArgs []string `json:"bwrapArgs,omitempty"`
	// NFiles descriptors from 3 on are passed to bubblewrap at the same
	// numbers; InfoFD among them is bubblewrap's --info-fd, relayed so the
	// helper learns the sandbox's pid too.
	NFiles int `json:"nfiles,omitempty"`
	InfoFD int `json:"infoFD,omitempty"`
	// InnerFD, when set, is the helper's descriptor of the sealed memfd it
	// runs from (sbx-inner): bubblewrap inherits it at innerBwrapFD and
	// runs the init from it (BwrapArgs name that path).
	InnerFD int `json:"innerFD,omitempty"`
	// RunDir is the run directory: the staging area, the journal and the
	// report live there. StateDir is sbx's state directory (quarantine,
	// conflicts, the merge lock).
	RunDir   string `json:"runDir"`
	StateDir string `json:"stateDir"`
	// NetDir is the proxy's socket directory (in the system's temporary
	// directory), for the helper to remove should sbx die: the run
	// directory's record of it may be gone by then (its state directory
	// removed).
	NetDir string `json:"netDir,omitempty"`
	// Size, when positive, is the disk budget (--max-disk): the staging
	// area is a tmpfs of that size at RunDir/disk, and /tmp a directory of
	// it.
	Size int64 `json:"size,omitempty"`
	// Roots are the writable roots; Policy decides every change.
	Roots  []fsrules.Path  `json:"roots"`
	Policy *fsrules.Policy `json:"policy"`
	// Discard reports what would change and applies nothing.
	Discard bool `json:"discard,omitempty"`
	// BestEffort: a budget that cannot be set up falls back to staging on
	// disk, with FallbackArgs for bubblewrap (whose /tmp is a tmpfs of the
	// budget's size), and a notice.
	BestEffort   bool     `json:"bestEffort,omitempty"`
	FallbackArgs []string `json:"fallbackArgs,omitempty"`
	// Probe only checks that the mounts can be made (sbx doctor).
	Probe bool `json:"probe,omitempty"`
	// Recover finishes the merge of a run whose helper was killed.
	Recover bool `json:"recover,omitempty"`
	// AckReport says sbx acknowledges the report (TxStart.Ack): the
	// helper then waits for that, or the end of the socket, before it
	// takes sbx for alive or gone. An sbx that does not (an older binary
	// with a newer helper on disk) would hold the socket open while it
	// waits for the helper's exit.
	AckReport bool `json:"ackReport,omitempty"`
}

// TxStart is a message of sbx's to the helper after the spec. The first,
// sent when the command is sent to the init, carries Clock: from then on,
// a change the host makes to a file of a writable root is a conflict (a
// warm sandbox waits between its launch and its command, and the host's
// changes meanwhile are its starting point, not conflicts). On the
// filesystems FineDevs names (those seen to follow the kernel's timestamp
// floor), Fine, a later time, takes Clock's place. The last, after the
// report, carries Ack alone.
type TxStart struct {
	Clock    *unix.Timespec `json:"clock"`
	Fine     *unix.Timespec `json:"fine,omitempty"`
	FineDevs []uint64       `json:"fineDevs,omitempty"`
	// Ack, in sbx's last message, says sbx is alive after the report
	// (read, or not readable): it cleans up after the run itself (the
	// helper does when none comes).
	Ack bool `json:"ack,omitempty"`
}

// startClock is sbx's TxStart, or fallback when sbx sent none in time
// (it always sends one before the command, so only a dead sbx waits, and
// not once its end of the control socket has closed).
func (spec *TxSpec) startClock(fallback unix.Timespec) TxStart {
	select {
	case c := <-spec.start:
		return c
	case <-spec.gone:
	case <-time.After(cmp.Or(spec.clockWait, 2*time.Second)):
	}
	select {
	case c := <-spec.start: // sent just before sbx went
		return c
	default:
		return TxStart{Clock: &fallback}
	}
}

// TxReport is what the helper writes on its control descriptor, and to
// the run directory, at the end.
type TxReport struct {
	// Error is set when the transaction could not be set up and nothing ran.
	Error string `json:"error,omitempty"`
	// Notice is set when a best-effort budget could not be set up.
	Notice string `json:"notice,omitempty"`
	// Full is set when the budget was spent (no byte or no inode left).
	Full bool `json:"full,omitempty"`
	// Used is what the budget held at the end, in bytes.
	Used  int64       `json:"used,omitempty"`
	Merge MergeReport `json:"merge"`
	// Warnings are problems that did not stop the run.
	Warnings []string `json:"warnings,omitempty"`
	// Stamps are when the helper's phases ended (for --debug).
	Stamps []TxStamp `json:"stamps,omitempty"`
	// Status is bubblewrap's exit status (the command's), once bubblewrap
	// has exited: the helper exits with it after the report.
	Status *int `json:"status,omitempty"`
}

// TxStamp is the moment one of the helper's phases ended: a
// [pipeline.Stamp], which this package's inner build cannot import.
type TxStamp struct {
	Name string `json:"n"`
	Time int64  `json:"t"`
}

// stamp records that the helper's phase name ended at t.
func (rep *TxReport) stamp(name string, t time.Time) {
	rep.Stamps = append(rep.Stamps, TxStamp{Name: "helper: " + name, Time: t.UnixNano()})
}

// TxHelper is the helper's main; it returns bubblewrap's exit status
// (128+N when signal N killed it).
func TxHelper(args []string) int {
	started := time.Now()
	// SIGTERM, SIGINT and SIGHUP (sbx gone, or a timeout) never kill the
	// helper: they stop the sandbox (runBwrap reads them, also one that
	// came during set-up), and the merge and its report are always
	// finished. Taken first thing: a Go process without a handler ends
	// by one (exit 2, after a few yields in which the helper could
	// record the run), and the run was then left, with no report, for
	// the next one to finish. Past the channel's room, more are
	// dropped.
	term := make(chan os.Signal, 4)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	fd := -1
	if len(args) == 1 {
		fd, _ = strconv.Atoi(args[0])
	}
	if fd < 3 {
		fmt.Fprintln(os.Stderr, "sbx: bad transaction helper call")
		return ExitInitFailed
	}
	unix.CloseOnExec(fd) // not for bubblewrap
	ctl := os.NewFile(uintptr(fd), "control")
	defer ctl.Close()
	var spec TxSpec
	dec := json.NewDecoder(ctl)
	if err := dec.Decode(&spec); err != nil || spec.Policy == nil && !spec.Probe {
		fmt.Fprintf(os.Stderr, "sbx: transaction helper: bad spec: %v\n", err)
		return ExitInitFailed
	}
	spec.start, spec.gone = make(chan TxStart, 1), make(chan struct{})
	if spec.InnerFD > 2 {
		unix.CloseOnExec(spec.InnerFD) // for bubblewrap only
		spec.inner = os.NewFile(uintptr(spec.InnerFD), "sbx-inner")
	}
	acked := make(chan bool, 1)
	go readCtl(dec, spec.start, acked, spec.gone)
	// Started with a capability raised (non-root callers), the helper is
	// not dumpable, and its /proc/self/fd, through which it names the
	// lower layers, belongs to nobody it can be.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
	if spec.Recover {
		rep := recoverTx(&spec)
		json.NewEncoder(ctl).Encode(rep)
		return 0
	}
	spec.term = term
	read := time.Now()
	rep, status := runTx(&spec)
	rep.stamp("running (the runtime's start)", started)
	rep.stamp("spec read", read)
	if err := deliverReport(ctl, rep, acked, spec.AckReport); err != nil && !spec.Probe {
		// sbx is gone: no one else cleans these now. Its stderr is gone
		// too, and writing there would end the helper with SIGPIPE.
		cleanOrphan(&spec)
		if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, errNoAck) {
			fmt.Fprintf(os.Stderr, "sbx: transaction report: %v\n", err)
		}
	}
	// sbx is done with the helper once it has the report and the end of
	// the helper's output: the rest of the exit is the helper's own.
	if null, err := unix.Open(os.DevNull, unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
		unix.Dup3(null, 1, 0)
		unix.Dup3(null, 2, 0)
	}
	return status
}

// errNoAck is deliverReport's error when sbx's end of the control socket
// closed after the report was written but before sbx said it had it.
var errNoAck = errors.New("sbx closed the control socket without taking the report")

// readCtl reads sbx's messages after the spec: the start clock, delivered
// on start (once), then the acknowledgement of the report: acked gets
// true for it, false when the socket ends first (and gone is closed).
func readCtl(dec *json.Decoder, start chan<- TxStart, acked chan<- bool, gone chan<- struct{}) {
	for {
		var m TxStart
		if dec.Decode(&m) != nil {
			close(gone)
			acked <- false
			return
		}
		if m.Ack {
			acked <- true
			return
		}
		if m.Clock != nil {
			select {
			case start <- m:
			default: // one clock only
			}
		}
	}
}

// deliverReport writes the report and, when wait (sbx said it would),
// waits for sbx to say it has it. A write that succeeds proves nothing:
// the socket buffers it while a killed sbx's last threads still hold
// their end (the helper's SIGTERM follows the thread that forked it,
// which can die first), and the report is then lost with them. Only the
// acknowledgement, or the end of the socket without one, tells a live
// sbx from a dead one.
func deliverReport(ctl *os.File, rep *TxReport, acked <-chan bool, wait bool) error {
	if err := json.NewEncoder(ctl).Encode(rep); err != nil {
		return err
	}
	if wait && !<-acked {
		return errNoAck
	}
	return nil
}

// hostPID is this process's pid on the host: the helper is the first
// process of a pid namespace of its own (os.Getpid is 1 there), but /proc
// is still the host's, so /proc/self names it as the host does.
func hostPID() int {
	if l, err := os.Readlink("/proc/self"); err == nil {
		if pid, err := strconv.Atoi(l); err == nil {
			return pid
		}
	}
	return os.Getpid()
}

// runTx mounts the transaction, runs bubblewrap in it, and merges.
func runTx(spec *TxSpec) (*TxReport, int) {
	rep := &TxReport{}
	clock := coarseNow()
	if !spec.Probe {
		rec := helperRecord{PID: hostPID(), Clock: clock}
		rec.Start, _ = procStart(rec.PID)
		if err := writeJSON(filepath.Join(spec.RunDir, helperFile), rec); err != nil {
			rep.Error = "run directory: " + err.Error()
			return rep, ExitInitFailed
		}
		// Held until the helper exits: it lives, seen from any namespace.
		if f := holdLock(filepath.Join(spec.RunDir, helperFile)); f != nil {
			defer f.Close()
		}
		rep.stamp("run recorded", time.Now())
	}
	t, err := setupTx(spec, spec.Size)
	if err != nil && spec.Size > 0 && spec.BestEffort && len(spec.FallbackArgs) > 0 {
		rep.Notice = err.Error() + "; the writes are staged on disk without a bound, and /tmp is a tmpfs of the budget's size"
		spec.BwrapArgs = spec.FallbackArgs
		t, err = setupTx(spec, 0)
	}
	if err != nil {
		rep.Error = err.Error()
		if !spec.Probe {
			// Nothing ran, so nothing is left to merge: the report says
			// so, and no later run takes this one for a killed one.
			_ = writeJSON(filepath.Join(spec.RunDir, reportFile), rep)
		}
		return rep, ExitInitFailed
	}
	defer t.close()
	rep.Warnings = t.warnings
	if spec.Probe {
		return rep, 0
	}
	rep.stamp("overlays mounted", time.Now())
	// Nothing of the helper's capabilities may reach bubblewrap: it must
	// see a plain user starting it.
	_, _, _ = syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0)
	rep.stamp("capabilities cleared", time.Now())
	status, how := runBwrap(spec)
	rep.Status = &status
	// For sbx, should this helper die before its report: one call, by
	// the descriptor (with the home a writable root, the run directory's
	// path leads into an overlay while they are mounted).
	_ = unix.Symlinkat(strconv.Itoa(status), t.runFD, statusFile)
	rep.stamp(how, time.Now())
	if t.budget {
		var st unix.Statfs_t
		if unix.Fstatfs(t.stageFD, &st) == nil {
			rep.Full = st.Bavail == 0 || st.Ffree == 0
			rep.Used = int64(st.Blocks-st.Bfree) * st.Bsize
		}
	}
	t.unmountRoots()
	rep.Merge = t.merge(spec, spec.startClock(clock))
	rep.stamp("merged", time.Now())
	finishTx(spec, t, rep)
	rep.stamp("report saved, stage removed", time.Now())
	return rep, status
}

// cleanOrphan removes, for a run whose sbx is gone (it could not take the
// report), what lives outside the state directory a later run cleans: the
// proxy's socket directory in the system's temporary directory and the
// run's cgroups (its processes are gone now). A live sbx removes its own.
func cleanOrphan(spec *TxSpec) {
	netDir := spec.NetDir
	if netDir == "" {
		var rec record
		_ = readJSON(filepath.Join(spec.RunDir, recordFile), &rec)
		netDir = rec.NetDir
	}
	if netDir != "" && strings.HasPrefix(filepath.Base(netDir), "sbx-net-") {
		_ = os.RemoveAll(netDir)
	}
	_ = removeStaleCgroups("sbx-" + filepath.Base(spec.RunDir))
}

// finishTx records the report in the run directory (the merge is then
// complete) and removes the staging area. A budget's tmpfs is left as it
// is: mounted in the helper's namespace alone, it goes, with all it
// holds, when the helper exits.
func finishTx(spec *TxSpec, t *txMounts, rep *TxReport) {
	if err := writeJSON(filepath.Join(spec.RunDir, reportFile), rep); err != nil {
		rep.Merge.Lost = append(rep.Merge.Lost, "the report could not be saved: "+err.Error())
	}
	if t.budget {
		return
	}
	for _, d := range []string{"u", "w", "f", TmpInBudget} {
		removeTreeAt(t.stageFD, d)
	}
}

// txMounts holds what the merge needs: the host side of every root, opened
// before the overlays hid it, and the staging area.
type txMounts struct {
	stageFD, stateFD, runFD int
	budget                  bool
	roots                   []txRoot
	warnings                []string
}

type txRoot struct {
	path string
	dir  bool
	// fd is the host directory (dir) or the host file's parent directory.
	fd int
	// up is the root's upper directory (dir) or the directory holding its
	// copy (file), relative to the stage.
	up      string
	mounted bool
	// idx is the root's place in the run's list of roots: its upper is
	// named after it, so a root skipped when a killed run is finished
	// (gone since) does not shift the others onto the wrong uppers.
	idx int
	// gone: the root no longer exists on the host (a killed run being
	// finished): its staged writes are saved aside, not merged.
	gone bool
}

func (t *txMounts) close() {
	for _, r := range t.roots {
		if r.fd >= 0 {
			unix.Close(r.fd)
		}
	}
	for _, fd := range []int{t.stageFD, t.stateFD, t.runFD} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// unmountRoots takes the overlays and file binds away (in the helper's
// namespace only), so the upper layers are plain directories again.
func (t *txMounts) unmountRoots() {
	for i := len(t.roots) - 1; i >= 0; i-- {
		if t.roots[i].mounted {
			_ = unix.Unmount(t.roots[i].path, unix.MNT_DETACH)
		}
	}
}

// outermost keeps the writable roots that exist and lie in no other one,
// shallowest first.
func outermost(roots []fsrules.Path) []fsrules.Path {
	rs := slices.Clone(roots)
	slices.SortStableFunc(rs, func(a, b fsrules.Path) int { return depth(a.Path) - depth(b.Path) })
	var out []fsrules.Path
	for _, r := range rs {
		if !r.Exists || slices.ContainsFunc(out, func(o fsrules.Path) bool { return o.Dir && fsrules.Within(r.Path, o.Path) }) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// readOnlyBind makes path read-only in the helper's namespace, and so in
// the sandbox, which binds what the helper sees.
func readOnlyBind(path string) error {
	if err := unix.Mount(path, path, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.Mount("", path, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
}

// setupTx mounts the staging area (a tmpfs when size > 0) and the overlays.
// On failure it takes back whatever it mounted.
func setupTx(spec *TxSpec, size int64) (*txMounts, error) {
	var mounted []string
	t, err := mountTx(spec, size, &mounted)
	if err != nil {
		for i := len(mounted) - 1; i >= 0; i-- {
			_ = unix.Unmount(mounted[i], unix.MNT_DETACH)
		}
		if t != nil {
			t.close()
		}
		return nil, err
	}
	return t, nil
}

func mountTx(spec *TxSpec, size int64, mounted *[]string) (*txMounts, error) {
	// Nothing mounted here may reach the host's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("private mount namespace: %w", err)
	}
	// The helper is the first process of a pid namespace of its own;
	// bubblewrap reads /proc/PID of its child by the pid it sees.
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, fmt.Errorf("a /proc for the helper's pid namespace: %w", err)
	}
	t := &txMounts{stageFD: -1, stateFD: -1, runFD: -1, budget: size > 0}
	var err error
	if t.runFD, err = unix.Open(spec.RunDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
		return t, fmt.Errorf("run directory: %w", err)
	}
	if spec.StateDir != "" {
		if t.stateFD, err = unix.Open(spec.StateDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return t, fmt.Errorf("state directory: %w", err)
		}
	}
	roots := outermost(spec.Roots)
	if spec.Probe {
		if err := os.MkdirAll(filepath.Join(spec.RunDir, "probe"), 0o755); err != nil {
			return t, err
		}
		roots = []fsrules.Path{{Path: filepath.Join(spec.RunDir, "probe"), Exists: true, Dir: true}}
	}
	if err := t.openRoots(roots, false); err != nil {
		return t, err
	}
	if err := t.mountStage(spec, size, mounted); err != nil {
		return t, err
	}
	for i := range t.roots {
		if err := t.mountRoot(i, mounted); err != nil {
			return t, err
		}
	}
	return t, nil
}

// openRoots opens every root's host side before anything is mounted over
// it. A writable device or fifo stores nothing: it stays as it is. A root
// sbx may not read (another user's, with sbx as root: root in a user
// namespace has no power over files of unmapped users) cannot be staged:
// it stays read-only, with a warning; the sandbox could not have entered it
// either, or only written blind.
func (t *txMounts) openRoots(roots []fsrules.Path, finishing bool) error {
	for idx, r := range roots {
		tr := txRoot{path: r.Path, dir: r.Dir, idx: idx, fd: -1}
		open := r.Path
		if !r.Dir {
			if st, err := os.Lstat(r.Path); err != nil || !st.Mode().IsRegular() {
				if finishing && errors.Is(err, os.ErrNotExist) {
					tr.gone = true
					t.roots = append(t.roots, tr)
				}
				continue
			}
			open = filepath.Dir(r.Path)
		}
		fd, err := unix.Open(open, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == nil && !r.Dir {
			err = unix.Faccessat(fd, filepath.Base(r.Path), unix.R_OK, unix.AT_EACCESS)
			if err != nil {
				unix.Close(fd)
			}
		}
		if errors.Is(err, unix.EACCES) {
			if err := readOnlyBind(r.Path); err != nil {
				return fmt.Errorf("writable root %s: sbx may not read it, and cannot make it read-only: %w", r.Path, err)
			}
			t.warnings = append(t.warnings, fmt.Sprintf("writable root %s stays read-only: sbx may not read it, so its writes cannot be staged", r.Path))
			continue
		}
		if finishing && errors.Is(err, unix.ENOENT) {
			tr.gone = true
			t.roots = append(t.roots, tr)
			continue
		}
		if err != nil {
			return fmt.Errorf("writable root %s: %w", r.Path, err)
		}
		tr.fd = fd
		t.roots = append(t.roots, tr)
	}
	return nil
}

// mountStage makes the staging area the helper's working directory: the
// run directory itself, or a budget tmpfs mounted at RunDir/disk. One
// inode per KiB of budget (at least 4096): files cost kernel memory even
// when empty, so their number is bounded too.
func (t *txMounts) mountStage(spec *TxSpec, size int64, mounted *[]string) error {
	t.stageFD = t.runFD
	if size > 0 {
		stage := filepath.Join(spec.RunDir, "disk")
		if err := os.Mkdir(stage, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("budget: %w", err)
		}
		data := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700", size, max(size/1024, 4096))
		if err := unix.Mount("sbx-disk", stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
			return fmt.Errorf("budget tmpfs: %w", err)
		}
		*mounted = append(*mounted, stage)
		fd, err := unix.Open(stage, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("budget: %w", err)
		}
		t.stageFD = fd
	}
	if err := unix.Fchdir(t.stageFD); err != nil {
		return fmt.Errorf("staging area: %w", err)
	}
	dirs := []string{"u", "w", "f"}
	if size > 0 {
		dirs = append(dirs, TmpInBudget)
	}
	for _, d := range dirs {
		if err := unix.Mkdirat(t.stageFD, d, 0o700); err != nil {
			return fmt.Errorf("staging area: %w", err)
		}
	}
	if size > 0 {
		return unix.Fchmodat(t.stageFD, TmpInBudget, 0o1777, 0)
	}
	return nil
}

// mountRoot mounts root i's overlay (or its file copy). The upper and work
// directories are relative to the staging area, the helper's working
// directory, and the lower one and the mount point are named by
// descriptor: no path with a comma or a colon can change the options, and
// no link can move the mount.
func (t *txMounts) mountRoot(i int, mounted *[]string) error {
	r := &t.roots[i]
	id := strconv.Itoa(r.idx)
	if !r.dir {
		r.up = filepath.Join("f", id)
		name := filepath.Base(r.path)
		if err := os.Mkdir(r.up, 0o700); err != nil {
			return err
		}
		if err := copyTreeAt(r.fd, name, t.stageFD, filepath.Join(r.up, name)); err != nil {
			return fmt.Errorf("writable file %s: %w", r.path, err)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(r.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			_ = unix.Fchmodat(t.stageFD, filepath.Join(r.up, name), st.Mode&0o777, 0)
			_ = unix.UtimesNanoAt(t.stageFD, filepath.Join(r.up, name), []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err := unix.Mount(filepath.Join(r.up, name), r.path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("writable file %s: %w", r.path, err)
		}
		*mounted = append(*mounted, r.path)
		r.mounted = true
		return nil
	}
	r.up = filepath.Join("u", id)
	work := filepath.Join("w", id)
	for _, d := range []string{r.up, work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	// The overlay's root takes its mode and owner from the upper
	// directory: give it the host directory's.
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err == nil {
		_ = unix.Fchownat(t.stageFD, r.up, int(st.Uid), int(st.Gid), 0)
		_ = unix.Fchmodat(t.stageFD, r.up, st.Mode&0o7777, 0)
	}
	fdPath := "/proc/self/fd/" + strconv.Itoa(r.fd)
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,userxattr", fdPath, r.up, work)
	if err := unix.Mount("sbx-overlay", fdPath, "overlay", 0, opts); err != nil {
		if m := mountsBelow(r.path); errors.Is(err, unix.EINVAL) && len(m) > 0 {
			return fmt.Errorf("overlay over %s: %w: it holds mount points (%s), which the kernel does not let an overlay made in a user namespace take as its lower layer: unmount them, or run sbx in a directory that holds none", r.path, err, strings.Join(m, ", "))
		}
		return fmt.Errorf("overlay over %s: %w", r.path, err)
	}
	*mounted = append(*mounted, r.path)
	r.mounted = true
	return nil
}

// mountsBelow lists the mount points strictly below dir (this process's
// view, /proc/self/mountinfo), at most five.
func mountsBelow(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := unescapeMountPath(f[4])
		if strings.HasPrefix(p, dir+"/") && !slices.Contains(out, p) && len(out) < 5 {
			out = append(out, p)
		}
	}
	return out
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+3 < len(p) {
			if n, err := strconv.ParseUint(p[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// merge applies every root's upper layer (or file copy) to the host, under
// the state directory's merge lock: two runs never merge at once.
func (t *txMounts) merge(spec *TxSpec, clock TxStart) MergeReport {
	runID := filepath.Base(spec.RunDir)
	if lock, err := unix.Openat(t.stateFD, "merge.lock", unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600); err == nil {
		defer unix.Close(lock)
		_ = unix.Flock(lock, unix.LOCK_EX)
	}
	m := &merger{pol: spec.Policy, start: *clock.Clock, discard: spec.Discard,
		saves: &saver{stateFD: t.stateFD, stateDir: spec.StateDir, runID: runID},
		tmp:   &tempNames{prefix: tempPrefix + runID + "-"}}
	defer m.close()
	if clock.Fine != nil {
		m.fine, m.fineDevs = *clock.Fine, clock.FineDevs
	}
	if j, err := unix.Openat(t.runFD, journalFile, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_CLOEXEC, 0o600); err == nil {
		m.tmp.journal = os.NewFile(uintptr(j), journalFile)
		defer m.tmp.journal.Close()
	}
	m.afterEntry = pauseHook(spec.RunDir)
	for _, r := range t.roots {
		up, err := openDirAt(t.stageFD, r.up)
		if errors.Is(err, unix.ENOENT) {
			continue // merged by an earlier, interrupted helper
		}
		if err != nil {
			m.lose(r.path, err)
			continue
		}
		if r.gone {
			unix.Close(up)
			m.rootGone(r.path, t.stageFD, r.up)
			continue
		}
		if r.dir {
			m.mergeRoot(up, r.fd, r.path)
		} else {
			m.entry(up, r.fd, filepath.Base(r.path), scope{root: r.path, path: r.path})
		}
		unix.Close(up)
	}
	return m.rep
}

// pauseHook is a test hook: with SBX_TEST_MERGE_PAUSE=N in its
// environment, the helper stops after the N-th applied change, says so in
// RunDir/paused, and waits to be killed (once per run directory).
func pauseHook(runDir string) func(int) {
	n, err := strconv.Atoi(os.Getenv("SBX_TEST_MERGE_PAUSE"))
	if err != nil || n <= 0 || fileExists(filepath.Join(runDir, "paused")) {
		return nil // once per run: the recovery of a paused run goes on
	}
	return func(i int) {
		if i == n {
			_ = os.WriteFile(filepath.Join(runDir, "paused"), nil, 0o600)
			time.Sleep(time.Minute)
		}
	}
}

// recoverTx finishes the merge of a run whose helper was killed: the upper
// layers are still in the run directory (unless they were in a budget
// tmpfs, which died with the helper).
func recoverTx(spec *TxSpec) *TxReport {
	rep := &TxReport{}
	var rec helperRecord
	if err := readJSON(filepath.Join(spec.RunDir, helperFile), &rec); err != nil {
		rep.Error = "no helper record: " + err.Error()
		return rep
	}
	t := &txMounts{stageFD: -1, stateFD: -1, runFD: -1}
	defer t.close()
	var err error
	if t.runFD, err = unix.Open(spec.RunDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
		rep.Error = err.Error()
		return rep
	}
	t.stageFD = t.runFD
	if t.stateFD, err = unix.Open(spec.StateDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		rep.Error = err.Error()
		return rep
	}
	if err := t.openRoots(outermost(spec.Roots), true); err != nil {
		rep.Error = err.Error()
		return rep
	}
	for i := range t.roots {
		r := &t.roots[i]
		r.up = filepath.Join(map[bool]string{true: "u", false: "f"}[r.dir], strconv.Itoa(r.idx))
	}
	var st unix.Stat_t
	if spec.Size > 0 && unix.Fstatat(t.runFD, "u", &st, 0) != nil {
		rep.Merge.Lost = append(rep.Merge.Lost, "the run's helper was killed before it had merged the writes, and they were in its memory-backed disk budget (--max-disk): they are gone")
	}
	if err := removeJournaled(filepath.Join(spec.RunDir, journalFile)); err != nil {
		rep.Merge.Lost = append(rep.Merge.Lost, "journal: "+err.Error())
	}
	rep.Merge = mergeAppend(rep.Merge, t.merge(spec, TxStart{Clock: &rec.Clock}))
	finishTx(spec, t, rep)
	return rep
}

func mergeAppend(a, b MergeReport) MergeReport {
	b.Lost = append(a.Lost, b.Lost...)
	return b
}

// How runBwrap learnt that the sandbox was done (the stamp's name).
const (
	bwrapExited  = "bubblewrap exited"
	sandboxQuiet = "the init reaped every process (bubblewrap still exiting)"
)

// runBwrap starts bubblewrap with the descriptors sbx passed, relays its
// info descriptor, and waits for it and for the sandbox's init, or for the
// init's word that it is the last process left (it only exits then): once
// this returns, nothing in the sandbox writes any more. SIGTERM, SIGINT or
// SIGHUP (sbx gone, or a timeout) kill the sandbox; the merge still
// follows. The string names which of the two ended the wait.
func runBwrap(spec *TxSpec) (int, string) {
	infoOut := os.NewFile(uintptr(spec.InfoFD), "info")
	infoR, infoW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sbx: transaction helper: %v\n", err)
		return ExitInitFailed, bwrapExited
	}
	quietR, quietW, err := os.Pipe()
	if err != nil {
		infoR.Close()
		infoW.Close()
		fmt.Fprintf(os.Stderr, "sbx: transaction helper: %v\n", err)
		return ExitInitFailed, bwrapExited
	}
	var extra []*os.File
	for fd := 3; fd < 3+spec.NFiles; fd++ {
		if fd == spec.InfoFD {
			extra = append(extra, infoW)
			continue
		}
		extra = append(extra, os.NewFile(uintptr(fd), "fd"+strconv.Itoa(fd)))
	}
	extra = append(extra, quietW) // quietFD(spec.NFiles)
	if spec.inner != nil {
		extra = append(extra, spec.inner) // innerBwrapFD(spec.NFiles)
	}
	cmd := &exec.Cmd{
		Path:        spec.Bwrap,
		Args:        append([]string{"bwrap"}, spec.BwrapArgs...),
		Env:         []string{},
		Dir:         "/",
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		ExtraFiles:  extra,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	sigs := spec.term
	if sigs == nil {
		c := make(chan os.Signal, 4)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		defer signal.Stop(c)
		sigs = c
	}
	exited, err := startOnLockedThread(cmd)
	if err != nil {
		quietR.Close()
		fmt.Fprintf(os.Stderr, "sbx: start bubblewrap: %v\n", err)
		return ExitInitFailed, bwrapExited
	}
	for _, f := range extra {
		if f != spec.inner {
			f.Close()
		}
	}
	pidc := make(chan int, 1)
	go func() {
		defer infoOut.Close()
		defer infoR.Close()
		var info struct {
			ChildPID int `json:"child-pid"`
		}
		if json.NewDecoder(io.TeeReader(infoR, infoOut)).Decode(&info) == nil {
			pidc <- info.ChildPID
		}
		io.Copy(infoOut, infoR)
	}()
	return waitBwrap(cmd, exited, pidc, readQuiet(quietR), sigs)
}

// readQuiet delivers the status of the init's QuietReport; nothing when
// the init ends without one.
func readQuiet(r *os.File) <-chan int {
	quiet := make(chan int, 1)
	go func() {
		defer r.Close()
		var b [2]byte
		if n, _ := io.ReadFull(r, b[:]); n == 2 && b[0] == QuietReport {
			quiet <- int(b[1])
		}
	}()
	return quiet
}

// waitBwrap waits for bubblewrap and the sandbox's init, or for the
// init's word that every other process of the sandbox is gone (quiet),
// unless the helper has killed the sandbox by then. The init is known by a
// pidfd from the moment its pid arrives, so no signal can reach a process
// that reused its pid.
func waitBwrap(cmd *exec.Cmd, exited <-chan error, pidc <-chan int, quiet <-chan int, sigs <-chan os.Signal) (int, string) {
	pidfd, killed := -1, false
	defer func() {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
	}()
	kill := func() {
		killed = true
		if pidfd >= 0 {
			_ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		}
		_ = cmd.Process.Kill()
	}
	for {
		select {
		case pid := <-pidc:
			if fd, err := unix.PidfdOpen(pid, 0); err == nil {
				pidfd = fd
				if killed {
					kill()
				}
			}
		case <-sigs:
			kill()
		case status := <-quiet:
			if !killed {
				return status, sandboxQuiet
			}
		case <-exited:
			st := cmd.ProcessState
			ws, _ := st.Sys().(syscall.WaitStatus)
			if killed || ws.Signaled() {
				// bubblewrap did not wait for its child: the init dies of
				// its parent-death signal; wait until it has.
				if pidfd < 0 {
					select {
					case pid := <-pidc:
						pidfd, _ = unix.PidfdOpen(pid, 0)
					case <-time.After(100 * time.Millisecond):
					}
				}
				waitGone(pidfd)
			}
			if ws.Signaled() {
				return 128 + int(ws.Signal()), bwrapExited
			}
			return st.ExitCode(), bwrapExited
		}
	}
}

// waitGone waits (a bounded time) until the process behind pidfd, the
// sandbox's init, has exited: the kernel kills the rest of its pid
// namespace before the init itself is gone.
func waitGone(pidfd int) {
	if pidfd < 0 {
		return
	}
	_ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for range 100 {
		n, err := unix.Poll(fds, 100)
		if n > 0 || (err != nil && !errors.Is(err, unix.EINTR)) {
			return
		}
	}
}
