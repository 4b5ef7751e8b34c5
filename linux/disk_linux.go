//go:build linux

package linux

import (
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
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// DiskHelperArg is argv[1] of the sbx process that bounds what a run may
// add to its writable roots (--max-disk): sbx __sbx_disk CONTROL-FD.
//
// The helper runs in a user and mount namespace of its own, between sbx and
// bubblewrap. There it mounts one size-limited tmpfs (the budget) and, over
// every writable root, an overlay whose lower layer is the host directory
// and whose upper layer lives in the budget; the private /tmp is a
// directory of the budget too. Bubblewrap, started from that namespace,
// binds what the helper sees, so the sandbox writes into the budget and
// gets ENOSPC once it is spent. When the sandbox is gone, the helper merges
// the upper layers into the host directories and reports on the control
// descriptor.
const DiskHelperArg = "__sbx_disk"

// DiskSpec is what the helper reads on its control descriptor.
type DiskSpec struct {
	// Bwrap and BwrapArgs are the bubblewrap command to run.
	Bwrap     string   `json:"bwrap"`
	BwrapArgs []string `json:"bwrapArgs"`
	// NFiles descriptors from 3 on are passed to bubblewrap at the same
	// numbers; InfoFD among them is bubblewrap's --info-fd, relayed so the
	// helper learns the sandbox's pid too.
	NFiles int `json:"nfiles"`
	InfoFD int `json:"infoFD"`
	// Size is the budget in bytes.
	Size int64 `json:"size"`
	// Stage is an empty host directory, outside the sandbox's view, where
	// the budget is mounted (in the helper's namespace only).
	Stage string `json:"stage"`
	// Roots are the writable roots to put in the budget.
	Roots []fsrules.Path `json:"roots"`
	// Keep are host paths the merge never touches.
	Keep []string `json:"keep,omitempty"`
	// StateDir and AsideRel: the command's version of a conflicting file is
	// saved to StateDir/AsideRel/<host path>.
	StateDir string `json:"stateDir"`
	AsideRel string `json:"asideRel"`
	// BestEffort runs without the budget, with a notice, when the mounts
	// cannot be made (bubblewrap then gets FallbackArgs, whose /tmp is a
	// tmpfs of the budget's size); otherwise nothing runs.
	BestEffort   bool     `json:"bestEffort,omitempty"`
	FallbackArgs []string `json:"fallbackArgs,omitempty"`
	// Probe only checks that the mounts can be made (sbx doctor).
	Probe bool `json:"probe,omitempty"`
}

// DiskReport is what the helper writes on its control descriptor at the
// end.
type DiskReport struct {
	// Error is set when the budget could not be set up and nothing ran.
	Error string `json:"error,omitempty"`
	// Notice is set when a best-effort budget could not be set up and the
	// command ran without it.
	Notice string `json:"notice,omitempty"`
	// Full is set when the budget was spent (no byte or no inode left).
	Full bool `json:"full,omitempty"`
	// Used is what the budget held at the end, in bytes.
	Used  int64       `json:"used"`
	Merge MergeReport `json:"merge"`
}

// DiskHelper is the helper's main; it returns bubblewrap's exit status
// (128+N when signal N killed it).
func DiskHelper(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "sbx: bad disk helper call")
		return ExitInitFailed
	}
	fd, err := strconv.Atoi(args[0])
	if err != nil || fd < 3 {
		fmt.Fprintln(os.Stderr, "sbx: bad disk helper call")
		return ExitInitFailed
	}
	unix.CloseOnExec(fd) // not for bubblewrap
	ctl := os.NewFile(uintptr(fd), "control")
	defer ctl.Close()
	var spec DiskSpec
	if err := json.NewDecoder(ctl).Decode(&spec); err != nil {
		fmt.Fprintf(os.Stderr, "sbx: disk helper: %v\n", err)
		return ExitInitFailed
	}
	var rep DiskReport
	start := coarseNow()
	// Started with a capability raised (non-root callers), the helper is
	// not dumpable, and its /proc/self/fd, through which it names the
	// lower layers, belongs to nobody it can be.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
	d, err := setupDisk(&spec)
	switch {
	case err == nil:
	case spec.Probe || !spec.BestEffort || len(spec.FallbackArgs) == 0:
		rep.Error = err.Error()
		json.NewEncoder(ctl).Encode(&rep)
		return ExitInitFailed
	default:
		rep.Notice = err.Error() + "; the writable roots are written directly and /tmp is a tmpfs of the budget's size"
		spec.BwrapArgs = spec.FallbackArgs
	}
	if spec.Probe {
		json.NewEncoder(ctl).Encode(&rep)
		return 0
	}
	// Nothing of the helper's capabilities may reach bubblewrap: it must
	// see a plain user starting it.
	_, _, _ = syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0)
	status := runBwrap(&spec)
	if d != nil {
		var st unix.Statfs_t
		if unix.Fstatfs(d.stageFD, &st) == nil {
			rep.Full = st.Bavail == 0 || st.Ffree == 0
			rep.Used = int64(st.Blocks-st.Bfree) * st.Bsize
		}
		rep.Merge = d.merge(&spec, start)
	}
	if err := json.NewEncoder(ctl).Encode(&rep); err != nil {
		fmt.Fprintf(os.Stderr, "sbx: disk helper report: %v\n", err)
	}
	return status
}

