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
