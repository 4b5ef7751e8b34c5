package session

import (
	"context"
	"encoding/json"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// Tool runs one tool_use given as JSON (Bash in the sandbox, Read on the
// host after the gate) and returns exactly one tool_result, paired by id
// on every path: a session that cannot build its sandbox answers with an
// error result too. Everything it returns is redacted.
func (s *Session) Tool(ctx context.Context, toolUse []byte) *pipeline.ToolResult {
	ctx = pipeline.WithArrival(ctx, s.arrival())
	sb, err := s.prepare()
	if err != nil {
		var id struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(toolUse, &id)
		return &pipeline.ToolResult{Type: "tool_result", ToolUseID: id.ID, Content: "Error: sbx: " + err.Error(), IsError: true}
	}
	return sb.runner.Handle(ctx, toolUse)
}

// Prepare compiles the policy and builds the executor now rather than on
// the first command, so a long-lived server fails at start-up instead of
// on its first call. With Options.Warm, the first call's sandbox is
// launched too.
func (s *Session) Prepare() error {
	sb, err := s.prepare()
	if err == nil && s.opts.Warm {
		if w, ok := sb.closer.(interface{ Prewarm(*pipeline.Spec) }); ok {
			// The first Bash call's sandbox, launched while the caller
			// gets ready.
			if spec, err := sb.runner.BashSpec(""); err == nil {
				w.Prewarm(spec)
			}
		}
	}
	return err
}
