//go:build linux

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestProbes runs every probe, as sbx probe does, against the built binary.
func TestProbes(t *testing.T) {
	requireSandbox(t)
	requireCurl(t)
	var progress []string
	results, err := RunProbesProgress(context.Background(), sbxBin, nil, func(i, n int, r *ProbeResult) {
		progress = append(progress, fmt.Sprintf("%d/%d %s", i, n, r.Name))
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(Probes()) {
		t.Fatalf("%d results for %d probes", len(results), len(Probes()))
	}
	// sbx probe says, on a terminal, where it is as each probe ends.
	if want := fmt.Sprintf("%d/%d %s", len(results), len(results), results[len(results)-1].Name); len(progress) != len(results) || progress[len(progress)-1] != want {
		t.Errorf("progress %v, want %d steps ending %q", progress, len(results), want)
	}
	for _, r := range results {
		want := StatusPass
		if r.Name == "resource-limits" && r.Status != want && !inCI() && strings.Contains(r.Detail, "cannot enforce") {
			t.Logf("probe %s skipped on this host: %s", r.Name, r.Detail)
			continue
		}
		if r.Status != want {
			t.Errorf("probe %s: %s, want %s (%s)", r.Name, r.Status, want, r.Detail)
			for _, s := range r.Steps {
				for _, c := range s.Checks {
					if !c.OK {
						t.Errorf("  %s: %s", c.What, c.Detail)
					}
				}
			}
		}
	}
}

// sbx probe --summary prints one line per probe and nothing else.
func TestProbeSummary(t *testing.T) {
	requireSandbox(t)
	e := newEnv(t)
	r := e.sbx("probe", "--summary", "--only", "filesystem,hook-deny")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "filesystem") || !strings.HasSuffix(lines[0], " pass") ||
		!strings.HasPrefix(lines[1], "hook-deny") || !strings.HasSuffix(lines[1], " pass") {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}
