//go:build linux

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpText is a tool result's text content.
func mcpText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// sbx mcp with the official Go SDK's client: the tools are listed, a
// command runs in the sandbox (its workspace write lands, a write outside
// is refused and absent), the gate's deny rules hold, Read goes through
// the gate, and closing the client leaves nothing running.
func TestMCPServerWithGoClient(t *testing.T) {
	e := newEnv(t)
	e.write("../home/.config/sbx/settings.json", `{"permissions": {"deny": ["Bash(touch denied-by-rule)", "Read(//etc/shadow)"], "ask": ["Bash(touch asked)"]}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := e.connectMCP(ctx, nil)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, " ") != "bash read_file" {
		t.Errorf("tools: %v", names)
	}
	bash := func(command string) (*mcp.CallToolResult, map[string]any) {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
		if err != nil {
			t.Fatalf("%s: %v", command, err)
		}
		out, _ := r.StructuredContent.(map[string]any)
		return r, out
	}
	r, out := bash("echo hi; echo err >&2; touch made")
	if r.IsError || out["exitCode"] != float64(0) || out["stdout"] != "hi\n" || out["stderr"] != "err\n" || out["sandboxed"] != true {
		t.Errorf("a plain command: %q %v", mcpText(r), out)
	}
	if _, err := os.Stat(e.path("made")); err != nil {
		t.Errorf("the workspace write did not land: %v", err)
	}
	outside := filepath.Join(e.home, "mcp-outside")
	r, out = bash("touch " + outside)
	if out["exitCode"] == float64(0) || !strings.Contains(mcpText(r), "Read-only file system") {
		t.Errorf("a write outside: %q %v", mcpText(r), out)
	}
	r, _ = bash("touch denied-by-rule")
	if !r.IsError || !strings.Contains(mcpText(r), "denied") {
		t.Errorf("a denied command: %q", mcpText(r))
	}
	// This client cannot be asked (no elicitation): an ask is denied.
	if r, _ = bash("touch asked"); !r.IsError || !strings.Contains(mcpText(r), "cannot prompt") {
		t.Errorf("an ask without elicitation: %q", mcpText(r))
	}
	for _, p := range []string{outside, e.path("denied-by-rule"), e.path("asked")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists on the host", p)
		}
	}
	rr, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"file_path": "/etc/shadow"}})
	if err != nil || !rr.IsError || strings.Contains(mcpText(rr), "root:") {
		t.Errorf("read_file of a denied path: %v %q", err, mcpText(rr))
	}
	// A link in the workspace is read only if its target may be: one to a
	// file outside the working directories, or to a device, is refused.
	os.WriteFile(filepath.Join(e.home, "host-secret"), []byte("HOST-SECRET"), 0o600)
	os.Symlink(filepath.Join(e.home, "host-secret"), e.path("to-secret"))
	os.Symlink("/dev/zero", e.path("to-zero"))
	for _, link := range []string{"to-secret", "to-zero"} {
		rr, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"file_path": e.path(link)}})
		if err != nil || !rr.IsError || strings.Contains(mcpText(rr), "HOST-SECRET") {
			t.Errorf("read_file of a link %s: %v %q", link, err, mcpText(rr))
		}
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if left := SbxPids(sbxBin); len(left) > 0 {
		t.Errorf("sbx processes left running: %v", left)
	}
}

// sbx mcp with an external client: the MCP inspector's command-line mode.
func TestMCPServerWithInspector(t *testing.T) {
	e := newEnv(t)
	inspector := npmTool(t, "@modelcontextprotocol/inspector", "0.15.0", "mcp-inspector")
	outside := filepath.Join(e.home, "inspector-outside")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, inspector, "--cli", sbxBin, "mcp", "--method", "tools/call", "--tool-name", "bash",
		"--tool-arg", "command=echo from-inspector; touch made-by-inspector "+outside)
	cmd.Dir, cmd.Env = e.ws, e.environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("inspector: %v\n%s", err, out)
	}
	var res struct {
		StructuredContent struct {
			ExitCode  int    `json:"exitCode"`
			Stdout    string `json:"stdout"`
			Sandboxed bool   `json:"sandboxed"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.StructuredContent.Stdout != "from-inspector\n" ||
		res.StructuredContent.ExitCode != 1 || !res.StructuredContent.Sandboxed {
		t.Errorf("inspector's result: %v\n%s", err, out)
	}
	if _, err := os.Stat(e.path("made-by-inspector")); err != nil {
		t.Errorf("the workspace write did not land: %v", err)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("%s exists on the host", outside)
	}
}

// An ask rule asks the MCP client's user (elicitation): the call runs only
// when the user accepts with allow set; "for this session" is remembered;
// a decline denies.
func TestMCPAsksThroughElicitation(t *testing.T) {
	e := newEnv(t)
	e.write("../home/.config/sbx/settings.json", `{"permissions": {"ask": ["Bash(touch asked-*)"]}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var asked []string
	opts := &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			msg := req.Params.Message
			asked = append(asked, msg)
			switch {
			case strings.Contains(msg, "asked-yes"):
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}, nil
			case strings.Contains(msg, "asked-session"):
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": true, "forSession": true}}, nil
			case strings.Contains(msg, "asked-false"):
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": false}}, nil
			}
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	}
	cs := e.connectMCP(ctx, opts)
	defer cs.Close()
	for _, c := range []string{"touch asked-yes", "touch asked-no", "touch asked-false", "touch asked-session", "touch asked-session"} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": c}}); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	for name, want := range map[string]bool{"asked-yes": true, "asked-no": false, "asked-false": false, "asked-session": true} {
		if _, err := os.Stat(e.path(name)); (err == nil) != want {
			t.Errorf("%s on the host: %v, want %v", name, err == nil, want)
		}
	}
	if len(asked) != 4 || !strings.Contains(asked[0], `"touch asked-yes"`) {
		t.Errorf("asked %d times (want 4: the session approval holds): %q", len(asked), asked)
	}
}

// An accepted answer is good once, for the call it was asked about: the
// same retry sent again, or its state with another command, asks again
// and runs nothing.
func TestMCPApprovalIsSingleUse(t *testing.T) {
	e := newEnv(t)
	e.write("../home/.config/sbx/settings.json", `{"permissions": {"ask": ["Bash(touch asked-*)"]}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	cs := e.connectMCP(ctx, opts)
	defer cs.Close()
	bash := func(command, state string) *mcp.CallToolResult {
		t.Helper()
		p := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}}
		if state != "" {
			p.RequestState = state
			p.InputResponses = mcp.InputResponseMap{"sbx-approval": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}}
		}
		r, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", command, err)
		}
		return r
	}
	first := bash("touch asked-one", "")
	if !first.NeedsInput() || first.RequestState == "" {
		t.Fatalf("no question asked: %+v", first)
	}
	if r := bash("touch asked-one", first.RequestState); r.NeedsInput() {
		t.Fatalf("the accepted retry was asked again")
	}
	if _, err := os.Stat(e.path("asked-one")); err != nil {
		t.Fatalf("the accepted call did not run: %v", err)
	}
	os.Remove(e.path("asked-one"))
	if r := bash("touch asked-one", first.RequestState); !r.NeedsInput() {
		t.Error("a replayed answer ran the call again")
	}
	second := bash("touch asked-two", "")
	if r := bash("touch asked-other", second.RequestState); !r.NeedsInput() {
		t.Error("an answer was carried to another command")
	}
	for _, f := range []string{"asked-one", "asked-other"} {
		if _, err := os.Stat(e.path(f)); err == nil {
			t.Errorf("%s exists on the host", f)
		}
	}
}

