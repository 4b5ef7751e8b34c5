package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/proxy"
)

// auditLog appends proxy events, limit events and sandbox violations to a
// JSON Lines file.
type auditLog struct {
	mu  sync.Mutex
	f   *os.File
	enc *json.Encoder
}

func openAudit(path string) (*auditLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--audit: %w", err)
	}
	return &auditLog{f: f, enc: json.NewEncoder(f)}, nil
}

func (a *auditLog) event(e proxy.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.enc.Encode(e)
}

// limit records that a resource limit stopped or constrained the run.
func (a *auditLog) limit(what string, exitCode int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.enc.Encode(struct {
		Time     time.Time `json:"time"`
		Event    string    `json:"event"`
		Limit    string    `json:"limit"`
		ExitCode int       `json:"exitCode"`
	}{time.Now().UTC(), "limit", what, exitCode})
}

// violation records an operation the sandbox denied, as the platform
// reports it (macOS: the unified log).
func (a *auditLog) violation(when, process string, pid int, op, target string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.enc.Encode(struct {
		Time      time.Time `json:"time"`
		Event     string    `json:"event"`
		LogTime   string    `json:"logTime,omitempty"`
		Process   string    `json:"process"`
		PID       int       `json:"pid"`
		Operation string    `json:"operation"`
		Target    string    `json:"target,omitempty"`
	}{time.Now().UTC(), "sandbox-violation", when, process, pid, op, target})
}

// changes records every change of the command's that did not reach the
// host: refused by the policy, in conflict with the host, or lost.
func (a *auditLog) changes(c *pipeline.Changes) {
	if c == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	type ev struct {
		Time   time.Time `json:"time"`
		Event  string    `json:"event"`
		Path   string    `json:"path,omitempty"`
		Change string    `json:"change,omitempty"`
		Rule   string    `json:"rule,omitempty"`
		Why    string    `json:"why,omitempty"`
		Saved  string    `json:"saved,omitempty"`
	}
	now := time.Now().UTC()
	for _, r := range c.Refused {
		a.enc.Encode(ev{now, "write-refused", r.Path, r.Kind, r.Rule, r.Why, r.Saved})
	}
	for _, k := range c.Conflicts {
		a.enc.Encode(ev{Time: now, Event: "write-conflict", Path: k.Path, Why: k.Why, Saved: k.Saved})
	}
	for _, l := range c.Lost {
		a.enc.Encode(ev{Time: now, Event: "write-lost", Why: l})
	}
}

func (a *auditLog) Close() error { return a.f.Close() }

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
