//go:build linux && !sbxinner

package linux

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/linux/seccomp"
	"github.com/sbx-sandbox/sbx/pipeline"
)

// Check is one finding of [Doctor].
type Check struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Required checks must pass for the sandbox to be built.
	Required bool   `json:"required"`
	Detail   string `json:"detail"`
	Fix      string `json:"fix,omitempty"`
}

// Report is what [Doctor] found.
type Report struct {
	OS     string  `json:"os"`
	Arch   string  `json:"arch"`
	Kernel string  `json:"kernel"`
	Checks []Check `json:"checks"`
	// Usable is true when every required check passed.
	Usable bool `json:"usable"`
}

// Doctor checks what this host supports, and runs a real sandbox to prove it.
func (e *Executor) Doctor(ctx context.Context) *Report {
	rep := &Report{OS: runtime.GOOS, Arch: runtime.GOARCH, Usable: true}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		rep.Kernel = strings.TrimSpace(string(b))
	}
	add := func(c Check) {
		rep.Checks = append(rep.Checks, c)
		if c.Required && !c.OK {
			rep.Usable = false
		}
	}
	bwrap, exe, perr := e.paths()
	add(checkBwrap(bwrap, perr))
	add(checkUserns())
	add(checkSeccomp())
	add(checkUnixSockets())
	add(checkLandlock(e.RequireLandlock))
	add(checkLimits())
	if perr == nil {
		tx := checkTx(ctx, exe, e.StateDir)
		tx.Required = true
		add(tx)
		add(checkBudget(ctx, exe, e.StateDir))
		add(e.checkSandbox(ctx, bwrap, exe))
	}
	return rep
}

var bwrapVersionRE = regexp.MustCompile(`bubblewrap (\d+)\.(\d+)`)

func checkBwrap(bwrap string, perr error) Check {
	c := Check{Name: "bubblewrap", Required: true}
	if perr != nil {
		c.Detail = perr.Error()
		c.Fix = "sudo apt-get install bubblewrap (Debian/Ubuntu), sudo dnf install bubblewrap (Fedora)"
		return c
	}
	out, err := exec.Command(bwrap, "--version").CombinedOutput()
	if err != nil {
		c.Detail = fmt.Sprintf("%s --version: %v", bwrap, err)
		return c
	}
	return bwrapVersion(c, bwrap, strings.TrimSpace(string(out)))
}

