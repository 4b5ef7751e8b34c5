//go:build linux

package linux

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/linux/seccomp"
)

// Init is the in-sandbox init: PID 1 of the sandbox's pid namespace. It reads
// its [InitSpec] from fd [InitSpecFD], starts the command with Landlock and
// the seccomp filter applied, forwards signals to the command's process
// group, reaps every zombie, and exits with the command's status (128+N when
// signal N killed it). When the command exits, init exits, and the kernel
// kills whatever else is left in the namespace.
func Init() int {
	started := time.Now()
	for i, fd := range []int{initStdinFD, initStdoutFD, initStderrFD} {
		if err := unix.Dup3(fd, i, 0); err != nil {
			fmt.Fprintf(os.Stderr, "sbx init: stdio: %v\n", err)
			return ExitInitFailed
		}
		unix.Close(fd)
	}
	if _, err := unix.Write(InitReadyFD, []byte{InitRunning}); err != nil {
		fmt.Fprintf(os.Stderr, "sbx init: ready: %v\n", err)
		return ExitInitFailed
	}
	// InitReadyFD stays open (close-on-exec, so the command never has it)
	// to report a full /tmp once the command is done.
	spec, err := readSpec()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sbx init: %v\n", err)
		return ExitInitFailed
	}
	stamp(spec, 0, started)
	stamp(spec, 1, time.Now())
	// Only SIGCHLD and the signals worth forwarding: notifying every signal
	// would also deliver the runtime's own SIGURG preemption signals, which
	// can fill the channel and make a SIGCHLD be dropped.
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGCHLD, syscall.SIGALRM}, forwarded...)...)
	// Nothing the caller leaked may reach the command.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		fmt.Fprintf(os.Stderr, "sbx init: close_range: %v\n", err)
		return ExitInitFailed
	}
	if err := setUp(spec); err != nil {
		fmt.Fprintf(os.Stderr, "sbx init: %v\n", err)
		return ExitInitFailed
	}
	stamp(spec, 2, time.Now())
	path, code, err := lookPath(spec.Argv[0], spec.Env)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sbx: %v\n", err)
		return code
	}
	pid, err := startLocked(path, spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sbx: %v\n", err)
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EISDIR) {
			return ExitCannotExec
		}
		return ExitInitFailed
	}
	stamp(spec, 3, time.Now())
	if spec.Hold {
		// sbx moves the held command into the cgroup, then lets it go.
		unix.Close(initHoldFD)
		if _, err := unix.Write(InitReadyFD, []byte{InitForked}); err != nil {
			fmt.Fprintf(os.Stderr, "sbx init: hold: %v\n", err)
			return ExitInitFailed
		}
	}
	return waitCommand(pid, sigs, spec)
}

// setUp makes the read-only binds, drops the capabilities, starts the
// network bridge and enters the working directory: the mounts and the
// capabilities come first, before anything of the command's is looked at.
func setUp(spec *InitSpec) error {
	if err := bindReadOnly(spec.ReadOnly); err != nil {
		return err
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := startBridge(spec.Bridge); err != nil {
		return err
	}
	if err := os.Chdir(spec.Dir); err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	return nil
}

// waitCommand forwards signals to the command's process group and reaps
// until the command exits; it returns the command's status.
func waitCommand(pid int, sigs <-chan os.Signal, spec *InitSpec) int {
	// A lost SIGCHLD must not leave the sandbox hanging: reap on a timer too.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case sig := <-sigs:
			s := sig.(syscall.Signal)
			if s == syscall.SIGCHLD {
				if status, done := reap(pid); done {
					return reportTmp(spec, status)
				}
				continue
			}
			_ = unix.Kill(-pid, s)
		case <-tick.C:
			if status, done := reap(pid); done {
				return reportTmp(spec, status)
			}
		}
	}
}