// diskMounts holds what the merge needs: the host side of every root,
// opened before the overlays hid it, and the budget.
type diskMounts struct {
	stageFD int
	stateFD int
	roots   []diskRoot
}

type diskRoot struct {
	path string
	dir  bool
	// fd is the host directory (dir) or the host file's parent directory.
	fd int
	// upper is the root's upper layer (dir) or its copy (file) in the
	// budget, relative to the stage.
	upper string
}

// setupDisk mounts the budget and the overlays. On failure it takes back
// whatever it mounted, so the namespace shows the host as it is.
func setupDisk(spec *DiskSpec) (*diskMounts, error) {
	var mounted []string
	d, err := mountDisk(spec, &mounted)
	if err != nil {
		for i := len(mounted) - 1; i >= 0; i-- {
			_ = unix.Unmount(mounted[i], unix.MNT_DETACH)
		}
		return nil, err
	}
	return d, nil
}

func mountDisk(spec *DiskSpec, mounted *[]string) (*diskMounts, error) {
	if spec.Size <= 0 {
		return nil, errors.New("no size")
	}
	// Nothing mounted here may reach the host's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("private mount namespace: %w", err)
	}
	d := &diskMounts{stageFD: -1, stateFD: -1}
	var err error
	if spec.StateDir != "" {
		if d.stateFD, err = unix.Open(spec.StateDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
	}
	roots := slices.Clone(spec.Roots)
	slices.SortStableFunc(roots, func(a, b fsrules.Path) int { return depth(a.Path) - depth(b.Path) })
	for _, r := range roots {
		dr := diskRoot{path: r.Path, dir: r.Dir}
		open := r.Path
		if !r.Dir {
			// A writable device or fifo stores nothing on disk: it stays
			// as it is.
			if st, err := os.Stat(r.Path); err == nil && !st.Mode().IsRegular() {
				continue
			}
			open = filepath.Dir(r.Path)
		}
		if dr.fd, err = unix.Open(open, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return nil, fmt.Errorf("writable root %s: %w", r.Path, err)
		}
		d.roots = append(d.roots, dr)
	}
	// One inode per KiB of budget (at least 4096): files cost kernel
	// memory even when empty, so their number is bounded too.
	inodes := max(spec.Size/1024, 4096)
	data := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700", spec.Size, inodes)
	if err := unix.Mount("sbx-disk", spec.Stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return nil, fmt.Errorf("budget tmpfs at %s: %w", spec.Stage, err)
	}
	*mounted = append(*mounted, spec.Stage)
	if d.stageFD, err = unix.Open(spec.Stage, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("budget: %w", err)
	}
	if err := unix.Fchdir(d.stageFD); err != nil {
		return nil, fmt.Errorf("budget: %w", err)
	}
	for _, dir := range []string{TmpInBudget, "u", "w", "f"} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("budget: %w", err)
		}
	}
	if spec.Probe {
		if err := os.MkdirAll("probe/lower", 0o755); err != nil {
			return nil, err
		}
		roots = []fsrules.Path{{Path: filepath.Join(spec.Stage, "probe/lower"), Dir: true}}
		fd, err := unix.Open("probe/lower", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		d.roots = []diskRoot{{path: roots[0].Path, dir: true, fd: fd}}
	}
	for i := range d.roots {
		r := &d.roots[i]
		id := strconv.Itoa(i)
		if !r.dir {
			r.upper = filepath.Join("f", id)
			if err := copyIntoBudget(r.fd, filepath.Base(r.path), r.upper); err != nil {
				return nil, fmt.Errorf("writable file %s: %w", r.path, err)
			}
			if err := unix.Mount(filepath.Join("/proc/self/fd", strconv.Itoa(d.stageFD), r.upper), r.path, "", unix.MS_BIND, ""); err != nil {
				return nil, fmt.Errorf("writable file %s: %w", r.path, err)
			}
			*mounted = append(*mounted, r.path)
			continue
		}
		r.upper = filepath.Join("u", id)
		if err := os.Mkdir(r.upper, 0o755); err != nil {
			return nil, err
		}
		if err := os.Mkdir(filepath.Join("w", id), 0o755); err != nil {
			return nil, err
		}
		// Relative upper and work directories (the helper's working
		// directory is the budget) and a descriptor for the lower one: no
		// path with a comma or a colon can change the options.
		opts := fmt.Sprintf("lowerdir=/proc/self/fd/%d,upperdir=%s,workdir=%s,userxattr", r.fd, r.upper, filepath.Join("w", id))
		if err := unix.Mount("sbx-overlay", r.path, "overlay", 0, opts); err != nil {
			return nil, fmt.Errorf("overlay over %s: %w", r.path, err)
		}
		*mounted = append(*mounted, r.path)
	}
	// A stage inside a writable root is now the overlay's empty directory:
	// put the budget back there, for bubblewrap to find /tmp in it.
	var st unix.Stat_t
	var sst unix.Stat_t
	if err := unix.Stat(filepath.Join(spec.Stage, TmpInBudget), &st); err != nil || unix.Fstat(d.stageFD, &sst) != nil || st.Dev != sst.Dev {
		if err := unix.Mount(filepath.Join("/proc/self/fd", strconv.Itoa(d.stageFD)), spec.Stage, "", unix.MS_BIND, ""); err != nil {
			return nil, fmt.Errorf("budget at %s: %w", spec.Stage, err)
		}
	}
	return d, nil
}

