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
// its [InitSpec] (the policy) from fd [InitSpecFD] and sets it up, then the
// [InitCall] (the command, which a warm sandbox gets later), starts the
// command with Landlock and the seccomp filter applied, forwards signals to
// the command's process
// group, reaps every zombie, and exits with the command's status (128+N when
// signal N killed it). When the command exits, init exits, and the kernel
// kills whatever else is left in the namespace.
func Init() int {
	ir := &initRun{}
	ir.mark(phaseRunning)
	// The command can signal PID 1 with any signal the init handles, and
	// the runtime ends a program on these with a stack dump (into the
	// command's stderr): the init takes them and drops them (a fault of
	// its own still crashes it). Taken, not ignored: an ignored signal
	// stays ignored across exec, and the command would start with SIGABRT
	// ignored (abort-by-signal, kill -ABRT, would do nothing).
	dropped := make(chan os.Signal, 1)
	signal.Notify(dropped, syscall.SIGABRT, syscall.SIGTRAP, syscall.SIGSYS, syscall.SIGILL, syscall.SIGBUS,
		syscall.SIGFPE, syscall.SIGSEGV, syscall.SIGSTKFLT)
	for i, fd := range []int{initStdinFD, initStdoutFD, initStderrFD} {
		if err := unix.Dup3(fd, i, 0); err != nil {
			fmt.Fprintf(os.Stderr, "sbx init: stdio: %v\n", err)
			return ExitInitFailed
		}
		unix.Close(fd)
	}
	// Only SIGCHLD and the signals worth forwarding: notifying every signal
	// would also deliver the runtime's own SIGURG preemption signals, which
	// can fill the channel and make a SIGCHLD be dropped. Before
	// InitRunning: sbx holds the signals it forwards until then, and from
	// now on they wait here for the command (without the handler, PID 1
	// drops them, or the runtime dies of them).
	ir.sigs = make(chan os.Signal, 64)
	signal.Notify(ir.sigs, append([]os.Signal{syscall.SIGCHLD, syscall.SIGALRM}, forwarded...)...)
	if _, err := unix.Write(InitReadyFD, []byte{InitRunning}); err != nil {
		fmt.Fprintf(os.Stderr, "sbx init: ready: %v\n", err)
		return ExitInitFailed
	}
	// InitReadyFD stays open (close-on-exec, so the command never has it)
	// to report a full /tmp once the command is done.
	ir.in = io.LimitReader(os.NewFile(InitSpecFD, "spec"), 64<<20)
	ir.dec = json.NewDecoder(ir.in)
	if err := ir.dec.Decode(&ir.spec); err != nil {
		if err != io.EOF {
			fmt.Fprintf(os.Stderr, "sbx init: decode spec: %v\n", err)
		}
		return ExitInitFailed // EOF: a warm sandbox thrown away
	}
	ir.mark(phasePolicy)
	// Nothing the caller leaked may reach the command.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		fmt.Fprintf(os.Stderr, "sbx init: close_range: %v\n", err)
		return ExitInitFailed
	}
	if err := setUp(&ir.spec); err != nil {
		fmt.Fprintf(os.Stderr, "sbx init: %v\n", err)
		return ExitInitFailed
	}
	ir.mark(phaseSetUp)
	pid, code, err := ir.startCommand()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sbx: %v\n", err)
		return code
	}
	if pid == 0 {
		return code // no command came
	}
	status := waitCommand(pid, ir.sigs, ir)
	ir.quiet(status)
	return status
}

// quiet, when the helper gave it a pipe, kills what is left of the
// sandbox's processes, reaps them all (a bounded time; past it the init
// just exits, and the kernel kills the rest of the namespace before the
// init is gone, as it always does), closes every descriptor it shares
// with sbx, and tells the helper the status: nothing in the sandbox can
// write any more, so the merge need not wait for the init's exit and
// bubblewrap's, which tear the namespaces down (about 1.5 ms). The pipe is
// close-on-exec and the init not dumpable: the command cannot write it.
func (ir *initRun) quiet(status int) {
	fd := ir.spec.QuietFD
	if fd < 3 {
		return
	}
	if err := unix.Kill(-1, unix.SIGKILL); err != nil && err != unix.ESRCH {
		return
	}
	if !reapAll(time.Second) {
		return
	}
	for _, d := range []int{InitReadyFD, 0, 1, 2} {
		unix.Close(d)
	}
	unix.Write(fd, []byte{QuietReport, byte(status)})
}

