package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// gateWith builds a gate from one user settings file (JSON) in a temp
// project.
func gateWith(t *testing.T, settingsJSON, mode string, interactive bool) *Gate {
	t.Helper()
	root := t.TempDir()
	home, proj := filepath.Join(root, "home"), filepath.Join(root, "proj")
	os.MkdirAll(filepath.Join(home, ".config", "sbx"), 0o755)
	os.MkdirAll(proj, 0o755)
	os.WriteFile(filepath.Join(home, ".config", "sbx", "settings.json"), []byte(settingsJSON), 0o644)
	st, err := settings.Load(settings.Options{ProjectDir: proj, Home: home, ManagedDir: filepath.Join(root, "m"), ClaudeManagedDir: filepath.Join(root, "cm")})
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGate(GateOptions{Settings: st, Cwd: proj, Home: home, Mode: mode, Interactive: interactive, SandboxAvailable: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// script writes an executable hook script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hook.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func hooksJSON(event string, extra string, scripts ...string) string {
	var hs []string
	for _, s := range scripts {
		hs = append(hs, fmt.Sprintf(`{"type": "command", "command": %q%s}`, s, extra))
	}
	return fmt.Sprintf(`{"sandbox": {"enabled": false}, "hooks": {%q: [{"matcher": "Bash", "hooks": [%s]}]}}`, event, strings.Join(hs, ","))
}

func decide(t *testing.T, g *Gate, cmd string) *Verdict {
	t.Helper()
	in, _ := json.Marshal(map[string]string{"command": cmd})
	v, err := g.Decide(context.Background(), &Call{ID: "toolu_1", Tool: "Bash", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestHookContract(t *testing.T) {
	allowJSON := `{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "permissionDecisionReason": "ok by hook"}}`
	tests := []struct {
		name, body, mode, want, reason string
	}{
		{"exit 0 no output: no decision", "cat >/dev/null; exit 0", "default", "ask", ""},
		{"exit 0 allow JSON", "cat >/dev/null; echo '" + allowJSON + "'", "default", "allow", "ok by hook"},
		{"exit 2 blocks with stderr", "cat >/dev/null; echo nope >&2; exit 2", "bypassPermissions", "deny", "nope"},
		{"exit 2 beats a JSON allow", "cat >/dev/null; echo '" + allowJSON + "'; echo stop >&2; exit 2", "default", "deny", "stop"},
		{"exit 1 plain: non-blocking", "cat >/dev/null; echo oops; exit 1", "bypassPermissions", "allow", ""},
		{"exit 1 with JSON: JSON decides", "cat >/dev/null; echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"deny\", \"permissionDecisionReason\": \"json\"}}'; exit 1", "bypassPermissions", "deny", "json"},
		{"legacy block", "cat >/dev/null; echo '{\"decision\": \"block\", \"reason\": \"legacy\"}'", "bypassPermissions", "deny", "legacy"},
		{"continue false stops", "cat >/dev/null; echo '{\"continue\": false, \"stopReason\": \"halt\"}'", "bypassPermissions", "deny", "halt"},
		{"cannot start: fails open", "exec /nonexistent/binary", "bypassPermissions", "allow", ""},
		{"hook allow does not beat dontAsk ask rule", "cat >/dev/null; echo '" + allowJSON + "'", "dontAsk", "allow", "ok by hook"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gateWith(t, hooksJSON("PreToolUse", "", script(t, tt.body)), tt.mode, true)
			v := decide(t, g, "make build")
			if string(v.Decision) != tt.want || !strings.Contains(v.Reason, tt.reason) {
				t.Errorf("%s: %s (%s), want %s with %q; trail %q", tt.name, v.Decision, v.Reason, tt.want, tt.reason, v.Trail)
			}
		})
	}
}

func TestHookInputJSON(t *testing.T) {
	out := filepath.Join(t.TempDir(), "input.json")
	g := gateWith(t, hooksJSON("PreToolUse", "", script(t, "cat > "+out+"; echo $CLAUDE_PROJECT_DIR >> "+out)), "default", true)
	decide(t, g, "make")
	data, _ := os.ReadFile(out)
	for _, want := range []string{`"hook_event_name":"PreToolUse"`, `"tool_name":"Bash"`, `"tool_input":{"command":"make"}`,
		`"tool_use_id":"toolu_1"`, `"permission_mode":"default"`, `"cwd":"` + g.Cwd + `"`, g.Cwd + "\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("hook input lacks %s:\n%s", want, data)
		}
	}
}

func TestHookTimeoutFailsOpenUnlessFailClosed(t *testing.T) {
	slow := script(t, "sleep 5")
	for _, fc := range []bool{false, true} {
		s := hooksJSON("PreToolUse", `, "timeout": 0.3`, slow)
		if fc {
			s = strings.Replace(s, `"sandbox": {"enabled": false}`, `"sandbox": {"enabled": false}, "sbx": {"hooks": {"failClosed": true}}`, 1)
		}
		g := gateWith(t, s, "bypassPermissions", true)
		start := time.Now()
		v := decide(t, g, "make")
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("timeout not enforced: %s", d)
		}
		want := DecisionAllow
		if fc {
			want = DecisionDeny
		}
		if v.Decision != want {
			t.Errorf("failClosed=%v: %s (%s)", fc, v.Decision, v.Reason)
		}
		if len(v.Warnings) == 0 {
			t.Errorf("no warning about the timed-out hook")
		}
	}
}

func TestHooksRunInParallelAndOnce(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "count")
	h := script(t, "cat >/dev/null; echo x >> "+counter+"; sleep 1")
	h2 := script(t, "cat >/dev/null; sleep 1")
	// h appears twice: it runs once.
	g := gateWith(t, hooksJSON("PreToolUse", "", h, h, h2), "bypassPermissions", true)
	start := time.Now()
	decide(t, g, "make")
	if d := time.Since(start); d > 1900*time.Millisecond {
		t.Errorf("hooks ran one after the other: %s", d)
	}
	data, _ := os.ReadFile(counter)
	if n := strings.Count(string(data), "x"); n != 1 {
		t.Errorf("identical handler ran %d times", n)
	}
}

func TestUpdatedInputRecheckedAgainstDeny(t *testing.T) {
	rewrite := script(t, `cat >/dev/null; echo '{"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "rm -rf build"}}}'`)
	s := strings.Replace(hooksJSON("PreToolUse", "", rewrite), `"hooks":`, `"permissions": {"deny": ["Bash(rm *)"]}, "hooks":`, 1)
	g := gateWith(t, s, "default", true)
	v := decide(t, g, "ls")
	if v.Decision != DecisionDeny || v.Rule != "Bash(rm *)" {
		t.Errorf("rewritten input not re-checked: %s %s %s", v.Decision, v.Rule, v.Reason)
	}
	// A rewrite that breaks the schema is refused.
	bad := script(t, `cat >/dev/null; echo '{"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": 5}}}'`)
	v = decide(t, gateWith(t, hooksJSON("PreToolUse", "", bad), "default", true), "ls")
	if v.Decision != DecisionDeny || !strings.Contains(v.Reason, "updatedInput is invalid") {
		t.Errorf("invalid updatedInput: %s %s", v.Decision, v.Reason)
	}
}

func TestPermissionRequestHook(t *testing.T) {
	deny := script(t, `cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "not today"}}}'`)
	v := decide(t, gateWith(t, hooksJSON("PermissionRequest", "", deny), "default", true), "make")
	if v.Decision != DecisionDeny || v.Reason != "not today" {
		t.Errorf("%s %s", v.Decision, v.Reason)
	}
	// Exit 2 is not honoured for PermissionRequest.
	two := script(t, "cat >/dev/null; exit 2")
	v = decide(t, gateWith(t, hooksJSON("PermissionRequest", "", two), "default", true), "make")
	if v.Decision != DecisionAsk {
		t.Errorf("exit 2 honoured: %s", v.Decision)
	}
}

func TestMatcher(t *testing.T) {
	tests := []struct {
		m, tool string
		want    bool
	}{
		{"", "Bash", true}, {"*", "X", true}, {"Bash", "Bash", true}, {"Bash", "BashOutput", false},
		{"Edit|Write", "Write", true}, {"Edit, Write", "Edit", true}, {"Edit.*", "NotebookEdit", true},
		{"mcp__.*__get", "mcp__gh__get", true}, {"^Read$", "Read", true}, {"(", "(", false},
	}
	for _, tt := range tests {
		if got := MatchHookMatcher(tt.m, tt.tool); got != tt.want {
			t.Errorf("matcher %q vs %s = %v", tt.m, tt.tool, got)
		}
	}
}

// BenchmarkDecide: 50 rules across levels and a 10-part compound command,
// no hooks.
func BenchmarkDecide(b *testing.B) {
	var rules []string
	for i := 0; i < 16; i++ {
		rules = append(rules, fmt.Sprintf(`"Bash(tool%d *)"`, i), fmt.Sprintf(`"Read(./secret%d/**)"`, i), fmt.Sprintf(`"WebFetch(domain:h%d.example.com)"`, i))
	}
	s := fmt.Sprintf(`{"sandbox": {"enabled": false}, "permissions": {"allow": [%s, "Bash(npm *)"], "deny": ["Bash(rm -rf *)"]}}`, strings.Join(rules, ","))
	t := &testing.T{}
	g := gateWith(t, s, "default", false)
	cmd := "npm test && npm run a || npm run b; npm run c | npm run d && npm run e && npm run f; npm run g && npm run h && npm run i"
	in, _ := json.Marshal(map[string]string{"command": cmd})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := g.Decide(ctx, &Call{ID: "x", Tool: "Bash", Input: in})
		if err != nil || v.Decision != DecisionAllow {
			b.Fatalf("%v %v %s", err, v.Decision, v.Reason)
		}
	}
}
