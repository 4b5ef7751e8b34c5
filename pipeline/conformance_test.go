package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// conformanceCase is one line of the conformance files (spec §8).
type conformanceCase struct {
	ID       string                     `json:"id"`
	Title    string                     `json:"title"`
	Settings map[string]json.RawMessage `json:"settings"`
	Mode     string                     `json:"mode"`
	Hooks    []struct {
		Event    string `json:"event"`
		Matcher  string `json:"matcher"`
		If       string `json:"if"`
		Type     string `json:"type"`
		Timeout  float64
		Behavior struct {
			ExitCode int             `json:"exit_code"`
			Stdout   json.RawMessage `json:"stdout"`
			Stderr   string          `json:"stderr"`
			SleepS   float64         `json:"sleep_s"`
		} `json:"behavior"`
	} `json:"hooks"`
	Tool  string          `json:"tool"`
	Input json.RawMessage `json:"input"`
	Cwd   string          `json:"cwd"`
	Env   struct {
		Home             string `json:"home"`
		Interactive      bool   `json:"interactive"`
		WorkspaceTrusted bool   `json:"workspace_trusted"`
		SandboxAvailable bool   `json:"sandbox_available"`
	} `json:"env"`
	ExpectDecision string         `json:"expect_decision"`
	ExpectExtra    map[string]any `json:"expect_extra"`
	Note           string         `json:"note"`
}

// conformanceFiles are the case files run by TestConformance; more can be
// dropped into testdata with the same name pattern.
func conformanceFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join("testdata", "conformance*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no conformance files: %v", err)
	}
	return files
}

func TestConformance(t *testing.T) {
	for _, file := range conformanceFiles(t) {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			var c conformanceCase
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			t.Run(c.ID, func(t *testing.T) { runConformance(t, &c) })
		}
		f.Close()
	}
}

