package session_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sbx-sandbox/sbx/session"
)

// A Go agent harness: open a session for a workspace, send the model's
// Bash tool_use, hand the tool_result back. The command runs in the
// sandbox; its write reaches the workspace through sbx's checked merge.
// (In your own program, leave Exe empty and call session.Reexec first in
// main.)
func Example() {
	ws, err := os.MkdirTemp("", "agent-workspace-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(ws)
	s, err := session.Open(session.Options{Dir: ws, Exe: sbxBinary})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	toolUse := `{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"echo hello > greeting.txt && cat greeting.txt && touch /usr/sbx-example"}}`
	res := s.Tool(context.Background(), []byte(toolUse))
	fmt.Printf("%s error=%v\n%s", res.ToolUseID, res.IsError, res.Content)
	data, _ := os.ReadFile(filepath.Join(ws, "greeting.txt"))
	fmt.Printf("on the host: %s", data)
	// Output:
	// toolu_01 error=true
	// Exit code 1
	// hello
	// touch: cannot touch '/usr/sbx-example': Read-only file system
	// on the host: hello
}