// bwrapVersion judges bubblewrap's --version output: 0.5.0 is the
// minimum (--perms on a tmpfs); --size, which a /tmp size limit needs,
// came in 0.7.0.
func bwrapVersion(c Check, bwrap, v string) Check {
	m := bwrapVersionRE.FindStringSubmatch(v)
	if m == nil {
		c.Detail = fmt.Sprintf("%s: unrecognised version %q", bwrap, v)
		c.Fix = "install bubblewrap 0.5 or later (sudo apt-get install bubblewrap), or point sandbox.bwrapPath at one"
		return c
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	switch {
	case major == 0 && minor < 5:
		c.Detail = fmt.Sprintf("%s is %s; sbx needs 0.5.0 or later (--perms)", bwrap, v)
		c.Fix = "install bubblewrap 0.5 or later (sudo apt-get install bubblewrap on Debian 12 / Ubuntu 22.04 or later), or point sandbox.bwrapPath at one"
		return c
	case major == 0 && minor < 7:
		c.OK = true
		c.Detail = fmt.Sprintf("%s (%s); a size limit on /tmp (--max-tmp, or a disk budget that cannot be staged) needs 0.7.0 or later", bwrap, v)
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%s (%s)", bwrap, v)
	return c
}

func readTrim(p string) (string, bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

func checkUserns() Check {
	c := Check{Name: "user namespaces", Required: true, OK: true}
	var notes []string
	if v, ok := readTrim("/proc/sys/user/max_user_namespaces"); ok {
		if v == "0" {
			c.OK = false
			c.Detail = "user.max_user_namespaces is 0"
			c.Fix = "sudo sysctl -w user.max_user_namespaces=15000 (and in /etc/sysctl.d/ to keep it)"
			return c
		}
		notes = append(notes, "max_user_namespaces="+v)
	}
	if v, ok := readTrim("/proc/sys/kernel/unprivileged_userns_clone"); ok && v == "0" {
		if os.Geteuid() != 0 {
			c.OK = false
			c.Detail = "kernel.unprivileged_userns_clone is 0: unprivileged users cannot create user namespaces"
			c.Fix = "sudo sysctl -w kernel.unprivileged_userns_clone=1 (and in /etc/sysctl.d/ to keep it)"
			return c
		}
		notes = append(notes, "unprivileged_userns_clone=0 (fine as root)")
	}
	if v, ok := readTrim("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); ok && v == "1" {
		if os.Geteuid() != 0 {
			c.OK = false
			c.Detail = "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 23.10+): bwrap fails with \"setting up uid map: Permission denied\""
			c.Fix = "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or install an AppArmor profile that grants userns to /usr/bin/bwrap"
			return c
		}
		notes = append(notes, "apparmor_restrict_unprivileged_userns=1 (fine as root)")
	}
	c.Detail = strings.Join(notes, ", ")
	if c.Detail == "" {
		c.Detail = "no restriction found"
	}
	return c
}

func checkSeccomp() Check {
	c := Check{Name: "seccomp", Required: true}
	status, _ := os.ReadFile("/proc/self/status")
	if !bytes.Contains(status, []byte("\nSeccomp:")) {
		c.Detail = "kernel without seccomp (no Seccomp: line in /proc/self/status)"
		c.Fix = "use a kernel built with CONFIG_SECCOMP_FILTER"
		return c
	}
	prog, err := seccomp.Native(seccomp.Supervised)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("filter compiled at build time for %s (%d instructions)", runtime.GOARCH, len(prog))
	return c
}

// checkUnixSockets says whether the connect supervisor can run here: with
// it, commands use Unix sockets of their own (tmux, multiprocessing, test
// databases) and the allowed host sockets; without it every Unix socket
// but a connected pair is refused.
func checkUnixSockets() Check {
	c := Check{Name: "unix sockets"}
	if err := probeSupervisor(); err != nil {
		c.Detail = "refused in the sandbox: no connect supervisor here (" + err.Error() + ")"
		c.Fix = "use Linux 5.14 or later, outside another sandbox that supervises system calls (seccomp user notification, pidfd_getfd)"
		return c
	}
	c.OK = true
	c.Detail = "the sandbox's own work; host sockets only where sandbox.network.allowUnixSockets names them"
	return c
}

func checkLandlock(required bool) Check {
	c := Check{Name: "landlock", Required: required}
	abi, err := LandlockABI()
	if err != nil {
		c.Detail = err.Error() + "; the mount namespace alone enforces the filesystem policy, and a hidden or masked file the host replaces during a run shows its new content to the running command"
		c.Fix = "boot a kernel with landlock in lsm= (5.13+)"
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("ABI %d: writes restricted to the writable roots, as a second layer; reads kept off what the host puts over a hidden or masked path during a run", abi)
	return c
}

// checkLimits creates (and removes) a cgroup as a run with process and
// memory limits would, and says what enforces each limit here.
func checkLimits() Check {
	c := Check{Name: "resource limits"}
	cg, err := newCgroups(pipeline.Limits{MaxProcs: 64, MaxMemory: 64 << 20}, fmt.Sprintf("sbx-doctor-%d", os.Getpid()))
	always := "--max-cpu, --max-open-files: rlimits; --max-tmp: tmpfs size; --timeout, --max-output: sbx; --max-disk: see \"disk budget\""
	if err != nil {
		if os.Getuid() != 0 {
			c.Detail = "no cgroup here (" + err.Error() + "): --max-procs: RLIMIT_NPROC in the sandbox's user namespace (a hit is not reported); --max-memory: NOT enforceable for the sandbox as a whole (the tool defaults fall back to RLIMIT_DATA per process); " + always
		} else {
			c.Detail = "--max-procs, --max-memory: NOT enforceable here (" + err.Error() + "); " + always
		}
		c.Fix = "run sbx as the only process of a cgroup v2 delegated to you: systemd-run --user --scope -p Delegate=yes sbx …; a CI runner without a user bus: see \"Resource limits\" in the README (sudo mkdir, chown and exec)"
		if inContainer() {
			c.Fix = "in a container, bound the container itself (docker run --pids-limit 512 --memory 2g), or give it a delegated cgroup v2"
		}
		return c
	}
	defer cg.remove()
	c.OK = true
	how := "cgroup v1 controllers (pids, memory) as root"
	if cg.v2 {
		how = "a delegated cgroup v2 sub-cgroup"
	}
	c.Detail = "--max-procs, --max-memory: " + how + "; " + always
	return c
}

// sandboxFixes map what a failed test sandbox said to the fix; kernel
// says whether the cause is what a container's profiles refuse.
var sandboxFixes = []struct {
	says, fix string
	kernel    bool
}{
	{"setting up uid map", "user namespaces are refused: see the user namespace check above", true},
	{"creating new namespace", "user namespaces are refused: see the user namespace check above", true},
	{"cannot be made transactional", "the writable roots cannot be staged: see the transactional writes check above", false},
	{"can't mount proc", "/proc is masked: in a container, run it with --security-opt systempaths=unconfined", true},
	{"read-only file system", "sbx's state directory is not writable: make HOME writable, or export XDG_STATE_HOME=/a/writable/dir", false},
	{"no space left", "the disk holding sbx's state directory (XDG_STATE_HOME, ~/.local/state) is full", false},
	{"permission denied", "sbx's state directory or the workspace is not writable by you: check HOME and XDG_STATE_HOME", false},
}

// sandboxFix is the fix for a test sandbox that failed with msg; in a
// container, Docker's own seccomp and AppArmor profiles refuse what
// bubblewrap needs.
func sandboxFix(msg string, container bool) string {
	lower := strings.ToLower(msg)
	var fixes []string
	kernel := true
	for _, f := range sandboxFixes {
		if strings.Contains(lower, f.says) {
			fixes, kernel = append(fixes, f.fix), f.kernel
			break
		}
	}
	if container && kernel {
		fixes = append(fixes, "in Docker: docker run --security-opt seccomp=unconfined --security-opt apparmor=unconfined --security-opt systempaths=unconfined (the container's own profiles refuse the namespaces and mounts the sandbox needs)")
	}
	if len(fixes) == 0 {
		return "bubblewrap could not build the sandbox: the message above is its own; check the bubblewrap and user namespace lines, and run sbx doctor --json for every detail"
	}
	return strings.Join(fixes, "; ")
}

// inContainer reports whether sbx runs in a container (Docker, Podman).
func inContainer() bool {
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	return false
}

// checkSandbox runs /bin/true in a real sandbox with the default policy.
func (e *Executor) checkSandbox(ctx context.Context, bwrap, exe string) Check {
	c := Check{Name: "sandbox", Required: true}
	ws, err := os.MkdirTemp("", "sbx-doctor-")
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	defer os.RemoveAll(ws)
	pol, err := fsrules.Compile(fsrules.Input{Workspace: ws}, fsrules.Host{Home: "/"})
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	res, err := e.Run(ctx, &pipeline.Spec{Argv: []string{"/bin/sh", "-c", "exit 7"}, Dir: ws, FS: pol,
		Env: []string{"PATH=/usr/bin:/bin"}}, pipeline.Stdio{Stdout: &out, Stderr: &out})
	switch {
	case err != nil:
		c.Detail = err.Error()
		c.Fix = sandboxFix(err.Error(), inContainer())
	case res.ExitCode != 7:
		c.Detail = fmt.Sprintf("test command exited %d, want 7: %s", res.ExitCode, bytes.TrimSpace(out.Bytes()))
	default:
		c.OK = true
		c.Detail = fmt.Sprintf("a test command ran sandboxed (%s, %s)", filepath.Base(bwrap), time.Since(start).Round(time.Millisecond))
	}
	return c
}