func runConformance(t *testing.T, c *conformanceCase) {
	root := t.TempDir()
	home, proj, managed := filepath.Join(root, "home"), filepath.Join(root, "proj"), filepath.Join(root, "managed")
	for _, d := range []string{home, proj, managed, filepath.Join(home, ".claude"), filepath.Join(proj, ".claude")} {
		os.MkdirAll(d, 0o755)
	}
	fix := func(s string) string {
		s = strings.ReplaceAll(s, "/srv/proj", proj)
		return strings.ReplaceAll(s, c.Env.Home, home)
	}
	// Claude Code's own defaults of the keys where sbx differs, at the user
	// level; the case's settings win.
	user := map[string]any{"sandbox": map[string]any{"enabled": false, "allowUnsandboxedCommands": true}}
	if raw, ok := c.Settings["user"]; ok {
		var u map[string]any
		json.Unmarshal([]byte(fix(string(raw))), &u)
		mergeJSON(user, u)
	}
	// Hooks become scripts, registered in the user settings.
	var hooks map[string][]any
	for i, h := range c.Hooks {
		script := filepath.Join(root, fmt.Sprintf("hook%d.sh", i))
		var body strings.Builder
		body.WriteString("#!/bin/sh\ncat >/dev/null\n")
		if h.Behavior.SleepS > 0 {
			fmt.Fprintf(&body, "sleep %g\n", h.Behavior.SleepS)
		}
		if len(h.Behavior.Stdout) > 0 && string(h.Behavior.Stdout) != "null" {
			out := string(h.Behavior.Stdout)
			var s string
			if json.Unmarshal(h.Behavior.Stdout, &s) == nil {
				out = s
			}
			fmt.Fprintf(&body, "cat <<'SBX_EOF'\n%s\nSBX_EOF\n", out)
		}
		if h.Behavior.Stderr != "" {
			fmt.Fprintf(&body, "cat >&2 <<'SBX_EOF'\n%s\nSBX_EOF\n", h.Behavior.Stderr)
		}
		fmt.Fprintf(&body, "exit %d\n", h.Behavior.ExitCode)
		os.WriteFile(script, []byte(body.String()), 0o755)
		if hooks == nil {
			hooks = map[string][]any{}
		}
		handler := map[string]any{"type": "command", "command": script}
		if h.If != "" {
			handler["if"] = h.If
		}
		if h.Timeout > 0 {
			handler["timeout"] = h.Timeout
		}
		hooks[h.Event] = append(hooks[h.Event], map[string]any{"matcher": h.Matcher, "hooks": []any{handler}})
	}
	if hooks != nil {
		user["hooks"] = hooks
	}
	write := func(path string, v any) {
		data, _ := json.Marshal(v)
		os.WriteFile(path, data, 0o644)
	}
	write(filepath.Join(home, ".claude", "settings.json"), user)
	var cliFiles []string
	for level, raw := range c.Settings {
		content := []byte(fix(string(raw)))
		switch level {
		case "project":
			os.WriteFile(filepath.Join(proj, ".claude", "settings.json"), content, 0o644)
		case "local":
			os.WriteFile(filepath.Join(proj, ".claude", "settings.local.json"), content, 0o644)
		case "managed":
			os.WriteFile(filepath.Join(managed, "managed-settings.json"), content, 0o644)
		case "cli":
			p := filepath.Join(root, "cli.json")
			os.WriteFile(p, content, 0o644)
			cliFiles = append(cliFiles, p)
		}
	}
	st, err := settings.Load(settings.Options{ProjectDir: proj, Home: home, Claude: true, TrustProject: c.Env.WorkspaceTrusted,
		ManagedDir: filepath.Join(root, "no-sbx-managed"), ClaudeManagedDir: managed, Files: cliFiles,
		ConfigHome: filepath.Join(home, ".config")})
	if err != nil {
		t.Fatalf("settings: %v", err)
	}
	opts := GateOptions{Settings: st, Cwd: proj, Home: home, Mode: c.Mode, Interactive: c.Env.Interactive,
		SandboxAvailable: c.Env.SandboxAvailable}
	if c.Mode == "auto" {
		// An external classifier that never approves: auto-mode cases in
		// the sample test what forces a prompt.
		opts.Classifier = []string{"true"}
	}
	g, err := NewGate(opts)
	if err != nil {
		t.Fatalf("gate: %v", err)
	}
	v, err := g.Decide(context.Background(), &Call{ID: "toolu_" + c.ID, Tool: c.Tool, Input: json.RawMessage(fix(string(c.Input)))})
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	if string(v.Decision) != c.ExpectDecision {
		t.Errorf("%s (%s): decision %s, want %s\nreason: %s\ntrail: %q\nnote: %s", c.ID, c.Title, v.Decision, c.ExpectDecision, v.Reason, v.Trail, c.Note)
	}
	if want, ok := c.ExpectExtra["reason_shown_to_model"].(string); ok && !strings.Contains(v.Reason, want) {
		t.Errorf("%s: reason %q lacks %q", c.ID, v.Reason, want)
	}
	if want, ok := c.ExpectExtra["executed_input"]; ok {
		var got any
		json.Unmarshal(v.Input, &got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: executed input %v, want %v", c.ID, got, want)
		}
	}
	if want, ok := c.ExpectExtra["sandboxed"].(bool); ok && v.Sandboxed != want {
		t.Errorf("%s: sandboxed %v, want %v", c.ID, v.Sandboxed, want)
	}
	if want, ok := c.ExpectExtra["sandbox_denyRead_includes"].([]any); ok {
		in := FSInput(st, FSFlags{}, proj)
		var got []string
		for _, r := range in.DenyRead {
			got = append(got, r.Pattern)
		}
		for _, w := range want {
			p := fix(w.(string))
			found := false
			for _, r := range in.DenyRead {
				if a, err := anchorForTest(r, home); err == nil && a == p {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: sandbox denyRead %q lacks %s", c.ID, got, p)
			}
		}
	}
}

func mergeJSON(dst, src map[string]any) {
	for k, v := range src {
		if dm, ok := dst[k].(map[string]any); ok {
			if sm, ok := v.(map[string]any); ok {
				mergeJSON(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}
