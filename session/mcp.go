package session

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// BashArgs are the arguments of the MCP bash tool: Claude Code's Bash
// tool input.
type BashArgs struct {
	Command     string `json:"command" jsonschema:"the shell command to run with bash in the sandbox"`
	Timeout     int64  `json:"timeout,omitempty" jsonschema:"milliseconds before the command is killed (default 120000, at most 600000)"`
	Description string `json:"description,omitempty" jsonschema:"what the command does, in a few words"`
}

// ReadArgs are the arguments of the MCP read_file tool: Claude Code's
// Read tool input.
type ReadArgs struct {
	FilePath string `json:"file_path" jsonschema:"absolute path of the file to read"`
	Offset   int    `json:"offset,omitempty" jsonschema:"line to start from (1-based)"`
	Limit    int    `json:"limit,omitempty" jsonschema:"number of lines to read"`
}

// BashResult is the MCP bash tool's structured result.
type BashResult struct {
	ExitCode    int    `json:"exitCode" jsonschema:"the command's exit status (-1 when it did not run)"`
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	Interrupted bool   `json:"interrupted" jsonschema:"the command was killed (timeout)"`
	Sandboxed   bool   `json:"sandboxed"`
	// Result is the tool_result text: the output, and what the sandbox
	// refused (writes, hosts) or the gate's denial.
	Result string `json:"result"`
}

// MCPServer is an MCP server whose tools run through this session: bash
// (the sandboxed shell) and read_file (Read, decided by the gate), each
// call through the gate exactly as a tool_use (rules, hooks, mode; an ask
// that no hook answers is denied unless the session can prompt).
func (s *Session) MCPServer(version string) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "sbx", Version: version}, nil)
	var ids atomic.Int64
	states := newApprovalStates()
	// call runs a tool use; when the gate asks and the client can ask its
	// user (elicitation), nothing runs and the second result asks for
	// that input: the client retries the call with the answer.
	call := func(ctx context.Context, req *mcp.CallToolRequest, tool string, in any) (*pipeline.ToolResult, *mcp.CallToolResult) {
		use, _ := json.Marshal(map[string]any{"type": "tool_use", "id": fmt.Sprintf("mcp_%d", ids.Add(1)), "name": tool, "input": in})
		if !canElicit(req.Session) {
			return s.Tool(ctx, use), nil
		}
		a := &approval{}
		if p := req.Params; p != nil && p.RequestState != "" && states.redeem(p.RequestState, tool, in) {
			a.answer(p)
		}
		res := s.Tool(pipeline.WithPrompter(ctx, a.prompt), use)
		if a.ask != nil {
			a.state = states.issue(tool, in)
		}
		if a.ask != nil {
			return nil, &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{approvalKey: a.ask}, RequestState: a.state}
		}
		return res, nil
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "bash", Description: "Run a bash command in sbx's sandbox, in the workspace: " +
		"the root file system is read-only, only the workspace (and allowed paths) are writable, the network goes " +
		"through a proxy that allows only the configured hosts. The result says what the sandbox refused."},
		func(ctx context.Context, req *mcp.CallToolRequest, in BashArgs) (*mcp.CallToolResult, BashResult, error) {
			res, input := call(ctx, req, "Bash", in)
			if input != nil {
				return input, BashResult{}, nil
			}
			out := BashResult{ExitCode: -1, Result: res.Content}
			if o := res.Output; o != nil {
				out.ExitCode, out.Stdout, out.Stderr, out.Interrupted, out.Sandboxed = o.ExitCode, o.Stdout, o.Stderr, o.Interrupted, o.Sandboxed
			}
			return textResult(res), out, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "read_file", Description: "Read a file (permission rules and hooks decide first)."},
		func(ctx context.Context, req *mcp.CallToolRequest, in ReadArgs) (*mcp.CallToolResult, any, error) {
			res, input := call(ctx, req, "Read", in)
			if input != nil {
				return input, nil, nil
			}
			return textResult(res), nil, nil
		})
	return srv
}

// approvalKey names sbx's one input request.
const approvalKey = "sbx-approval"

// approval is one MCP call's answer to an ask: taken from the retry of
// the call (answered), or requested (ask) when the gate asks without one.
type approval struct {
	state                   string
	answered, allow, always bool
	ask                     *mcp.ElicitParams
}

// approvalStates are the request states handed out with open questions:
// each binds the answer to the call it was asked for (an HMAC of the tool
// and its exact input, under a key of this server's) and is good once (a
// nonce, forgotten when redeemed; at most maxOpenApprovals are kept).
type approvalStates struct {
	key  []byte
	mu   sync.Mutex
	open map[string]bool
	fifo []string
}

const maxOpenApprovals = 1024

func newApprovalStates() *approvalStates {
	key := make([]byte, 32)
	rand.Read(key)
	return &approvalStates{key: key, open: map[string]bool{}}
}

func (a *approvalStates) mac(nonce, tool string, in any) string {
	b, _ := json.Marshal(in)
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(nonce + "\x00" + tool + "\x00"))
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil))
}

// issue is a new request state for a question about this call.
func (a *approvalStates) issue(tool string, in any) string {
	var n [16]byte
	rand.Read(n[:])
	nonce := hex.EncodeToString(n[:])
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.fifo) >= maxOpenApprovals {
		delete(a.open, a.fifo[0])
		a.fifo = a.fifo[1:]
	}
	a.open[nonce] = true
	a.fifo = append(a.fifo, nonce)
	return nonce + "." + a.mac(nonce, tool, in)
}

// redeem reports whether state was issued for this very call and is still
// open, and closes it.
func (a *approvalStates) redeem(state, tool string, in any) bool {
	nonce, mac, ok := strings.Cut(state, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(a.mac(nonce, tool, in))) {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.open[nonce] {
		return false
	}
	delete(a.open, nonce)
	return true
}

// answer takes the user's answer from a retried call whose state was
// redeemed.
func (a *approval) answer(p *mcp.CallToolParamsRaw) {
	res, ok := p.InputResponses[approvalKey].(*mcp.ElicitResult)
	if !ok {
		return
	}
	a.answered = true
	if res.Action == "accept" {
		a.allow, _ = res.Content["allow"].(bool)
		a.always, _ = res.Content["forSession"].(bool)
	}
}

// prompt answers the gate's ask with the user's answer, or records the
// question (and denies this round: nothing runs before the answer).
func (a *approval) prompt(call *pipeline.Call, v *pipeline.Verdict) (bool, bool) {
	if a.answered {
		return a.allow, a.allow && a.always
	}
	what := call.Tool
	if in := call.Summary(); in != "" {
		what += " " + strconv.Quote(in) // no control character hides a part
	}
	a.ask = &mcp.ElicitParams{
		Message: fmt.Sprintf("sbx asks before running %s\n(%s)", what, v.Reason),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"allow":      map[string]any{"type": "boolean", "title": "Allow this call"},
				"forSession": map[string]any{"type": "boolean", "title": "Allow it for the rest of this session"},
			},
			"required": []string{"allow"},
		},
	}
	return false, false
}

// canElicit reports whether the client can show its user a form.
func canElicit(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil &&
		(p.Capabilities.Elicitation.Form != nil || p.Capabilities.Elicitation.URL == nil)
}

func textResult(res *pipeline.ToolResult) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Content}}, IsError: res.IsError}
}
