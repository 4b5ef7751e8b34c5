package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// flushInput discards what was typed on tty and not yet read.
func flushInput(tty *os.File) { _ = unix.IoctlSetInt(int(tty.Fd()), unix.TCFLSH, unix.TCIFLUSH) }
