package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/internal/sbxtest"
	"golang.org/x/sys/unix"
)

// The command shares the terminal and may leave any line discipline
// settings: here (a red team's) "d" is the word erase, ";" the line kill,
// "R" the erase and "g" the end of file, with no echo, so that a
// terminal's late replies to a colour and a cursor query, then the user's
// "d" and Enter, read as "r" (allow for this run). The question reads in
// a mode of its own: the answer is a deny, and the command's settings are
// back afterwards.
func TestQuestionReadsInItsOwnTerminalMode(t *testing.T) {
	ptmx, pts := sbxtest.OpenPTY(t)
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