// copyIntoBudget copies the host file name (in the directory dirFD) to dst
// in the working directory, with its mode and times.
func copyIntoBudget(dirFD int, name, dst string) error {
	fd, err := unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	src := os.NewFile(uintptr(fd), name)
	defer src.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errors.New("not a regular file")
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, os.FileMode(st.Mode&0o777))
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return unix.UtimesNano(dst, []unix.Timespec{st.Atim, st.Mtim})
}

// merge applies every root's upper layer (or file copy) to the host.
func (d *diskMounts) merge(spec *DiskSpec, start unix.Timespec) MergeReport {
	m := &merger{start: start, keep: spec.Keep, asideFD: d.stateFD, asideRel: spec.AsideRel, asideBase: spec.StateDir}
	defer m.close()
	base := filepath.Join("/proc/self/fd", strconv.Itoa(d.stageFD))
	for _, r := range d.roots {
		up := filepath.Join(base, r.upper)
		if r.dir {
			m.dir(up, r.fd, r.path, false)
			continue
		}
		var st unix.Stat_t
		if err := unix.Lstat(up, &st); err != nil {
			m.fail(r.path, err)
			continue
		}
		m.fileInPlace(up, &st, r.fd, filepath.Base(r.path), r.path)
	}
	return m.rep
}

// runBwrap starts bubblewrap with the descriptors sbx passed, relays its
// info descriptor, and waits for it and for the sandbox's init: once this
// returns, nothing in the sandbox runs any more. SIGTERM, SIGINT or SIGHUP
// (sbx gone, or a timeout) kill the sandbox; the merge still follows.
func runBwrap(spec *DiskSpec) int {
	infoOut := os.NewFile(uintptr(spec.InfoFD), "info")
	infoR, infoW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sbx: disk helper: %v\n", err)
		return ExitInitFailed
	}
	var extra []*os.File
	for fd := 3; fd < 3+spec.NFiles; fd++ {
		if fd == spec.InfoFD {
			extra = append(extra, infoW)
			continue
		}
		extra = append(extra, os.NewFile(uintptr(fd), "fd"+strconv.Itoa(fd)))
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
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	exited, err := startOnLockedThread(cmd)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sbx: start bubblewrap: %v\n", err)
		return ExitInitFailed
	}
	infoW.Close()
	for _, f := range extra {
		if f != infoW {
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
	// The init is known by a pidfd from the moment its pid arrives, so no
	// signal can reach a process that reused its pid.
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
				return 128 + int(ws.Signal())
			}
			return st.ExitCode()
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
