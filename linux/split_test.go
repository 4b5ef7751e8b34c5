package linux

import (
	"slices"
	"testing"

	"github.com/sbx-sandbox/sbx/fsrules"
)

func TestSplitPlan(t *testing.T) {
	plan := BuildPlan(PlanInput{
		Policy: &fsrules.Policy{
			Writable:  []fsrules.Path{{Path: "/w", Dir: true, Exists: true}, {Path: "/h/w2", Dir: true, Exists: true}},
			DenyWrite: []fsrules.Path{{Path: "/w/vendor", Dir: true, Exists: true}},
			DenyRead:  []fsrules.Path{{Path: "/h", Dir: true, Exists: true}},
			AllowRead: []fsrules.Path{{Path: "/h/pub", Dir: true, Exists: true}},
		},
		EmptyFile: "/e",
		Exe:       "/tmp/x/sbx",
	})
	bw, ro := SplitPlan(plan)
	// Inside writable roots (or read-only self-binds of them): init.
	want := []string{"/w/vendor"}
	if !slices.Equal(ro, want) {
		t.Errorf("init binds = %q, want %q", ro, want)
	}
	// Re-opened hidden paths and the binary under the private /tmp need the
	// host's view: bubblewrap.
	var bwDst []string
	for _, op := range bw {
		if op.Kind == OpROBind {
			bwDst = append(bwDst, op.Dst)
		}
	}
	for _, p := range []string{"/h/pub", "/tmp/x/sbx"} {
		if !slices.Contains(bwDst, p) {
			t.Errorf("bubblewrap binds %q lack %s", bwDst, p)
		}
	}
}
