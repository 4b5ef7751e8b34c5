package proxy

import (
	"fmt"
	"strconv"
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
	b.lines = append(b.lines, fmt.Sprintf("blocked %s (%s)", printable(key), printable(e.Reason)))
}

// printable is s with control characters and invisible or non-ASCII
// letters quoted as Go escapes (\x1b, \u0456): a name the sandboxed
// command chose reaches sbx's stderr and the tool_result, where escape
// sequences would redraw the terminal and a homoglyph pass for another
// host.
func printable(s string) string {
	for _, r := range s {
		if r < 0x20 || r >= 0x7f {
			q := strconv.QuoteToASCII(s)
			return q[1 : len(q)-1]
		}
	}
	return s
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
