package session

import (
	"context"
	"encoding/json"
	"fmt"
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
	call := func(ctx context.Context, tool string, in any) *pipeline.ToolResult {
		use, _ := json.Marshal(map[string]any{"type": "tool_use", "id": fmt.Sprintf("mcp_%d", ids.Add(1)), "name": tool, "input": in})
		return s.Tool(ctx, use)
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "bash", Description: "Run a bash command in sbx's sandbox, in the workspace: " +
		"the root file system is read-only, only the workspace (and allowed paths) are writable, the network goes " +
		"through a proxy that allows only the configured hosts. The result says what the sandbox refused."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in BashArgs) (*mcp.CallToolResult, BashResult, error) {
			res := call(ctx, "Bash", in)
			out := BashResult{ExitCode: -1, Result: res.Content}
			if o := res.Output; o != nil {
				out.ExitCode, out.Stdout, out.Stderr, out.Interrupted, out.Sandboxed = o.ExitCode, o.Stdout, o.Stderr, o.Interrupted, o.Sandboxed
			}
			return textResult(res), out, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "read_file", Description: "Read a file (permission rules and hooks decide first)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in ReadArgs) (*mcp.CallToolResult, any, error) {
			return textResult(call(ctx, "Read", in)), nil, nil
		})
	return srv
}

func textResult(res *pipeline.ToolResult) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Content}}, IsError: res.IsError}
}