// reapAll reaps every child (clone children too) until there is none
// left, and reports whether that happened within limit.
func reapAll(limit time.Duration) bool {
	done := make(chan bool, 1)
	go func() {
		for {
			var ws unix.WaitStatus
			_, err := unix.Wait4(-1, &ws, unix.WALL, nil)
			if err == unix.EINTR || err == nil {
				continue
			}
			done <- err == unix.ECHILD
			return
		}
	}()
	select {
	case ok := <-done:
		return ok
	case <-time.After(limit):
		return false
	}
}

// initRun is the init's state from the policy to the command's end.
type initRun struct {
	spec InitSpec
	call InitCall
	// sigs are the signals the init takes for the command.
	sigs chan os.Signal
	// in is the spec pipe; dec read the policy from it (and holds what
	// it read past it).
	in  io.Reader
	dec *json.Decoder
	// stamps are when each phase ended (0: not reached); sent is how many
	// have been reported.
	stamps [len(initPhases)]time.Time
	sent   int
}

// startCommand starts the command: with limits, a stub forked before the
// command is known (a warm sandbox's stub waits in its cgroup) execs it;
// without, the init forks it once it is known. pid 0 means that no
// command came (code says how the init ends).
func (ir *initRun) startCommand() (pid, code int, err error) {
	var stub *stubProc
	if ir.spec.needsStub() {
		if stub, err = startStub(&ir.spec); err != nil {
			return 0, ExitInitFailed, err
		}
		ir.mark(phaseStub)
	}
	// Made while a warm sandbox waits, and checked when its call comes.
	pre := prepareRead(&ir.spec)
	got, err := readCall(io.MultiReader(ir.dec.Buffered(), ir.in), &ir.call)
	if !got || err != nil || len(ir.call.Argv) == 0 {
		stub.kill()
		if !got && err == nil {
			return 0, ExitInitFailed, nil // a warm sandbox thrown away
		}
		return 0, ExitInitFailed, fmt.Errorf("decode command: %v", err)
	}
	ir.mark(phaseCall)
	c := &ir.call
	if err := os.Chdir(c.Dir); err != nil {
		stub.kill()
		return 0, ExitInitFailed, fmt.Errorf("working directory: %w", err)
	}
	path, code, err := lookPath(c.Argv[0], c.Env)
	if err != nil {
		stub.kill()
		return 0, code, err
	}
	readFD, err := pre.take(&ir.spec)
	if err != nil {
		stub.kill()
		return 0, ExitInitFailed, err
	}
	if readFD >= 0 {
		defer unix.Close(readFD)
	}
	if stub != nil {
		err = stub.send(stubCall{Path: path, Argv: c.Argv, Env: c.Env, Dir: c.Dir}, readFD)
		pid = stub.pid
	} else {
		pid, err = startDirect(&ir.spec, path, c, readFD)
	}
	if err != nil {
		stub.kill()
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EISDIR) {
			return 0, ExitCannotExec, fmt.Errorf("%s: %w", c.Argv[0], err)
		}
		return 0, ExitInitFailed, fmt.Errorf("%s: %w", c.Argv[0], err)
	}
	ir.mark(phaseStarted)
	return pid, 0, nil
}

// mark records that phase ended now, and reports every recorded phase
// when the command asked for a trace.
func (ir *initRun) mark(phase int) {
	ir.stamps[phase] = time.Now()
	if !ir.call.Trace {
		return
	}
	for ; ir.sent <= phase; ir.sent++ {
		if t := ir.stamps[ir.sent]; !t.IsZero() {
			stamp(ir.sent, t)
		}
	}
}

// needsStub reports whether the command starts through the limits stub:
// rlimits are per process and the cgroup is for the command only, so the
// init carries neither (it relays the network and must survive a fork
// bomb).
func (s *InitSpec) needsStub() bool {
	return s.CPUSeconds > 0 || s.OpenFiles > 0 || s.Procs > 0 || s.DataBytes > 0 || s.Hold
}

// stubProc is the limits stub: a small exec of sbx itself (RlimitExec),
// forked with Landlock and the seccomp filter, that waits to be moved into
// the cgroup, then for the command on its fd 3.
type stubProc struct {
	pid int
	w   *os.File
}

