package pipeline

import (
	"fmt"

	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/internal/printable"
)

// Changes is what became of a command's writes to its writable roots: on
// Linux they reach the host only through one checked merge when the
// sandbox is gone.
type Changes struct {
	// Applied counts the changes that reached the host.
	Applied int
	// Refused are changes the policy kept from the host, each saved to
	// the quarantine when there was something to save.
	Refused []fsrules.Refusal
	// Conflicts are paths changed both on the host during the run and by
	// the command: the host's version is kept, the command's saved aside.
	Conflicts []Conflict
	// Lost are changes that could be neither applied nor saved.
	Lost []string
	// Discarded: nothing was applied (--discard); Would lists what would
	// have changed (WouldMore counts what the list leaves out).
	Discarded bool
	Would     []string
	WouldMore int
	// Notes are entries left out by design (sockets).
	Notes []string
}

// Conflict is a path both the command and someone on the host changed,
// or (Why set) a change that could not be applied, saved aside instead.
type Conflict struct {
	Path  string `json:"path"`
	Saved string `json:"saved,omitempty"`
	// Why, when set, is why the change could not be applied (the host
	// did not change it: the write failed, e.g. a full disk).
	Why string `json:"why,omitempty"`
}

// Incomplete reports whether some of the command's changes are not on the
// host although the policy allowed them: conflicts and losses. A run with
// such changes fails (see the README's exit statuses).
func (c *Changes) Incomplete() bool {
	return c != nil && (len(c.Conflicts) > 0 || len(c.Lost) > 0)
}

// Lines describes the changes for a person or a model, one line each:
// every refusal with its rule, every conflict with where the command's
// version is, every loss.
func (c *Changes) Lines() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, r := range c.Refused {
		l := fmt.Sprintf("refused to %s %s (%s: %s)", r.Kind, r.Path, r.Rule, r.Why)
		if r.Saved != "" {
			l += "; the command's version is saved at " + r.Saved
		}
		out = append(out, l)
	}
	for _, k := range c.Conflicts {
		if k.Why != "" {
			out = append(out, fmt.Sprintf("not applied: %s (%s); the command's version is saved at %s", k.Path, k.Why, k.Saved))
		} else if k.Saved != "" {
			out = append(out, fmt.Sprintf("conflict: %s changed on the host during the run; the host's version is kept, the command's is saved at %s", k.Path, k.Saved))
		} else {
			out = append(out, fmt.Sprintf("conflict: %s changed on the host during the run; the host's version is kept (the command deleted it)", k.Path))
		}
	}
	for _, l := range c.Lost {
		out = append(out, "LOST: a change could be neither applied nor saved: "+l)
	}
	if c.Discarded {
		out = append(out, fmt.Sprintf("--discard: nothing was applied; the command would have made %d change(s)", len(c.Would)+c.WouldMore))
		for _, w := range c.Would {
			out = append(out, "  would "+w)
		}
		if c.WouldMore > 0 {
			out = append(out, fmt.Sprintf("  … and %d more", c.WouldMore))
		}
	}
	out = append(out, c.Notes...)
	for i, l := range out {
		out[i] = printable.Escape(l)
	}
	return out
}
