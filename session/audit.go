package session

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/proxy"
)

// Audit appends what the sandbox decided to a JSON Lines file: the proxy's
// events, limits that stopped a command, changes that did not reach the
// host, and (macOS) operations the sandbox denied.
type Audit struct {
	mu  sync.Mutex
	f   *os.File
	enc *json.Encoder
}

// OpenAudit opens (appending) or creates the audit file, mode 0600.
func OpenAudit(path string) (*Audit, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return &Audit{f: f, enc: json.NewEncoder(f)}, nil
}

func (a *Audit) write(v any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.enc.Encode(v)
}

// Event records a proxy event.
func (a *Audit) Event(e proxy.Event) { a.write(e) }

// Limit records that a resource limit stopped or constrained a command.
func (a *Audit) Limit(what string, exitCode int) {
	a.write(struct {
		Time     time.Time `json:"time"`
		Event    string    `json:"event"`
		Limit    string    `json:"limit"`
		ExitCode int       `json:"exitCode"`
	}{time.Now().UTC(), "limit", what, exitCode})
}

// Violation records an operation the sandbox denied, as the platform
// reports it (macOS: the unified log).
func (a *Audit) Violation(when, process string, pid int, op, target string) {
	a.write(struct {
		Time      time.Time `json:"time"`
		Event     string    `json:"event"`
		LogTime   string    `json:"logTime,omitempty"`
		Process   string    `json:"process"`
		PID       int       `json:"pid"`
		Operation string    `json:"operation"`
		Target    string    `json:"target,omitempty"`
	}{time.Now().UTC(), "sandbox-violation", when, process, pid, op, target})
}

// Changes records every change of a command's that did not reach the
// host: refused by the policy, in conflict with the host, or lost.
func (a *Audit) Changes(c *pipeline.Changes) {
	if c == nil {
		return
	}
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
		a.write(ev{now, "write-refused", r.Path, r.Kind, r.Rule, r.Why, r.Saved})
	}
	for _, k := range c.Conflicts {
		a.write(ev{Time: now, Event: "write-conflict", Path: k.Path, Why: k.Why, Saved: k.Saved})
	}
	for _, l := range c.Lost {
		a.write(ev{Time: now, Event: "write-lost", Why: l})
	}
}

// Close closes the file.
func (a *Audit) Close() error { return a.f.Close() }
