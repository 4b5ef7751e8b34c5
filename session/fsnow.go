package session

import (
	"sync"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// policyNow is the filesystem policy of a long-lived session's calls, as
// the host is at each call: the last compiled policy while every question
// its compile asked of the host (fsrules.Trace) has the same answer,
// compiled again otherwise. Asking again costs the compile's system calls
// without its work.
type policyNow struct {
	compile func(*fsrules.Trace) (*fsrules.Policy, error)

	mu    sync.Mutex
	pol   *fsrules.Policy
	trace *fsrules.Trace
}

// get returns the policy for a call.
func (p *policyNow) get() (*fsrules.Policy, error) {
	p.mu.Lock()
	pol, tr := p.pol, p.trace
	p.mu.Unlock()
	if pol != nil && tr.Same() {
		return pol, nil
	}
	tr = fsrules.NewTrace()
	pol, err := p.compile(tr)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.pol, p.trace = pol, tr
	p.mu.Unlock()
	return pol, nil
}