// connectMCP starts sbx mcp in the workspace and connects the SDK's client
// (with opts) to it.
func (e *env) connectMCP(ctx context.Context, opts *mcp.ClientOptions) *mcp.ClientSession {
	e.t.Helper()
	cmd := exec.Command(sbxBin, "mcp")
	cmd.Dir, cmd.Env = e.ws, e.environ()
	client := mcp.NewClient(&mcp.Implementation{Name: "sbx-test", Version: "v0"}, opts)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return cs
}

// SIGHUP (its terminal gone) ends sbx mcp as SIGTERM does: the warm
// sandbox is thrown away, nothing is left. Before, sbx mcp died of it and
// left the waiting sandbox's run and proxy directories.
func TestMCPStopsOnSIGHUP(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command(sbxBin, "mcp")
	cmd.Dir, cmd.Env = e.ws, e.environ()
	in, _ := cmd.StdinPipe()
	defer in.Close()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewScanner(stdout)
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"true"}}}`,
	} {
		fmt.Fprintln(in, m)
	}
	for out.Scan() && !strings.Contains(out.Text(), `"id":2`) {
	}
	time.Sleep(500 * time.Millisecond) // the next sandbox is launched
	netDirs := e.waitingNetDirs()
	cmd.Process.Signal(syscall.SIGHUP)
	if err := cmd.Wait(); err != nil {
		t.Errorf("sbx mcp after SIGHUP: %v", err)
	}
	e.assertSessionGone(netDirs)
}
