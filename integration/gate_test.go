//go:build linux

package integration

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

func (e *env) tool(stdin string, args ...string) result {
	e.t.Helper()
	return e.sbxIn(strings.NewReader(stdin), append([]string{"tool"}, args...)...)
}

// TestToolResultsGolden runs sbx tool on every path, success and failure,
// and checks the tool_result (with the caller's id) against golden files.
func TestToolResultsGolden(t *testing.T) {
	e := newEnv(t)
	hook := filepath.Join(e.home, "block.sh")
	os.WriteFile(hook, []byte("#!/bin/sh\ncat >/dev/null\necho 'publishing is blocked' >&2\nexit 2\n"), 0o755)
	e.write(".sbx/settings.json", `{"permissions": {"deny": ["Bash(rm -rf *)"], "ask": ["Bash(git push *)"]},
		"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "`+hook+`", "if": "Bash(npm publish *)"}]}]}}`)
	tests := []struct{ name, in string }{
		{"success", `{"type":"tool_use","id":"toolu_ok","name":"Bash","input":{"command":"echo hello; echo err >&2"}}`},
		{"exit-code", `{"type":"tool_use","id":"toolu_exit","name":"Bash","input":{"command":"echo out; exit 3"}}`},
		{"unknown-tool", `{"type":"tool_use","id":"toolu_unknown","name":"Frobnicate","input":{}}`},
		{"bad-json", `{"type":"tool_use","id":"toolu_badjson","name":"Bash","input":`},
		{"schema-missing", `{"type":"tool_use","id":"toolu_schema","name":"Bash","input":{"description":"x"}}`},
		{"schema-type", `{"type":"tool_use","id":"toolu_type","name":"Bash","input":{"command":42}}`},
		{"schema-timeout", `{"type":"tool_use","id":"toolu_timeout_big","name":"Bash","input":{"command":"true","timeout":900000}}`},
		{"deny-rule", `{"type":"tool_use","id":"toolu_deny","name":"Bash","input":{"command":"ls && rm -rf build"}}`},
		{"ask-no-prompt", `{"type":"tool_use","id":"toolu_ask","name":"Bash","input":{"command":"git push origin main"}}`},
		{"hook-block", `{"type":"tool_use","id":"toolu_hook","name":"Bash","input":{"command":"npm publish --tag x"}}`},
		{"timeout", `{"type":"tool_use","id":"toolu_slow","name":"Bash","input":{"command":"sleep 30","timeout":300}}`},
		{"sandboxed-write-denied", `{"type":"tool_use","id":"toolu_write","name":"Bash","input":{"command":"echo x > /etc/sbx-tool-probe"}}`},
		{"signal", `{"type":"tool_use","id":"toolu_signal","name":"Bash","input":{"command":"kill -TERM $$"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.tool(tt.in, "--trust-project", "--non-interactive")
			wantCode := 0
			if tt.name == "bad-json" {
				wantCode = 1 // not a tool_use: nothing was run
			}
			if r.code != wantCode {
				t.Fatalf("exit %d, want %d: %s", r.code, wantCode, r.stderr)
			}
			var res map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
				t.Fatalf("stdout is not one JSON object: %q", r.stdout)
			}
			var in map[string]any
			if json.Unmarshal([]byte(tt.in), &in) == nil && res["tool_use_id"] != in["id"] {
				t.Errorf("tool_use_id %v, want %v", res["tool_use_id"], in["id"])
			}
			got := strings.ReplaceAll(r.stdout, e.ws, "$WS")
			golden := filepath.Join("testdata", "tool", tt.name+".golden")
			if *update {
				os.WriteFile(golden, []byte(got), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("tool_result (-want +got):\n%s", diff)
			}
		})
	}
	assertAbsent(t, "/etc/sbx-tool-probe")

	// The sandbox cannot be built: nothing runs, the result says so.
	r := e.tool(`{"type":"tool_use","id":"toolu_nosandbox","name":"Bash","input":{"command":"touch marker"}}`,
		"--settings", `{"sandbox": {"bwrapPath": "/nonexistent/bwrap"}}`, "--non-interactive")
	if !strings.Contains(r.stdout, `"tool_use_id":"toolu_nosandbox"`) || !strings.Contains(r.stdout, "bubblewrap not found") || !strings.Contains(r.stdout, `"is_error":true`) {
		t.Errorf("sandbox failure result: %s", r.stdout)
	}
	assertAbsent(t, e.path("marker"))
}

func TestServeJSONLines(t *testing.T) {
	e := newEnv(t)
	in := `{"type":"tool_use","id":"a","name":"Bash","input":{"command":"echo one"}}
not json
{"type":"tool_use","id":"c","name":"Bash","input":{"command":"echo three"}}
`
	r := e.sbxIn(strings.NewReader(in), "serve", "--non-interactive")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d result lines, want 3: %q (stderr %s)", len(lines), r.stdout, r.stderr)
	}
	for i, want := range []string{`"tool_use_id":"a","content":"one\n"`, `"is_error":true`, `"tool_use_id":"c","content":"three\n"`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s, want %s", i, lines[i], want)
		}
	}
}

func TestCheckJSON(t *testing.T) {
	e := newEnv(t)
	e.write(".sbx/settings.json", `{"permissions": {"deny": ["Read(./.env)"], "allow": ["Bash(npm test *)"]}}`)
	tests := []struct {
		args                       []string
		decision, rule, sourcePart string
	}{
		{[]string{"--tool", "Bash", "--input", `{"command":"cat .env"}`}, "deny", "Read(./.env)", ".sbx/settings.json"},
		{[]string{"--tool", "Read", "--input", `{"file_path":"` + e.ws + `/src/a.go"}`}, "allow", "", "mode: default"},
		{[]string{"--tool", "Bash", "--input", `{"command":"npm test --ci"}`, "--settings", `{"sandbox": {"enabled": false}}`, "--trust-project"}, "allow", "Bash(npm test *)", ".sbx/settings.json"},
		{[]string{"--tool", "Bash", "--input", `{"command":"make"}`, "--settings", `{"sandbox": {"enabled": false}}`, "--non-interactive"}, "deny", "", "mode: default"},
		{[]string{"--tool", "WebFetch", "--input", `{"url":"https://example.com","prompt":"x"}`, "--mode", "dontAsk"}, "deny", "", "mode: dontAsk"},
	}
	for _, tt := range tests {
		r := e.sbx(append([]string{"check", "--json"}, tt.args...)...)
		var v struct {
			Decision, Reason, Rule, Source string
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("check %v: %q %s", tt.args, r.stdout, r.stderr)
		}
		if v.Decision != tt.decision || v.Rule != tt.rule || !strings.Contains(v.Source, tt.sourcePart) || v.Reason == "" {
			t.Errorf("check %v = %+v, want %s %q from %s", tt.args, v, tt.decision, tt.rule, tt.sourcePart)
		}
	}
}

func TestRunGoesThroughTheGate(t *testing.T) {
	e := newEnv(t)
	e.write(".sbx/settings.json", `{"permissions": {"deny": ["Bash(touch *)"]}}`)
	r := e.sbx("run", "--", "touch", "marker")
	if r.code != 125 || !strings.Contains(r.stderr, "Bash(touch *)") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
	assertAbsent(t, e.path("marker"))
	// A compound hiding the denied command is denied too.
	r = e.sh("true && (echo x | touch marker)")
	if r.code != 125 {
		t.Errorf("compound: exit %d", r.code)
	}
	assertAbsent(t, e.path("marker"))
}

// The Read tool runs on the host, yet what the sandbox hides stays hidden,
// even in bypassPermissions mode.
func TestReadToolHonoursDenyRead(t *testing.T) {
	e := newEnv(t)
	home, err := os.MkdirTemp("/var/tmp", "sbx-it-home-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	e.home = home
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("SECRET-KEY"), 0o600)
	os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), []byte("PUBLIC"), 0o644)
	r := e.tool(`{"type":"tool_use","id":"r1","name":"Read","input":{"file_path":"`+filepath.Join(home, ".ssh", "id_ed25519")+`"}}`, "--mode", "bypassPermissions")
	if strings.Contains(r.stdout, "SECRET-KEY") || !strings.Contains(r.stdout, "hidden by the sandbox policy") {
		t.Errorf("credential file read through the Read tool: %s", r.stdout)
	}
	r = e.tool(`{"type":"tool_use","id":"r2","name":"Read","input":{"file_path":"`+filepath.Join(home, ".ssh", "known_hosts")+`"}}`, "--mode", "bypassPermissions")
	if !strings.Contains(r.stdout, "PUBLIC") {
		t.Errorf("re-opened file not readable: %s", r.stdout)
	}
}

// A Read or Edit rule means the same at the gate and in the sandbox: the
// gate denies `cat sub/.env` for Read(./.env), so a program that opens
// sub/.env itself must not read it either; an Edit deny with a wildcard
// covers files created during the run, not only those that existed.
func TestSandboxEnforcesWhatTheGateDenies(t *testing.T) {
	e := newEnv(t)
	e.write(".sbx/settings.json", `{"permissions": {"deny": ["Read(./.env)", "Edit(conf/*.yaml)"]}}`)
	e.write("sub/.env", "TOKEN=SECRET-IN-SUB")
	e.write("conf/old.yaml", "old")
	r := e.sbx("check", "--json", "--tool", "Bash", "--input", `{"command":"cat sub/.env"}`)
	if !strings.Contains(r.stdout, `"deny"`) {
		t.Fatalf("gate: %s %s", r.stdout, r.stderr)
	}
	// awk opens the file itself: the gate does not see it.
	r = e.sbx("run", "--", "awk", `BEGIN { while ((getline l < "sub/.env") > 0) print l; print "ran" }`)
	if strings.Contains(r.stdout, "SECRET-IN-SUB") || !strings.Contains(r.stdout, "ran") {
		t.Errorf("read sub/.env in the sandbox, or did not run: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = e.sbx("run", "--", "awk", `BEGIN { print "ok" > "conf/notes.txt"; print "new" > "conf/new.yaml"; print "changed" > "conf/old.yaml" }`)
	assertAbsent(t, e.path("conf/new.yaml"))
	if b, _ := os.ReadFile(e.path("conf/old.yaml")); string(b) != "old" {
		t.Errorf("conf/old.yaml = %q on the host, want it unchanged", b)
	}
	if b, _ := os.ReadFile(e.path("conf/notes.txt")); string(b) != "ok\n" {
		t.Errorf("conf/notes.txt = %q, want the allowed write applied (stderr %q)", b, r.stderr)
	}
	if !strings.Contains(r.stderr, "conf/new.yaml") {
		t.Errorf("the refused file is not named: %q", r.stderr)
	}
}

// Bad input never runs anything: each gets an error result, sbx tool exits
// non-zero, and the marker the command would create is absent.
func TestBadToolInputRunsNothing(t *testing.T) {
	e := newEnv(t)
	for _, in := range []string{
		`{"type":"tool_use","name":"Bash","input":{"command":"touch marker"}}`,
		`{"type":"tool_use","id":"","name":"Bash","input":{"command":"touch marker"}}`,
		`{"type":"tool_use","id":"x","name":"","input":{"command":"touch marker"}}`,
		`{"type":"message","id":"x","name":"Bash","input":{"command":"touch marker"}}`,
		`{"type":"tool_use","id":"x","name":"Bash","input":{"command":"true"},"input":{"command":"touch marker"}}`,
		`{"type":"tool_use","id":"x","name":"Bash","input":{"command":"touch marker"}`,
		``,
	} {
		r := e.tool(in)
		if r.code == 0 || !strings.Contains(r.stdout, `"is_error":true`) {
			t.Errorf("%q: exit %d, %s", in, r.code, r.stdout)
		}
		assertAbsent(t, e.path("marker"))
	}
}

// sbx check answers by exit status: 0 allow, 1 deny, 3 ask (ask stays ask
// without a terminal), 2 for a usage error.
func TestCheckExitStatus(t *testing.T) {
	e := newEnv(t)
	e.write(".sbx/settings.json", `{"permissions": {"deny": ["Bash(rm *)"], "ask": ["Bash(make *)"]}}`)
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"--tool", "Bash", "--input", `{"command":"ls"}`}, 0},
		{[]string{"--tool", "Bash", "--input", `{"command":"rm -rf x"}`}, 1},
		{[]string{"--tool", "Bash", "--input", `{"command":"make all"}`}, 3},
		{[]string{"--tool", "Bash", "--input", `{"command":"make all"}`, "--non-interactive"}, 1},
		{[]string{"--tool", "Bash"}, 2},
	} {
		if r := e.sbx(append([]string{"check"}, tt.args...)...); r.code != tt.code {
			t.Errorf("check %v: exit %d, want %d (%s)", tt.args, r.code, tt.code, r.stderr)
		}
	}
}

// A long output keeps its head and its tail, the middle cut, as Claude
// Code's Bash tool does: a summary or a final error is at the end.
func TestToolOutputKeepsTheTail(t *testing.T) {
	e := newEnv(t)
	r := e.tool(`{"type":"tool_use","id":"seq","name":"Bash","input":{"command":"seq 1 100000"}}`)
	var res struct{ Content string }
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%q: %v", r.stdout, err)
	}
	if !strings.HasPrefix(res.Content, "1\n2\n") || !strings.HasSuffix(strings.TrimSpace(res.Content), "99999\n100000") || !strings.Contains(res.Content, "cut") {
		t.Errorf("content: %q … %q", res.Content[:40], res.Content[len(res.Content)-40:])
	}
}

// A timeout of a few milliseconds can stop the transaction helper before
// the command starts: the result says the command timed out, never that
// the sandbox is unavailable (it is not; nothing ran). Under a millisecond
// is a millisecond, not no timeout.
func TestTinyTimeoutIsATimeout(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 10; i++ {
		for _, ms := range []string{"1", "2", "3", "0.5"} {
			r := e.tool(`{"type":"tool_use","id":"t","name":"Bash","input":{"command":"sleep 3","timeout":`+ms+`}}`, "--non-interactive")
			want := "Command timed out after " + strings.Replace(ms, "0.5", "1", 1) + "ms" // whole ms, rounded up
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("timeout %s ms: %s %s", ms, r.stdout, r.stderr)
			}
		}
	}
}
