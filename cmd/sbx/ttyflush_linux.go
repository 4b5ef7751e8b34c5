package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// flushInput discards what was typed on tty and not yet read, and
// restarts its output if the command suspended it (tcflow TCOOFF), which
// would block the question's write for good.
func flushInput(tty *os.File) {
	_ = unix.IoctlSetInt(int(tty.Fd()), unix.TCFLSH, unix.TCIFLUSH)
	_ = unix.IoctlSetInt(int(tty.Fd()), unix.TCXONC, unix.TCOON)
}

// questionMode puts tty in a mode of sbx's own for the question, and
// returns what puts back the command's. The command shares the terminal
// and may have left any line discipline settings: control characters
// that edit a terminal's late replies to its queries (a cursor report, a
// colour report) and the user's keys into another answer ("d" made the
// word erase, a reply cut down to "r"). Here input is canonical with the
// default control characters and no extensions, CR reads as NL, control
// characters echo as ^X, and what was typed before is discarded.
func questionMode(tty *os.File) (restore func(), err error) {
	fd := int(tty.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Iflag = unix.ICRNL | unix.BRKINT
	t.Oflag = unix.OPOST | unix.ONLCR
	t.Lflag = unix.ICANON | unix.ISIG | unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHOCTL
	t.Cc = [len(t.Cc)]uint8{}
	t.Cc[unix.VINTR], t.Cc[unix.VQUIT], t.Cc[unix.VSUSP] = 0x03, 0x1c, 0x1a
	t.Cc[unix.VERASE], t.Cc[unix.VKILL], t.Cc[unix.VEOF] = 0x7f, 0x15, 0x04
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETSF, &t); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETSF, old) }, nil
}
