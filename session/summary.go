package session

import (
	"errors"
	"time"
)

// Summary is one run's outcome for scripts and CI (`sbx run --summary`):
// one JSON object, versioned like the audit log.
type Summary struct {
	V          int       `json:"v"`
	Command    string    `json:"command"`
	Workspace  string    `json:"workspace"`
	Ran        bool      `json:"ran"`
	ExitCode   *int      `json:"exitCode"`
	DurationMs int64     `json:"durationMs"`
	Decision   string    `json:"decision"`
	Rule       string    `json:"rule,omitempty"`
	Source     string    `json:"source,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	TimedOut   bool      `json:"timedOut"`
	LimitHit   string    `json:"limitHit,omitempty"`
	Applied    int       `json:"applied"`
	Refused    []Refused `json:"refused"`
	Conflicts  []string  `json:"conflicts"`
	Lost       []string  `json:"lost"`
	Blocked    []string  `json:"blocked"`
	Warnings   []string  `json:"warnings"`
	Error      string    `json:"error,omitempty"`
}

// Refused is a change the policy kept from the host.
type Refused struct {
	Path   string `json:"path"`
	Change string `json:"change"`
	Rule   string `json:"rule"`
	Why    string `json:"why"`
}

// Summarize makes the summary of a run of command that took d: out is
// Run's outcome, err its error (a *DeniedError when the gate refused).
func (s *Session) Summarize(command string, out *Outcome, err error, d time.Duration) *Summary {
	if sb, perr := s.prepare(); perr == nil {
		command = sb.masks.redactor().Redact(command)
	}
	sum := &Summary{V: AuditVersion, Command: command, Workspace: s.dir, DurationMs: d.Milliseconds(),
		Refused: []Refused{}, Conflicts: []string{}, Lost: []string{}, Blocked: []string{}, Warnings: []string{}}
	var denied *DeniedError
	switch {
	case errors.As(err, &denied):
		v := denied.Verdict
		sum.Decision, sum.Rule, sum.Source, sum.Reason = string(v.Decision), v.Rule, v.Source, v.Reason
	case err != nil:
		sum.Decision, sum.Error = "error", err.Error()
	}
	if out == nil {
		return sum
	}
	sum.Ran, sum.ExitCode = true, &out.ExitCode
	if v := out.Verdict; v != nil {
		sum.Decision, sum.Rule, sum.Source, sum.Reason = string(v.Decision), v.Rule, v.Source, v.Reason
	}
	sum.TimedOut, sum.LimitHit = out.TimedOut, out.LimitHit
	sum.Blocked = append(sum.Blocked, out.Blocked...)
	sum.Warnings = append(sum.Warnings, out.Warnings...)
	if c := out.Changes; c != nil {
		sum.Applied, sum.Lost = c.Applied, append(sum.Lost, c.Lost...)
		for _, r := range c.Refused {
			sum.Refused = append(sum.Refused, Refused{r.Path, r.Kind, r.Rule, r.Why})
		}
		for _, k := range c.Conflicts {
			sum.Conflicts = append(sum.Conflicts, k.Path)
		}
	}
	return sum
}
