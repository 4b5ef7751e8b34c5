//go:build linux

package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// actionDir is the repository's GitHub Action.
const actionDir = "../.github/actions/sbx"

// The action's YAML, read with a real parser: a composite action whose
// shell steps call its script, which exists and is executable.
func TestActionYAML(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(actionDir, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Inputs map[string]struct {
			Required bool
			Default  *string
		}
		Runs struct {
			Using string
			Steps []struct {
				Uses, Run, Shell string
				Env              map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if a.Runs.Using != "composite" || !a.Inputs["command"].Required || a.Inputs["fail-on"].Default == nil {
		t.Errorf("action.yml: %+v", a)
	}
	scripts := 0
	for _, s := range a.Runs.Steps {
		if s.Run == "" {
			continue
		}
		if s.Shell != "bash" || !strings.Contains(s.Run, `"$GITHUB_ACTION_PATH/sbx-action"`) {
			t.Errorf("step %q: shell %q", s.Run, s.Shell)
		}
		scripts++
	}
	if fi, err := os.Stat(filepath.Join(actionDir, "sbx-action")); err != nil || fi.Mode()&0o111 == 0 || scripts != 2 {
		t.Errorf("sbx-action: %v, %d steps call it", err, scripts)
	}
}

// The action's run step against this build: it passes a clean run, fails
// one with a refused change (unless told not to), and always leaves the
// audit log and the summary.
func TestActionRunStep(t *testing.T) {
	requireTool(t, "python3")
	e := newEnv(t)
	script, _ := filepath.Abs(filepath.Join(actionDir, "sbx-action"))
	run := func(command, failOn string) (string, int, string) {
		out := filepath.Join(t.TempDir(), "out")
		cmd := exec.Command(script, "run")
		cmd.Dir = e.ws
		cmd.Env = append(e.environ(), "PATH="+filepath.Dir(sbxBin)+":/usr/bin:/bin", "SBX_COMMAND="+command, "SBX_OUT="+out,
			"SBX_FAIL_ON="+failOn, "SBX_ALLOW_DOMAINS=example.com\n*.example.org")
		b, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return string(b), code, out
	}
	msg, code, out := run("echo ok > made.txt", "")
	if code != 0 {
		t.Errorf("a clean run failed: %d %s", code, msg)
	}
	var sum struct{ Ran bool }
	b, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	if json.Unmarshal(b, &sum) != nil || !sum.Ran {
		t.Errorf("summary: %s", b)
	}
	if a, _ := os.ReadFile(filepath.Join(out, "audit.jsonl")); !strings.Contains(string(a), `"event":"run-end"`) {
		t.Errorf("audit log: %s", a)
	}
	plant := `python3 -c "import os; os.makedirs('.v'+'scode', exist_ok=True); open('.v'+'scode/tasks.json','w').write('{}')"`
	if msg, code, _ := run(plant, ""); code != 1 || !strings.Contains(msg, "change(s) refused") {
		t.Errorf("a refused change passed: %d %s", code, msg)
	}
	if msg, code, _ := run(plant, "none"); code != 0 {
		t.Errorf("fail-on none: %d %s", code, msg)
	}
	if msg, code, _ := run("exit 3", "exit"); code != 1 || !strings.Contains(msg, "status 3") {
		t.Errorf("fail-on exit: %d %s", code, msg)
	}
}
