package proxy

import (
	"fmt"
	"sync"
)

// maxBlocked is how many blocked destinations a summary names.
const maxBlocked = 20

// Blocked collects the destinations the proxy refused during one run, for
// the summary sbx prints when the command ends (over HTTPS a client shows
// only a bare 403; the summary says which host and why).
type Blocked struct {
	mu    sync.Mutex
	seen  map[string]bool
	lines []string
	more  int
}

// Wrap returns an audit function that records refusals and passes every
// event on to next (nil: to no one).
func (b *Blocked) Wrap(next func(Event)) func(Event) {
	return func(e Event) {
		b.record(e)
		if next != nil {
			next(e)
		}
	}
}

func (b *Blocked) record(e Event) {
	if e.Decision != "deny" {
		return
	}
	key := fmt.Sprintf("%s:%d", e.Host, e.Port)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[key] {
		return
	}
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	b.seen[key] = true
	if len(b.lines) == maxBlocked {
		b.more++
		return
	}
	b.lines = append(b.lines, fmt.Sprintf("blocked %s (%s)", key, e.Reason))
}

// Lines are one line per blocked destination, in the order first seen.
func (b *Blocked) Lines() []string {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := append([]string(nil), b.lines...)
	if b.more > 0 {
		out = append(out, fmt.Sprintf("blocked %d more destinations (--audit FILE lists them all)", b.more))
	}
	return out
}
