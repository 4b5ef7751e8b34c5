//go:build darwin

package darwin

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// stdinJob decides the command's job control from sbx's standard input
// (see [PlanJob]); fd is the terminal's descriptor, -1 without one.
func stdinJob(stdin io.Reader) (job Job, fd int) {
	f, ok := stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return PlanJob(TermState{}), -1
	}
	fd = int(f.Fd())
	fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return PlanJob(TermState{StdinTerminal: true, OwnsTerminal: err == nil && fg == unix.Getpgrp()}), fd
}

// sysProcAttr renders the job as process attributes; fd is the terminal
// that Foreground hands over (a descriptor of this process).
func (j Job) sysProcAttr(fd int) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: j.Setpgid, Setsid: j.Setsid, Foreground: j.Foreground}
	if j.Foreground {
		a.Ctty = fd
	}
	return a
}

// takeTerminal makes sbx's process group the terminal's foreground group
// again. SIGTTOU, which the kernel sends a background group that changes
// the foreground group, is ignored meanwhile.
func takeTerminal(fd int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, unix.Getpgrp())
}
