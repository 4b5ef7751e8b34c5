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

// AuditVersion is the version of the audit log's schema: every line is one
// JSON object with "v", "time" and "event" (see the README for each kind).
const AuditVersion = 1

// Audit appends every decision to a JSON Lines file: gate decisions, run
// start and end, the proxy's network decisions, changes that did not reach
// the host, limits that stopped a command, and (macOS) operations the
// sandbox denied. It never holds a secret's value.
type Audit struct {
	mu  sync.Mutex
	f   *os.File
	enc *json.Encoder
	// redact removes real secret values from commands and paths (nil:
	// nothing to remove).
	redact func(string) string
}

func (a *Audit) clean(s string) string {
	if a.redact == nil {
		return s
	}
	return a.redact(s)
}

// OpenAudit opens (appending) or creates the audit file, mode 0600.
func OpenAudit(path string) (*Audit, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return &Audit{f: f, enc: json.NewEncoder(f)}, nil
}

// head starts every record.
type head struct {
	V     int       `json:"v"`
	Time  time.Time `json:"time"`
	Event string    `json:"event"`
}

func newHead(event string) head { return head{AuditVersion, time.Now().UTC(), event} }

func (a *Audit) write(v any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.enc.Encode(v)
}

// Event records a proxy event ("network").
func (a *Audit) Event(e proxy.Event) {
	a.write(struct {
		V    int    `json:"v"`
		Kind string `json:"event"`
		proxy.Event
	}{AuditVersion, "network", e})
}

// Gate records the gate's final decision on a tool call ("gate").
func (a *Audit) Gate(call *pipeline.Call, v *pipeline.Verdict) {
	a.write(struct {
		head
		Tool     string `json:"tool"`
		ID       string `json:"id,omitempty"`
		Input    string `json:"input,omitempty"`
		Decision string `json:"decision"`
		Reason   string `json:"reason,omitempty"`
		Rule     string `json:"rule,omitempty"`
		Source   string `json:"source,omitempty"`
	}{newHead("gate"), call.Tool, call.ID, a.clean(call.Summary()), string(v.Decision), a.clean(v.Reason), v.Rule, v.Source})
}

// RunStart records a command about to start in the sandbox ("run-start").
func (a *Audit) RunStart(s *pipeline.Spec) {
	workspace := ""
	if s.FS != nil {
		workspace = s.FS.Workspace
	}
	argv := make([]string, len(s.Argv))
	for i, a0 := range s.Argv {
		argv[i] = a.clean(a0)
	}
	a.write(struct {
		head
		Argv      []string    `json:"argv"`
		Dir       string      `json:"dir"`
		Workspace string      `json:"workspace,omitempty"`
		Network   bool        `json:"network"`
		TimeoutMs int64       `json:"timeoutMs,omitempty"`
		Limits    auditLimits `json:"limits"`
	}{newHead("run-start"), argv, s.Dir, workspace, s.Net != nil, s.Timeout.Milliseconds(), limitsOf(s.Limits)})
}

// auditLimits are a run's limits as the audit log spells them (zero: none).
type auditLimits struct {
	MaxProcs      int   `json:"maxProcs,omitempty"`
	MaxMemory     int64 `json:"maxMemoryBytes,omitempty"`
	MaxCPUSeconds int64 `json:"maxCPUSeconds,omitempty"`
	MaxTmp        int64 `json:"maxTmpBytes,omitempty"`
	MaxOpenFiles  int   `json:"maxOpenFiles,omitempty"`
	MaxDisk       int64 `json:"maxDiskBytes,omitempty"`
}

func limitsOf(l pipeline.Limits) auditLimits {
	return auditLimits{l.MaxProcs, l.MaxMemory, int64(l.MaxCPU.Seconds()), l.MaxTmp, l.MaxOpenFiles, l.MaxDisk}
}

// RunEnd records how it ended ("run-end"): its status, or why the sandbox
// failed.
func (a *Audit) RunEnd(res *pipeline.Result, err error, d time.Duration) {
	type end struct {
		head
		ExitCode   *int   `json:"exitCode"`
		DurationMs int64  `json:"durationMs"`
		TimedOut   bool   `json:"timedOut,omitempty"`
		LimitHit   string `json:"limitHit,omitempty"`
		Applied    int    `json:"applied"`
		Refused    int    `json:"refused"`
		Blocked    int    `json:"blocked"`
		Error      string `json:"error,omitempty"`
	}
	e := end{head: newHead("run-end"), DurationMs: d.Milliseconds()}
	if err != nil {
		e.Error = err.Error()
	}
	if res != nil {
		e.ExitCode, e.TimedOut, e.LimitHit, e.Blocked = &res.ExitCode, res.TimedOut, res.LimitHit, len(res.Blocked)
		if res.Changes != nil {
			e.Applied, e.Refused = res.Changes.Applied, len(res.Changes.Refused)
		}
	}
	a.write(e)
}

// Limit records that a resource limit stopped or constrained a command.
func (a *Audit) Limit(what string, exitCode int) {
	a.write(struct {
		head
		Limit    string `json:"limit"`
		ExitCode int    `json:"exitCode"`
	}{newHead("limit"), what, exitCode})
}

// Violation records an operation the sandbox denied, as the platform
// reports it (macOS: the unified log).
func (a *Audit) Violation(when, process string, pid int, op, target string) {
	a.write(struct {
		head
		LogTime   string `json:"logTime,omitempty"`
		Process   string `json:"process"`
		PID       int    `json:"pid"`
		Operation string `json:"operation"`
		Target    string `json:"target,omitempty"`
	}{newHead("sandbox-violation"), when, process, pid, op, target})
}

// Changes records every change of a command's that did not reach the
// host: refused by the policy, in conflict with the host, or lost.
func (a *Audit) Changes(c *pipeline.Changes) {
	if c == nil {
		return
	}
	type ev struct {
		head
		Path   string `json:"path,omitempty"`
		Change string `json:"change,omitempty"`
		Rule   string `json:"rule,omitempty"`
		Why    string `json:"why,omitempty"`
		Saved  string `json:"saved,omitempty"`
	}
	for _, r := range c.Refused {
		a.write(ev{newHead("write-refused"), r.Path, r.Kind, r.Rule, r.Why, r.Saved})
	}
	for _, k := range c.Conflicts {
		a.write(ev{head: newHead("write-conflict"), Path: k.Path, Why: k.Why, Saved: k.Saved})
	}
	for _, l := range c.Lost {
		a.write(ev{head: newHead("write-lost"), Why: l})
	}
}

// Close closes the file.
func (a *Audit) Close() error { return a.f.Close() }
