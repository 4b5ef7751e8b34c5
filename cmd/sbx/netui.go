package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// ttyAsker asks on the controlling terminal (never the sandbox's stdin)
// whether an unmatched host may be reached: once, for the rest of the run,
// or not at all (remembered for the run). With no terminal it denies. The
// command shares that terminal, so the sandbox is paused while the
// question is on it: a command running on could write over it, a host of
// its choice in place of the one asked about. Without a pause (macOS) or
// when the pause fails, it denies unasked and says why.
type ttyAsker struct {
	mu      sync.Mutex
	decided map[string]bool
}

func (a *ttyAsker) ask(host string, port int, pause pipeline.Pause) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := fmt.Sprintf("%s:%d", host, port)
	if v, ok := a.decided[key]; ok {
		return v
	}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer tty.Close()
	switch {
	case pause == nil:
		err = errors.New("sbx cannot pause the sandbox on this platform")
	case relayed(os.Stdout) || relayed(os.Stderr):
		err = errors.New("the command's output goes to a pipe, which could bring it to this terminal after the question")
	}
	var resume func() error
	if err == nil {
		resume, err = pause()
	}
	if err != nil {
		fmt.Fprintf(tty, "\nsbx: the sandboxed command wants to reach %s, which no rule names: denied without asking (%v); allow it in sandbox.network.allowedDomains\n", key, err)
		return false
	}
	answer := a.question(tty, key)
	if err := resume(); err != nil {
		a.decided[key] = false
		fmt.Fprintf(tty, "sbx: %s denied whatever the answer: %v, and may have drawn over the question\n", key, err)
		return false
	}
	return answer
}

// question shows the question about key on tty and reads the answer,
// the sandbox being paused.
func (a *ttyAsker) question(tty *os.File, key string) bool {
	// What the command left on the terminal must not shape the question
	// or answer it: a sequence it left unfinished (an OSC title that would
	// swallow the question) is cancelled (CAN, then ST), a soft reset
	// follows (DECSTR: attributes such as concealed text, scrolling
	// margins, origin mode), the default colours are the terminal's own
	// again (OSC 110, 111: a foreground set to the background's would hide
	// the question under one the command drew), keys are plain text again
	// (kitty's keyboard flags and xterm's modifyOtherKeys, under which the
	// answer's keys would never make a line), and input typed or made
	// before it (a terminal's reply to a query the command sent) is
	// discarded. A terminal ignores what it does not know.
	fmt.Fprint(tty, "\x18\x1b\\\x1b[!p\x1b]110\x1b\\\x1b]111\x1b\\\x1b[=0;1u\x1b[>4;0m")
	flushInput(tty)
	restore, err := questionMode(tty)
	if err != nil {
		fmt.Fprintf(tty, "\nsbx: the sandboxed command wants to reach %s, which no rule names: denied without asking (cannot set the terminal's mode for the question: %v)\n", key, err)
		return false
	}
	defer restore()
	fmt.Fprintf(tty, "\nsbx: the sandboxed command wants to reach %s, which no rule names (the command is paused).\n  [o] allow once   [r] allow for this run   [d] deny (default)\n> ", key)
	line, _ := bufio.NewReader(tty).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "o", "once":
		return true
	case "r", "run":
		a.decided[key] = true
		return true
	default:
		a.decided[key] = false
		return false
	}
}

// relayed reports whether f is a pipe or a socket: what the command wrote
// before it was paused may still be on its way through it (and through
// whatever reads it: tee) to the terminal, after the question, where it
// could write over it. A terminal keeps the order of what is written to
// it; a file or /dev/null shows nothing there.
func relayed(f *os.File) bool {
	fi, err := f.Stat()
	return err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0
}