func readSpec() (*InitSpec, error) {
	f := os.NewFile(InitSpecFD, "spec")
	if f == nil {
		return nil, errors.New("no spec fd")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	var spec InitSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	if len(spec.Argv) == 0 {
		return nil, errors.New("empty command")
	}
	return &spec, nil
}

// lookPath finds argv0 along the command's own PATH.
func lookPath(argv0 string, env []string) (string, int, error) {
	check := func(p string) (int, error) {
		fi, err := os.Stat(p)
		if err != nil {
			return ExitNotFound, err
		}
		if fi.IsDir() {
			return ExitCannotExec, fmt.Errorf("%s: is a directory", p)
		}
		if err := unix.Access(p, unix.X_OK); err != nil {
			return ExitCannotExec, fmt.Errorf("%s: %w", p, err)
		}
		return 0, nil
	}
	if strings.Contains(argv0, "/") {
		if code, err := check(argv0); err != nil {
			return "", code, err
		}
		return argv0, 0, nil
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	var denied error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, argv0)
		code, err := check(p)
		if err == nil {
			return p, 0, nil
		}
		if code == ExitCannotExec && denied == nil {
			denied = err
		}
	}
	if denied != nil {
		return "", ExitCannotExec, denied
	}
	return "", ExitNotFound, fmt.Errorf("%s: command not found", argv0)
}

// startLocked starts the command from a dedicated OS thread that carries
// no_new_privs, the Landlock domain and the seccomp filter: a process forked
// from it inherits all three, while the init's other threads stay free to
// keep serving (signals now, the network bridge later). The thread is never
// unlocked, so the runtime retires it when the goroutine ends.
func startLocked(path string, spec *InitSpec) (int, error) {
	type result struct {
		pid int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		pid, err := lockDownAndFork(path, spec)
		done <- result{pid, err}
	}()
	r := <-done
	return r.pid, r.err
}

func lockDownAndFork(path string, spec *InitSpec) (int, error) {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	abi, llErr := LandlockABI()
	switch {
	case llErr == nil:
		if err := restrictWrites(abi, spec.Writable); err != nil {
			return 0, err
		}
	case spec.RequireLandlock:
		return 0, fmt.Errorf("landlock required but unavailable: %w", llErr)
	}
	// The seccomp filter comes last: nothing after it but fork and exec.
	if err := installFilter(spec); err != nil {
		return 0, err
	}
	argv := spec.Argv
	files := []uintptr{0, 1, 2}
	if spec.CPUSeconds > 0 || spec.OpenFiles > 0 || spec.Procs > 0 || spec.DataBytes > 0 || spec.Hold {
		// Rlimits are per process, and the cgroup is for the command only:
		// the init must carry neither (it relays the network and must
		// survive a fork bomb). A small exec of sbx itself waits to be
		// moved into the cgroup, sets the rlimits and execs the command;
		// it runs already filtered.
		self, err := os.Executable()
		if err != nil {
			return 0, err
		}
		hold := "0"
		if spec.Hold {
			hold = "1"
			files = append(files, initHoldFD)
		}
		argv = append([]string{self, RlimitArg, strconv.FormatUint(spec.CPUSeconds, 10), strconv.FormatUint(spec.OpenFiles, 10),
			strconv.FormatUint(spec.Procs, 10), strconv.FormatUint(spec.DataBytes, 10), hold, path}, spec.Argv...)
		path = self
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   spec.Env,
		Files: files,
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", spec.Argv[0], err)
	}
	return pid, nil
}

// installFilter loads the Supervised program on the calling thread and
// starts the supervisor on its listener; where the kernel (or an enclosing
// sandbox) cannot supervise, it loads the Strict program, which refuses
// Unix sockets, and says so when the settings allow some.
func installFilter(spec *InitSpec) error {
	prog, err := seccomp.Native(seccomp.Supervised)
	if err != nil {
		return err
	}
	// What the supervisor compares against is recorded first; without it
	// (a kernel before 5.14) the stricter program is loaded instead.
	sup, serr := newSupervisor(-1, spec)
	if serr == nil {
		if sup.listener, serr = seccomp.InstallThreadListener(prog); serr == nil {
			go sup.serve()
			return nil
		}
	}
	if prog, err = seccomp.Native(seccomp.Strict); err != nil {
		return err
	}
	if err := seccomp.InstallThread(prog); err != nil {
		return err
	}
	if len(spec.UnixSockets) > 0 || spec.AllUnixSockets {
		fmt.Fprintf(os.Stderr, "sbx: Unix sockets stay refused in this sandbox: no connect supervisor here (%v); see sbx doctor\n", serr)
	}
	return nil
}

