package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func openPTY(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptmx, pts
}

// The command shares the terminal and may leave any line discipline
// settings: here (a red team's) "d" is the word erase, ";" the line kill,
// "R" the erase and "g" the end of file, with no echo, so that a
// terminal's late replies to a colour and a cursor query, then the user's
// "d" and Enter, read as "r" (allow for this run). The question reads in
// a mode of its own: the answer is a deny, and the command's settings are
// back afterwards.
func TestQuestionReadsInItsOwnTerminalMode(t *testing.T) {
	ptmx, pts := openPTY(t)
	hostile, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	hostile.Lflag &^= unix.ECHO
	hostile.Cc[unix.VKILL], hostile.Cc[unix.VERASE], hostile.Cc[unix.VWERASE], hostile.Cc[unix.VEOF] = ';', 'R', 'd', 'g'
	if err := unix.IoctlSetTermios(int(pts.Fd()), unix.TCSETS, hostile); err != nil {
		t.Fatal(err)
	}
	a := &ttyAsker{decided: map[string]bool{}}
	got := make(chan bool, 1)
	go func() { got <- a.question(pts, "evil.example:80") }()
	var seen bytes.Buffer
	buf := make([]byte, 4096)
	for !strings.HasSuffix(seen.String(), "> ") {
		n, err := ptmx.Read(buf)
		if err != nil {
			t.Fatalf("reading the question: %v (%q)", err, seen.String())
		}
		seen.Write(buf[:n])
	}
	// The replies arrive after the question was drawn, then the user's key.
	if _, err := ptmx.Write([]byte("\x1b]10;rgb:ffff/ffff/ffff\x07\x1b[1;1Rd\r")); err != nil {
		t.Fatal(err)
	}
	select {
	case allowed := <-got:
		if allowed || a.decided["evil.example:80"] {
			t.Errorf("a deny read as an allow (decided %v)", a.decided)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer read")
	}
	now, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if now.Lflag != hostile.Lflag || now.Cc != hostile.Cc || now.Iflag != hostile.Iflag {
		t.Error("the command's terminal settings were not put back")
	}
}
