//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// claudeCodeVersion is the Claude Code CLI the end-to-end test runs.
const claudeCodeVersion = "2.1.197"

// claudeCLI installs Claude Code from npm into a cache folder kept across
// runs and returns its binary; without npm the test skips (fails in CI).
func claudeCLI(t *testing.T) string {
	return npmTool(t, "@anthropic-ai/claude-code", claudeCodeVersion, "claude")
}

// npmTool installs an npm package at a version into a cache folder kept
// across runs (~/.cache/sbx-test) and returns the path of its binary bin.
func npmTool(t *testing.T, pkg, version, bin string) string {
	t.Helper()
	requireTool(t, "npm")
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	dir := filepath.Join(base, "sbx-test", strings.NewReplacer("@", "", "/", "-").Replace(pkg)+"-"+version)
	path := filepath.Join(dir, "node_modules", ".bin", bin)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	os.MkdirAll(dir, 0o755)
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error", pkg+"@"+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s@%s: %v\n%s", pkg, version, err, out)
	}
	return path
}

// mockModel is a local Messages API that makes one Bash call per turn
// from a script, then ends the turn, and keeps the tool_results it got.
type mockModel struct {
	script  []string
	mu      sync.Mutex
	results map[string]toolResult
}

type toolResult struct {
	Content string
	IsError bool
}

func (m *mockModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		w.WriteHeader(http.StatusOK)
		return
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	turn, bash := 0, false
	for _, msg := range req.Messages {
		if msg.Role == "assistant" {
			turn++
		}
		m.keep(msg.Content)
	}
	for _, tl := range req.Tools {
		bash = bash || tl.Name == "Bash"
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": fmt.Sprintf("msg_%d", turn), "type": "message",
		"role": "assistant", "model": req.Model, "content": []any{}, "stop_reason": nil, "usage": map[string]int{"input_tokens": 1, "output_tokens": 1}}})
	stop := "end_turn"
	if bash && turn < len(m.script) {
		stop = "tool_use"
		input, _ := json.Marshal(map[string]string{"command": m.script[turn], "description": fmt.Sprintf("step %d", turn)})
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%02d", turn), "name": "Bash", "input": map[string]any{}}})
		for i := 0; i < len(input); i += 9 {
			ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]string{"type": "input_json_delta", "partial_json": string(input[i:min(i+9, len(input))])}})
		}
	} else {
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": "done"}})
	}
	ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop}, "usage": map[string]int{"output_tokens": 1}})
	ev("message_stop", map[string]string{"type": "message_stop"})
}

