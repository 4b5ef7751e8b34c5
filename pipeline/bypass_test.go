package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// bypassCase is one line of testdata/bypass.jsonl: a command that must be
// decided as bash will run it, with the settings, mode and sandbox it is
// decided under.
type bypassCase struct {
	Class   string   `json:"class"`
	Cmd     string   `json:"cmd"`
	Tool    string   `json:"tool"`
	URL     string   `json:"url"`
	Allow   []string `json:"allow"`
	Deny    []string `json:"deny"`
	Mode    string   `json:"mode"`
	Sandbox bool     `json:"sandbox"`
	Files   []string `json:"files"`
	Want    string   `json:"want"`
}

// TestBypassCorpus runs the regression corpus of gate bypasses: every
// command there was once decided on something other than what bash runs.
func TestBypassCorpus(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "bypass.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var c bypassCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		n++
		if c.Cmd == "LONG_RM" {
			c.Cmd = "rm -rf ~ " + strings.Repeat("#", MaxCommandLen+1)
		}
		v := decideCase(t, &c)
		if string(v.Decision) != c.Want {
			t.Errorf("[%s] %q (mode %s, sandbox %v, allow %q, deny %q): %s, want %s\n  reason: %s\n  trail: %q",
				c.Class, trunc(c.Cmd+c.URL), c.Mode, c.Sandbox, c.Allow, c.Deny, v.Decision, c.Want, v.Reason, v.Trail)
		}
	}
	t.Logf("%d cases", n)
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func decideCase(t *testing.T, c *bypassCase) *Verdict {
	t.Helper()
	root := t.TempDir()
	home, proj := filepath.Join(root, "home"), filepath.Join(root, "proj")
	os.MkdirAll(home, 0o755)
	os.MkdirAll(proj, 0o755)
	for _, f := range c.Files {
		os.WriteFile(filepath.Join(proj, f), []byte("x"), 0o644)
	}
	cfg := map[string]any{"permissions": map[string]any{"allow": nonNil(c.Allow), "deny": nonNil(c.Deny)},
		"sandbox": map[string]any{"enabled": c.Sandbox}}
	raw, _ := json.Marshal(cfg)
	st, err := settings.Load(settings.Options{ProjectDir: proj, Home: home, Files: []string{string(raw)},
		ManagedDir: filepath.Join(root, "none"), ConfigHome: filepath.Join(home, ".config")})
	if err != nil {
		t.Fatalf("settings: %v", err)
	}
	g, err := NewGate(GateOptions{Settings: st, Cwd: proj, Home: home, Mode: c.Mode, Interactive: true, SandboxAvailable: c.Sandbox})
	if err != nil {
		t.Fatal(err)
	}
	tool, input := "Bash", map[string]any{"command": c.Cmd}
	if c.Tool == "WebFetch" {
		tool, input = "WebFetch", map[string]any{"url": c.URL, "prompt": "x"}
	}
	in, _ := json.Marshal(input)
	v, err := g.Decide(context.Background(), &Call{ID: "t", Tool: tool, Input: in})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
