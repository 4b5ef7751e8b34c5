//go:build linux

package linux

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// diskCtl is sbx's side of the disk helper: the control socket (the spec
// goes out, the report comes back) and the helper's argv.
type diskCtl struct {
	parent, child *os.File
	argv          []string
	spec          DiskSpec
}

// diskHelper prepares the helper that runs bubblewrap (args) inside the
// disk budget; nfiles descriptors from 3 on are bubblewrap's.
func (r *run) diskHelper(bwrap, exe string, args []string, nfiles int) (*diskCtl, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("linux: disk helper: %w", err)
	}
	d := &diskCtl{
		parent: os.NewFile(uintptr(fds[0]), "disk-control"),
		child:  os.NewFile(uintptr(fds[1]), "disk-control"),
		argv:   []string{exe, DiskHelperArg, strconv.Itoa(3 + nfiles)},
		spec: DiskSpec{
			Bwrap: bwrap, BwrapArgs: args, NFiles: nfiles, InfoFD: 4,
			Size: r.spec.Limits.MaxDisk, Stage: r.diskStage,
			Keep:       r.keepPaths(),
			StateDir:   r.e.StateDir,
			AsideRel:   filepath.Join("conflicts", filepath.Base(r.runDir)),
			BestEffort: r.spec.Limits.BestEffort,
		},
	}
	for _, w := range r.spec.FS.Writable {
		if w.Exists {
			d.spec.Roots = append(d.spec.Roots, w)
		}
	}
	return d, nil
}

// sysProcAttr puts the helper in a user namespace of its own (the caller's
// uid and gid mapped to themselves) and a mount namespace, with
// CAP_SYS_ADMIN there to mount the budget and the overlays (and
// CAP_DAC_OVERRIDE, which overlayfs needs in its mode-0 work directory;
// both hold only over files of the caller's own uid). If sbx dies,
// the helper gets SIGTERM: it kills the sandbox and still merges.
func (d *diskCtl) sysProcAttr(a *syscall.SysProcAttr) {
	uid, gid := os.Getuid(), os.Getgid()
	a.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	a.GidMappingsEnableSetgroups = false
	if uid != 0 {
		a.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_DAC_OVERRIDE}
	}
	a.Pdeathsig = syscall.SIGTERM
}

// exchange sends the spec and delivers the report (nil if none came).
func (d *diskCtl) exchange(out chan<- *DiskReport) {
	if err := json.NewEncoder(d.parent).Encode(&d.spec); err != nil {
		out <- nil
		return
	}
	var rep DiskReport
	if err := json.NewDecoder(d.parent).Decode(&rep); err != nil {
		out <- nil
		return
	}
	out <- &rep
}

// keepPaths are the host paths a merge must never touch: everything the
// sandbox sees read-only inside its writable roots.
func (r *run) keepPaths() []string {
	var keep []string
	for _, d := range r.spec.FS.DenyWrite {
		keep = append(keep, d.Path)
	}
	for _, e := range r.snap.Existing {
		keep = append(keep, e.Path)
	}
	for _, p := range r.rec.Placeholders {
		keep = append(keep, p.Path)
	}
	return keep
}

// diskResult reads the helper's report into the result: a budget that
// could not be set up stops the run with an error (nothing ran), merge
// conflicts and failures become warnings naming where the command's
// version was saved.
func (r *run) diskResult() error {
	rep := r.diskRep
	if rep == nil {
		return fmt.Errorf("%w: the disk helper (--max-disk) exited without a report; what the command wrote may not have reached the host", pipeline.ErrUnavailable)
	}
	if rep.Error != "" {
		return fmt.Errorf("%w: the disk limit (--max-disk) cannot be enforced here: %s", pipeline.ErrUnavailable, rep.Error)
	}
	if rep.Notice != "" {
		r.res.Warnings = append(r.res.Warnings, "default limits not enforced: disk budget: "+rep.Notice)
	}
	m := rep.Merge
	for _, c := range m.Conflicts {
		if c.Saved != "" {
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%s changed on the host during the run: the host's version is kept, the command's is saved at %s", c.Path, c.Saved))
		} else {
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%s changed on the host during the run: the host's version is kept, the command's change to it (a deletion or a new type) is dropped", c.Path))
		}
	}
	for _, s := range m.Skipped {
		r.res.Warnings = append(r.res.Warnings, "not merged: "+s)
	}
	if len(m.Errors) > 0 {
		r.res.Warnings = append(r.res.Warnings, "merging the command's writes into the host failed for: "+strings.Join(m.Errors, "; "))
	}
	return nil
}

// checkDisk has the disk helper mount a budget and an overlay as a run with
// --max-disk would, in a namespace of its own, and reports whether it could.
func checkDisk(ctx context.Context, exe string) Check {
	c := Check{Name: "disk budget"}
	stage, err := os.MkdirTemp("", "sbx-doctor-disk-")
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	defer os.RemoveAll(stage)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	parent, child := os.NewFile(uintptr(fds[0]), "disk-control"), os.NewFile(uintptr(fds[1]), "disk-control")
	defer parent.Close()
	d := &diskCtl{spec: DiskSpec{Probe: true, Size: 1 << 20, Stage: stage}}
	cmd := exec.CommandContext(ctx, exe, DiskHelperArg, "3")
	cmd.ExtraFiles = []*os.File{child}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	d.sysProcAttr(cmd.SysProcAttr)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		child.Close()
		c.Detail = "--max-disk: NOT enforceable here: cannot start a helper in a user and mount namespace of its own: " + err.Error()
		c.Fix = "allow unprivileged user namespaces (see the user namespaces check)"
		return c
	}
	child.Close()
	var rep DiskReport
	err = json.NewEncoder(parent).Encode(&d.spec)
	if err == nil {
		err = json.NewDecoder(parent).Decode(&rep)
	}
	werr := cmd.Wait()
	switch {
	case rep.Error != "":
		c.Detail = "--max-disk: NOT enforceable here: " + rep.Error
		c.Fix = "a kernel with overlayfs mountable in a user namespace (5.11+) and tmpfs user xattrs (6.6+)"
	case err != nil || werr != nil:
		c.Detail = fmt.Sprintf("--max-disk: the disk helper failed: %v %v %s", err, werr, strings.TrimSpace(out.String()))
	default:
		c.OK = true
		c.Detail = "--max-disk: overlays on a size-limited tmpfs, merged into the host when the command ends"
	}
	return c
}