// keep records the tool_results in a message's content.
func (m *mockModel) keep(content json.RawMessage) {
	var blocks []struct {
		Type      string          `json:"type"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		var text string
		if json.Unmarshal(b.Content, &text) != nil {
			var parts []struct{ Text string }
			json.Unmarshal(b.Content, &parts)
			for _, p := range parts {
				text += p.Text
			}
		}
		m.results[b.ToolUseID] = toolResult{text, b.IsError}
	}
}

func (m *mockModel) result(turn int) toolResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.results[fmt.Sprintf("toolu_%02d", turn)]
}

// Claude Code itself, offline against a local model, with the setting
// `sbx claude setup` prints: every Bash call runs in sbx; Claude Code's
// own rules and hooks keep working on the original command; cd persists
// while the workspace stays the project; the order of stdout and stderr is
// kept; nothing is left running.
func TestClaudeCodeRunsBashInSbx(t *testing.T) {
	e := newEnv(t)
	claude := claudeCLI(t)
	const key = "sk-ant-e2e-not-a-real-key-4f1d"
	m := &mockModel{results: map[string]toolResult{}, script: []string{
		"echo out1; echo err1 >&2; echo out2; echo inside=$SBX_SANDBOX",
		"cd sub && touch in-sub",
		"pwd; touch ../from-sub",
		"touch /etc/sbx-e2e-outside; echo x > $HOME/outside-home; env | grep -c " + key[:12] + "; true",
		"touch denied-by-rule",
	}}
	srv := httptest.NewServer(m)
	defer srv.Close()
	e.mkdir("sub")
	e.write(".claude/settings.json", `{"permissions": {"allow": ["Bash"], "deny": ["Bash(touch denied-by-rule)"]},
  "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo ran >> \"$CLAUDE_PROJECT_DIR/.hook-log\""}]}]}}`)
	// The project's setting, as sbx claude setup --write makes it.
	if setup := e.sbx("claude", "setup", "--write"); setup.code != 0 {
		t.Fatalf("sbx claude setup --write: %q %q", setup.stdout, setup.stderr)
	}
	var local struct{ Env map[string]string }
	b, _ := os.ReadFile(e.path(".claude/settings.local.json"))
	prefix := ""
	if json.Unmarshal(b, &local) == nil {
		prefix = local.Env["CLAUDE_CODE_SHELL_PREFIX"]
	}
	if prefix != sbxBin+" --claude-shell="+e.ws {
		t.Fatalf("the setting written: %q", b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "-p", "go", "--output-format", "json", "--allowedTools", "Bash")
	cmd.Dir = e.ws
	cmd.Env = append(e.environ(), "ANTHROPIC_BASE_URL="+srv.URL, "ANTHROPIC_API_KEY="+key,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_AUTOUPDATER=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude: %v\n%s", err, out)
	}
	checkResult := func(turn int, wantErr bool, want ...string) {
		t.Helper()
		r := m.result(turn)
		for _, w := range want {
			if !strings.Contains(r.Content, w) || r.IsError != wantErr {
				t.Errorf("call %d (%q): result %q (is_error %v), want %q (is_error %v)", turn, m.script[turn], r.Content, r.IsError, w, wantErr)
			}
		}
		if strings.Contains(r.Content, key) {
			t.Errorf("call %d: the API key reached the model: %q", turn, r.Content)
		}
	}
	// Only the output: sbx says nothing of its own about untrusted
	// project rules and hooks, which are Claude Code's to use.
	if r := m.result(0); r.Content != "out1\nerr1\nout2\ninside=1" {
		t.Errorf("call 0: %q, want the output in order and nothing else", r.Content)
	}
	checkResult(2, false, filepath.Join(e.ws, "sub"))
	checkResult(3, false, "touch: cannot touch '/etc/sbx-e2e-outside': Read-only file system", "outside-home: Read-only file system\n0")
	checkResult(4, true, "denied")
	for _, p := range []string{e.path("sub/in-sub"), e.path("from-sub")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("a write in the workspace did not land: %v", err)
		}
	}
	for _, p := range []string{"/etc/sbx-e2e-outside", filepath.Join(e.home, "outside-home"), e.path("denied-by-rule"), e.path("sub/from-sub")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists on the host", p)
		}
	}
	if log, _ := os.ReadFile(e.path(".hook-log")); strings.Count(string(log), "ran") < 4 {
		t.Errorf("Claude Code's hook ran %d times, want one per call (its writes must land)", strings.Count(string(log), "ran"))
	}
	ents, _ := os.ReadDir(e.ws)
	var names []string
	for _, ent := range ents {
		names = append(names, ent.Name())
	}
	if got := strings.Join(names, " "); got != ".claude .hook-log from-sub sub" {
		t.Errorf("the workspace holds %q; want only what the calls made", got)
	}
	if left := SbxPids(sbxBin); len(left) > 0 {
		t.Errorf("sbx processes left running: %v", left)
	}
}

// Inside a sandbox sbx does not nest: `sbx run` says so, `sbx
// --claude-shell` runs the command directly. On the host the marker alone
// buys nothing: the command is sandboxed all the same.
func TestInsideMarker(t *testing.T) {
	e := newEnv(t)
	r := e.sbx("run", "--", sbxBin, "run", "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "sandboxes do not nest") {
		t.Errorf("sbx run inside sbx: %d %q", r.code, r.stderr)
	}
	call := "eval 'echo inside=$SBX_SANDBOX' < /dev/null && pwd -P >| /tmp/claude-1-cwd"
	if r := e.sbx("run", "--", sbxBin, "--claude-shell", call); r.stdout != "inside=1\n" {
		t.Errorf("claude-shell inside sbx: %q %q", r.stdout, r.stderr)
	}
	outside := filepath.Join(e.home, "marker-escape")
	cmd := exec.Command(sbxBin, "--claude-shell", "eval 'touch "+outside+"' < /dev/null && pwd -P >| "+filepath.Join(e.home, "claude-2-cwd"))
	cmd.Dir, cmd.Env = e.ws, append(e.environ(), "SBX_SANDBOX=1")
	out, _ := cmd.CombinedOutput()
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("SBX_SANDBOX=1 on the host ran the command unsandboxed: %s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(e.home, "claude-2-cwd")); len(b) != 0 {
		t.Errorf("a failed call reported a working directory: %q", b)
	}
}

