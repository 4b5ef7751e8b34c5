package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"sync"
)

// ttyAsker asks on the controlling terminal (never the sandbox's stdin)
// whether an unmatched host may be reached: once, for the rest of the run,
// or not at all (remembered for the run). With no terminal it denies.
type ttyAsker struct {
	mu      sync.Mutex
	decided map[string]bool
}

func (a *ttyAsker) ask(host string, port int) bool {
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
	fmt.Fprintf(tty, "\nsbx: the sandboxed command wants to reach %s, which no rule names.\n  [o] allow once   [r] allow for this run   [d] deny (default)\n> ", key)
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