// startStub forks the stub and, with Hold, has sbx move it into the
// cgroup.
func startStub(spec *InitSpec) (*stubProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// Run by /proc/self/exe: the init may run from a memfd, whose name
	// (Executable) is no path.
	// A socket, not a pipe: the command's read rules come over it as a
	// descriptor (stubProc.send).
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("limits stub: %w", err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "stub"), os.NewFile(uintptr(fds[1]), "stub")
	defer r.Close()
	hold := "0"
	files := []uintptr{0, 1, 2, r.Fd()}
	if spec.Hold {
		hold = "1"
		files = append(files, initHoldFD)
	}
	argv := []string{self, RlimitArg, strconv.FormatUint(spec.CPUSeconds, 10), strconv.FormatUint(spec.OpenFiles, 10),
		strconv.FormatUint(spec.Procs, 10), strconv.FormatUint(spec.DataBytes, 10), hold}
	pid, err := startLocked(spec, "/proc/self/exe", argv, &syscall.ProcAttr{Dir: "/", Env: []string{}, Files: files}, -1)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("limits stub: %w", err)
	}
	st := &stubProc{pid: pid, w: w}
	if spec.Hold {
		// sbx moves the held stub into the cgroup, then lets it go.
		unix.Close(initHoldFD)
		if _, err := unix.Write(InitReadyFD, []byte{InitForked}); err != nil {
			st.kill()
			return nil, fmt.Errorf("hold: %w", err)
		}
	}
	return st, nil
}

// The byte before the stub's call: whether the command's read rules come
// with it, as a descriptor.
const (
	stubNoRules   = 'N'
	stubReadRules = 'R'
)

// send gives the stub the command to exec, after a byte that carries
// the command's read rules (readFD; -1: none).
func (st *stubProc) send(c stubCall, readFD int) error {
	defer st.w.Close()
	head, oob := []byte{stubNoRules}, []byte(nil)
	if readFD >= 0 {
		head, oob = []byte{stubReadRules}, unix.UnixRights(readFD)
	}
	if err := unix.Sendmsg(int(st.w.Fd()), head, oob, nil, 0); err != nil {
		return fmt.Errorf("limits stub: %w", err)
	}
	return writeCall(st.w, c)
}

// readRules is the ruleset of the command's reads (readRuleset), made
// when its call has come; -1 when it has none or the kernel has no
// Landlock (lockDownAndFork refuses that when Landlock is required).
func readRules(spec *InitSpec) (int, error) {
	abi, err := LandlockABI()
	if err != nil {
		return -1, nil
	}
	fd, err := readRuleset(abi, spec, nil)
	if err != nil {
		return -1, fmt.Errorf("landlock: read rules: %w", err)
	}
	return fd, nil
}

// kill stops a stub that will run nothing (nil: none).
func (st *stubProc) kill() {
	if st != nil {
		st.w.Close()
		_ = unix.Kill(st.pid, syscall.SIGKILL)
	}
}

