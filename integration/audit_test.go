//go:build linux

package integration

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The audit log from real runs: every line has the schema's version, time
// and kind, and each kind its fields; the summary says what happened.
func TestAuditLogAndSummary(t *testing.T) {
	e := newEnv(t)
	audit, summary := filepath.Join(e.home, "audit.jsonl"), filepath.Join(e.home, "summary.json")
	script := `import os, subprocess
os.makedirs('.v' + 'scode', exist_ok=True)
open('.v' + 'scode/tasks.json', 'w').write('{}')
open('kept.txt', 'w').write('y')
subprocess.run(['curl', '-s', '-m2', 'http://blocked.invalid/'])
raise SystemExit(3)`
	requireTool(t, "python3")
	requireCurl(t)
	r := e.sbx("run", "--audit", audit, "--summary", summary, "--", "python3", "-c", script)
	if r.code != 3 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	e.sbx("run", "--audit", audit, "--settings", `{"permissions":{"deny":["Bash(rm:*)"]}}`, "--", "rm", "-rf", "x")
	e.sbx("run", "--audit", audit, "--timeout", "1s", "--", "sleep", "10")
	// A secret on the command line never reaches the log or the summary.
	const token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	secretSummary := filepath.Join(e.home, "secret-summary.json")
	cmd := exec.Command(sbxBin, "run", "--audit", audit, "--summary", secretSummary, "--", "echo", token)
	cmd.Dir, cmd.Env = e.ws, append(e.environ(), "GITHUB_TOKEN="+token)
	cmd.Run()
	for _, f := range []string{audit, secretSummary} {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), token) || len(b) == 0 {
			t.Errorf("%s holds the secret (or nothing): %s", f, b)
		}
	}
	required := map[string][]string{
		"gate":          {"tool", "decision", "source"},
		"run-start":     {"argv", "dir", "workspace", "limits"},
		"run-end":       {"exitCode", "durationMs", "applied", "refused", "blocked"},
		"network":       {"proto", "host", "port", "decision"},
		"write-refused": {"path", "change", "rule", "why"},
		"limit":         {"limit", "exitCode"},
	}
	seen := map[string]int{}
	f, err := os.Open(audit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("not JSON: %s", sc.Text())
		}
		kind, _ := rec["event"].(string)
		if rec["v"] != float64(1) || rec["time"] == nil || required[kind] == nil {
			t.Errorf("bad record: %s", sc.Text())
			continue
		}
		seen[kind]++
		for _, k := range required[kind] {
			if _, ok := rec[k]; !ok {
				t.Errorf("%s lacks %q: %s", kind, k, sc.Text())
			}
		}
	}
	for kind := range required {
		if seen[kind] == 0 {
			t.Errorf("no %s event in the log (%v)", kind, seen)
		}
	}
	var sum struct {
		Ran      bool
		ExitCode *int
		Decision string
		Applied  int
		Refused  []struct{ Path, Rule string }
		Blocked  []string
	}
	b, _ := os.ReadFile(summary)
	if err := json.Unmarshal(b, &sum); err != nil || !sum.Ran || sum.ExitCode == nil || *sum.ExitCode != 3 || sum.Decision != "allow" ||
		sum.Applied != 1 || len(sum.Refused) != 1 || !strings.HasSuffix(sum.Refused[0].Path, ".vscode") || len(sum.Blocked) != 1 {
		t.Errorf("summary: %v\n%s", err, b)
	}
}

// --print-policy shows the whole policy in one casing, empty lists as [],
// and the secrets by name only.
func TestPrintPolicy(t *testing.T) {
	e := newEnv(t)
	const token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	cmd := exec.Command(sbxBin, "run", "--print-policy", "--max-procs", "64", "--", "true")
	cmd.Dir, cmd.Env = e.ws, append(e.environ(), "GITHUB_TOKEN="+token)
	out, err := cmd.Output()
	if err != nil || strings.Contains(string(out), token) || strings.Contains(string(out), `"Rules"`) || strings.Contains(string(out), "null") {
		t.Fatalf("%v: %s", err, out)
	}
	var p struct {
		Network struct {
			Rules struct {
				Allow, Deny []any
			}
			Strict *bool
		}
		Limits      map[string]any
		Secrets     []map[string]any
		MaskedFiles []string `json:"maskedFiles"`
		Filesystem  struct {
			DenyWrite, AllowRead []any
			ProtectedFiles       []string `json:"protectedFiles"`
			ProtectedDirs        []string `json:"protectedDirs"`
		}
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	if p.Network.Rules.Allow == nil || p.Network.Rules.Deny == nil || p.Network.Strict == nil || p.MaskedFiles == nil ||
		p.Limits["maxProcs"] != float64(64) || len(p.Secrets) != 1 || p.Secrets[0]["name"] != "GITHUB_TOKEN" ||
		p.Filesystem.DenyWrite == nil || p.Filesystem.AllowRead == nil ||
		!slices.Contains(p.Filesystem.ProtectedFiles, ".bashrc") || !slices.Contains(p.Filesystem.ProtectedDirs, ".vscode") {
		t.Errorf("policy: %s", out)
	}
}

// --debug shows the bubblewrap command line and every phase of the
// start-up, from all three processes (sbx, the helper, the init), in the
// order they ended; the command's own output is untouched.
func TestDebugTrace(t *testing.T) {
	e := newEnv(t)
	r := e.sbx("run", "--debug", "--", "echo", "hi")
	if r.code != 0 || r.stdout != "hi\n" {
		t.Fatalf("%d %q\n%s", r.code, r.stdout, r.stderr)
	}
	want := []string{"bubblewrap: ", "session: gate decided", "sbx: helper started", "helper: overlays mounted",
		"init: running", "init: command started", "init: the command exited", "helper: merged", "total"}
	last := -1
	for _, w := range want {
		i := strings.Index(r.stderr, w)
		if i < 0 || i < last {
			t.Fatalf("%q missing or out of order in:\n%s", w, r.stderr)
		}
		last = i
	}
	if !strings.Contains(r.stderr, "--unshare-net") || !strings.Contains(r.stderr, " __sbx_init") {
		t.Errorf("no bubblewrap argv:\n%s", r.stderr)
	}
	if q := e.sbx("run", "--", "true"); strings.Contains(q.stderr, "debug") {
		t.Errorf("a run without --debug traced:\n%s", q.stderr)
	}
}