// reap collects every exited child. It reports the command's exit status
// once the command itself has exited.
func reap(cmd int) (int, bool) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err != nil || pid <= 0 {
			return 0, false
		}
		if pid != cmd {
			continue
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus(), true
		case ws.Signaled():
			return 128 + int(ws.Signal()), true
		}
	}
}

// RlimitArg is argv[1] of the small exec that sets the command's rlimits.
const RlimitArg = "__sbx_rlimit"

// RlimitExec waits, when HOLD is 1, for sbx's go-ahead on fd 3 (sent once
// this process is in the run's cgroup), sets RLIMIT_CPU (SIGXCPU at the
// limit, SIGKILL a second later), RLIMIT_NOFILE, RLIMIT_NPROC and
// RLIMIT_DATA (0: left alone) from its arguments, then execs the command:
// sbx __sbx_rlimit CPU NOFILE NPROC DATA HOLD PATH ARGV...
func RlimitExec(args []string) int {
	if len(args) < 7 {
		fmt.Fprintln(os.Stderr, "sbx: bad rlimit exec")
		return ExitInitFailed
	}
	var vals [4]uint64
	for i := range vals {
		v, err := strconv.ParseUint(args[i], 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sbx: bad rlimit exec")
			return ExitInitFailed
		}
		vals[i] = v
	}
	cpu, nofile, nproc, data := vals[0], vals[1], vals[2], vals[3]
	hold, path, argv := args[4], args[5], args[6:]
	if hold != "0" && hold != "1" {
		fmt.Fprintln(os.Stderr, "sbx: bad rlimit exec")
		return ExitInitFailed
	}
	if hold == "1" {
		var b [1]byte
		n, _ := unix.Read(3, b[:])
		unix.Close(3)
		if n != 1 {
			fmt.Fprintln(os.Stderr, "sbx: the command could not be moved into its cgroup; not run")
			return ExitInitFailed
		}
	}
	if nproc > 0 {
		// The kernel counts every task of this uid in the sandbox's user
		// namespace, the init's threads too: the command gets nproc on top
		// of those.
		nproc += otherTasks()
	}
	for _, l := range []struct {
		res  int
		cur  uint64
		max  uint64
		what string
	}{
		{unix.RLIMIT_CPU, cpu, cpu + 1, "cpu limit"},
		{unix.RLIMIT_NOFILE, nofile, nofile, "open files limit"},
		{unix.RLIMIT_NPROC, nproc, nproc, "process limit"},
		{unix.RLIMIT_DATA, data, data, "memory limit"},
	} {
		if l.cur == 0 {
			continue
		}
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.cur, Max: l.max}); err != nil {
			fmt.Fprintf(os.Stderr, "sbx: %s: %v\n", l.what, err)
			return ExitInitFailed
		}
	}
	err := unix.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "sbx: %s: %v\n", argv[0], err)
	return ExitCannotExec
}

// otherTasks counts the threads of every other process in the sandbox's
// pid namespace: the init's.
func otherTasks() uint64 {
	tasks, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*")
	self := "/proc/" + strconv.Itoa(os.Getpid()) + "/"
	var n uint64
	for _, t := range tasks {
		if !strings.HasPrefix(t, self) {
			n++
		}
	}
	return n
}

// reportTmp tells sbx when the size-limited /tmp is full, and passes the
// command's status through.
func reportTmp(spec *InitSpec, status int) int {
	stamp(spec, 4, time.Now())
	if spec.TmpLimited {
		var st unix.Statfs_t
		if unix.Statfs("/tmp", &st) == nil && st.Bavail == 0 {
			unix.Write(InitReadyFD, []byte{TmpFullReport})
		}
	}
	return status
}

// stamp tells sbx that the init's phase i (initPhases) ended at t, when the
// spec asks for a trace. One write of 10 bytes: atomic on a pipe.
func stamp(spec *InitSpec, i int, t time.Time) {
	if !spec.Trace {
		return
	}
	var b [10]byte
	b[0], b[1] = InitStamp, byte(i)
	binary.LittleEndian.PutUint64(b[2:], uint64(t.UnixNano()))
	unix.Write(InitReadyFD, b[:])
}