// setUp makes the read-only binds, drops the capabilities and starts the
// network bridge: the mounts and the capabilities come first, before
// anything of the command's is looked at.
func setUp(spec *InitSpec) error {
	if err := bindReadOnly(spec.ReadOnly); err != nil {
		return err
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	// Not dumpable: the command runs as the init's own user without
	// capabilities, and where Landlock does not scope it, it could
	// otherwise open /proc/1/mem and write code into the init, which is
	// outside the seccomp filter and answers its Unix socket checks (or
	// /proc/1/fd and write to sbx's pipes). A fork is dumpable again
	// after its exec, so the command is not affected.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	return startBridge(spec.Bridge)
}

// stopGrace is how long the command has, after a SIGTSTP, to stop on its
// own (an editor restoring the terminal) before every process of the
// sandbox is stopped.
const stopGrace = 100 * time.Millisecond

// waitCommand forwards signals to the command's process group and reaps
// until the command exits; it returns the command's status. Ctrl-Z (a
// SIGTSTP) stops every process of the sandbox, after stopGrace: one that
// ignores SIGTSTP or left the command's group (setsid) would run on while
// sbx, and its timeout, stand still. A SIGCONT continues them all.
func waitCommand(pid int, sigs <-chan os.Signal, ir *initRun) int {
	// A lost SIGCHLD must not leave the sandbox hanging: reap on a timer too.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var stopAll <-chan time.Time
	for {
		select {
		case sig := <-sigs:
			s := sig.(syscall.Signal)
			switch s {
			case syscall.SIGCHLD:
				if status, done := reap(pid); done {
					return ir.finish(status)
				}
				continue
			case syscall.SIGTSTP:
				stopAll = time.After(stopGrace)
			case syscall.SIGCONT:
				stopAll = nil
				_ = unix.Kill(-1, unix.SIGCONT) // every process but the init
			}
			_ = unix.Kill(-pid, s)
		case <-stopAll:
			stopAll = nil
			_ = unix.Kill(-1, unix.SIGSTOP)
		case <-tick.C:
			if status, done := reap(pid); done {
				return ir.finish(status)
			}
		}
	}
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

// startDirect starts the command without a stub: the program that bash -c
// would exec, without bash (directCommand), or bash when there is none or
// its exec fails (bash then handles or reports that as it would).
func startDirect(spec *InitSpec, path string, c *InitCall, readFD int) (int, error) {
	if prog, args, env, ok := directCommand(path, c.Argv, c.Env); ok {
		pid, err := startLocked(spec, prog, args, &syscall.ProcAttr{Dir: c.Dir, Env: env, Files: []uintptr{0, 1, 2}}, readFD)
		if err == nil {
			return pid, nil
		}
	}
	return startLocked(spec, path, c.Argv, &syscall.ProcAttr{Dir: c.Dir, Env: c.Env, Files: []uintptr{0, 1, 2}}, readFD)
}

// startLocked starts path (the command, or the limits stub) from a
// dedicated OS thread that carries no_new_privs, the Landlock domain and
// the seccomp filter: a process forked from it inherits all three, in a
// process group of its own, while the init's other threads stay free to
// keep serving (signals now, the network bridge later). The thread is
// never unlocked, so the runtime retires it when the goroutine ends.
func startLocked(spec *InitSpec, path string, argv []string, attr *syscall.ProcAttr, readFD int) (int, error) {
	type result struct {
		pid int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		pid, err := lockDownAndFork(spec, path, argv, attr, readFD)
		done <- result{pid, err}
	}()
	r := <-done
	return r.pid, r.err
}

func lockDownAndFork(spec *InitSpec, path string, argv []string, attr *syscall.ProcAttr, readFD int) (int, error) {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	abi, llErr := LandlockABI()
	switch {
	case llErr == nil:
		if err := restrictWrites(abi, spec.Writable); err != nil {
			return 0, err
		}
		if readFD >= 0 {
			if err := restrictSelf(readFD); err != nil {
				return 0, err
			}
		}
	case spec.RequireLandlock:
		return 0, fmt.Errorf("landlock required but unavailable: %w", llErr)
	}
	// The seccomp filter comes last: nothing after it but fork and exec.
	if err := installFilter(spec); err != nil {
		return 0, err
	}
	attr.Sys = &syscall.SysProcAttr{Setpgid: true}
	return syscall.ForkExec(path, argv, attr)
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

// RlimitExec is the limits stub: it waits, when HOLD is 1, for sbx's
// go-ahead on fd 4 (sent once this process is in the run's cgroup), then
// for the command on fd 3 (a stubCall; EOF: none, exit), enters its
// directory, sets RLIMIT_CPU (SIGXCPU at the limit, SIGKILL a second
// later), RLIMIT_NOFILE, RLIMIT_NPROC and RLIMIT_DATA (0: left alone) from
// its arguments, and execs the command:
// sbx __sbx_rlimit CPU NOFILE NPROC DATA HOLD
func RlimitExec(args []string) int {
	// Landlock's rules hold for the thread that restricts itself with
	// them, and exec runs the command from the thread that calls it: the
	// read rules are applied to every thread (restrictEveryThread), and
	// the goroutine stays on its thread besides. With the rules on one
	// thread and the goroutine unlocked, the runtime could move it (a
	// system call that waits for the CPU can lose its P), and the command
	// ran without its read rules: the likely cause of a credential file
	// the host made during a warm call read in clear under load. Never
	// unlocked: the process execs or exits.
	runtime.LockOSThread()
	vals, ok := parseStubArgs(args)
	if !ok {
		fmt.Fprintln(os.Stderr, "sbx: bad rlimit exec")
		return ExitInitFailed
	}
	if args[4] == "1" {
		var b [1]byte
		n, _ := unix.Read(4, b[:])
		unix.Close(4)
		if n != 1 {
			fmt.Fprintln(os.Stderr, "sbx: the command could not be moved into its cgroup; not run")
			return ExitInitFailed
		}
	}
	readFD, ok := recvRules(3)
	var c stubCall
	got, err := readCall(os.NewFile(3, "command"), &c)
	unix.Close(3)
	if !ok || !got || err != nil || len(c.Argv) == 0 {
		return ExitInitFailed // the init had no command for it (and said why)
	}
	if err := unix.Chdir(c.Dir); err != nil {
		fmt.Fprintf(os.Stderr, "sbx: working directory: %v\n", err)
		return ExitInitFailed
	}
	if err := setStubLimits(vals); err != nil {
		fmt.Fprintf(os.Stderr, "sbx: %v\n", err)
		return ExitInitFailed
	}
	if readFD >= 0 {
		if err := restrictEveryThread(readFD); err != nil {
			fmt.Fprintf(os.Stderr, "sbx: %v\n", err)
			return ExitInitFailed
		}
		unix.Close(readFD)
	}
	if prog, args, env, ok := directCommand(c.Path, c.Argv, c.Env); ok {
		// Returns only when it fails: bash then runs the command, and
		// handles or reports that as it would have.
		_ = unix.Exec(prog, args, env)
	}
	err = unix.Exec(c.Path, c.Argv, c.Env)
	fmt.Fprintf(os.Stderr, "sbx: %s: %v\n", c.Argv[0], err)
	return ExitCannotExec
}

// recvRules reads the byte before the stub's call on fd, and the
// descriptor of the read rules it says it carries (-1: none); ok is
// false at the end of the stream (no call comes) or when the rules said
// to come did not.
func recvRules(fd int) (readFD int, ok bool) {
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, flags, _, err := unix.Recvmsg(fd, b[:], oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil || n != 1 || flags&unix.MSG_CTRUNC != 0 {
		return -1, false
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	var fds []int
	if err == nil && len(msgs) == 1 {
		fds, err = unix.ParseUnixRights(&msgs[0])
	}
	switch {
	case b[0] == stubNoRules && oobn == 0:
		return -1, true
	case b[0] == stubReadRules && err == nil && len(fds) == 1:
		return fds[0], true
	}
	for _, f := range fds {
		unix.Close(f)
	}
	fmt.Fprintln(os.Stderr, "sbx: the limits stub got no read rules it was told of; not run")
	return -1, false
}

// parseStubArgs reads the stub's CPU NOFILE NPROC DATA HOLD.
func parseStubArgs(args []string) ([4]uint64, bool) {
	var vals [4]uint64
	if len(args) != 5 || args[4] != "0" && args[4] != "1" {
		return vals, false
	}
	for i := range vals {
		v, err := strconv.ParseUint(args[i], 10, 64)
		if err != nil {
			return vals, false
		}
		vals[i] = v
	}
	return vals, true
}

// setStubLimits sets the rlimits of CPU NOFILE NPROC DATA (0: left alone).
func setStubLimits(vals [4]uint64) error {
	cpu, nofile, nproc, data := vals[0], vals[1], vals[2], vals[3]
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
			return fmt.Errorf("%s: %w", l.what, err)
		}
	}
	return nil
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

// finish tells sbx when the size-limited /tmp is full, and passes the
// command's status through.
func (ir *initRun) finish(status int) int {
	ir.mark(phaseExited)
	if ir.spec.TmpLimited {
		var st unix.Statfs_t
		if unix.Statfs("/tmp", &st) == nil && st.Bavail == 0 {
			unix.Write(InitReadyFD, []byte{TmpFullReport})
		}
	}
	return status
}

// stamp tells sbx that the init's phase i (initPhases) ended at t. One
// write of 10 bytes: atomic on a pipe.
func stamp(i int, t time.Time) {
	var b [10]byte
	b[0], b[1] = InitStamp, byte(i)
	binary.LittleEndian.PutUint64(b[2:], uint64(t.UnixNano()))
	unix.Write(InitReadyFD, b[:])
}

// forwarded are the signals the init passes on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT, syscall.SIGTSTP}
