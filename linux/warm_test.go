//go:build linux

package linux

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/pipeline"
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

// A sandbox that bubblewrap could not build because the host replaced a
// hidden path meanwhile (its mask's bind failed) is a race a new run
// wins, not something the host lacks: the error says so.
func TestSetUpRaceWithAReplacedMaskIsNamed(t *testing.T) {
	p := filepath.Join(t.TempDir(), ".git-credentials")
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	const out = "bwrap: Can't bind mount /state/masked-1 on /h/.git-credentials: No such file or directory"
	for _, tt := range []struct {
		id   hiddenID
		race bool
	}{{statHidden(p), false}, {hiddenID{}, true}} {
		r := &run{txRep: &TxReport{}, res: &pipeline.Result{}, spec: &pipeline.Spec{}, hidden: map[string]hiddenID{p: tt.id}}
		err := r.finish(context.Background(), nil, false, 1, true, out)
		if got := errors.Is(err, pipeline.ErrUnavailable); got == tt.race || strings.Contains(err.Error(), p) != tt.race {
			t.Errorf("race %v: %v", tt.race, err)
		}
	}
}
