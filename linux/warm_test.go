//go:build linux

package linux

import (
	"slices"
	"testing"
)

// A warm call's clean-up ends in the background: what it warns about
// comes with the next result, once; after Close it runs at once.
func TestLaterWarnings(t *testing.T) {
	e := &Executor{}
	ran := make(chan struct{})
	e.later(func() []string {
		defer close(ran)
		return []string{"run directory left: x"}
	})
	<-ran
	e.pool.wg.Wait()
	if got := e.laterWarnings(); !slices.Equal(got, []string{"run directory left: x"}) {
		t.Errorf("warnings %q", got)
	}
	if got := e.laterWarnings(); got != nil {
		t.Errorf("warnings given twice: %q", got)
	}
	e.Close()
	done := false
	e.later(func() []string { done = true; return nil })
	if !done {
		t.Error("a clean-up after Close did not run before later returned")
	}
}