// The workspace is the Claude Code process's directory, found above the
// call even after an update replaced Claude Code's binary; with no Claude
// Code above it, the call is refused rather than taking its own directory
// (which the model moves with cd) for the workspace.
func TestClaudeShellFindsTheProject(t *testing.T) {
	e := newEnv(t)
	e.mkdir("sub")
	fake := filepath.Join(e.home, "claude")
	bash, err := os.ReadFile("/bin/bash")
	if err != nil || os.WriteFile(fake, bash, 0o755) != nil {
		t.Fatal("cannot copy bash", err)
	}
	call := func(claudeExe, script, remove string) (string, int) {
		str := "eval '" + script + "' < /dev/null && pwd -P >| " + filepath.Join(e.home, "claude-1-cwd")
		// A stand-in for Claude Code: its own directory is the project,
		// the call runs in sub (env changes directory, then runs sbx).
		cmd := exec.Command(fake, "-c", remove+`/usr/bin/env --chdir=sub "$0" --claude-shell "$1"; exit $?`, sbxBin, str)
		cmd.Dir, cmd.Env = e.ws, append(e.environ(), "CLAUDE_CODE_EXECPATH="+claudeExe)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return string(out), code
	}
	if out, code := call(fake, "touch ../from-sub-1", ""); code != 0 {
		t.Errorf("from sub, with Claude Code above: %d %s", code, out)
	}
	if out, code := call(fake, "touch ../from-sub-2", "rm -f "+fake+"; "); code != 0 {
		t.Errorf("after Claude Code's binary was replaced: %d %s", code, out)
	}
	for _, f := range []string{"from-sub-1", "from-sub-2"} {
		if _, err := os.Stat(e.path(f)); err != nil {
			t.Errorf("the project was not the workspace: %v", err)
		}
	}
	os.WriteFile(fake, bash, 0o755)
	out, code := call("/nonexistent/claude", "touch made", "")
	if code != 125 || !strings.Contains(out, "cannot tell which project") {
		t.Errorf("no Claude Code above: %d %s", code, out)
	}
	if _, err := os.Stat(e.path("sub/made")); err == nil {
		t.Error("the call's own directory was taken for the workspace")
	}
}

// The folder through which a Claude Code call reports its final directory
// is a writable root of the call: what the command writes there is counted
// by the disk budget and merged, not written to the host's disk directly.
// Before, 20 MB went to the host past a 5 MB budget.
func TestClaudeReportFolderInTheBudget(t *testing.T) {
	e := newEnv(t)
	os.MkdirAll(filepath.Join(e.home, ".claude"), 0o755)
	os.WriteFile(filepath.Join(e.home, ".claude", "settings.json"), []byte(`{"sandbox": {"limits": {"maxDisk": "5M"}}}`), 0o644)
	str := `eval 'd=$(ls -d /tmp/sbx-claude-*); head -c 20000000 /dev/zero > $d/big; echo "dd=$?"; ls -l $d/big | cut -d" " -f5; rm $d/big' < /dev/null && pwd -P >| ` + filepath.Join(e.home, "claude-1-cwd")
	cmd := exec.Command(sbxBin, "--claude-shell="+e.ws, str)
	cmd.Dir, cmd.Env = e.ws, append(e.environ(), "CLAUDE_CODE_EXECPATH=/usr/bin/true")
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "dd=0") || strings.Contains(string(out), "20000000") {
		t.Errorf("20 MB written past a 5 MB budget: %s", out)
	}
	if b, err := os.ReadFile(filepath.Join(e.home, "claude-1-cwd")); err != nil || strings.TrimSpace(string(b)) == "" {
		t.Errorf("the working directory was not reported: %q %v", b, err)
	}
}
