package pipeline

import (
	"context"
	"strings"
	"testing"
)

// A tool_use whose keys differ from type, id, name or input only in case
// is refused, and nothing runs (the zero Runner would panic on a call): Go's
// decoder reads keys regardless of case, the caller's reader does not.
func TestHandleRefusesKeysThatDifferInCase(t *testing.T) {
	tests := []struct{ in, wantID string }{
		{`{"type":"tool_use","id":"toolu_A","Id":"toolu_B","name":"Bash","input":{"command":"true"}}`, "toolu_A"},
		{`{"type":"tool_use","id":"toolu_C","name":"Read","Name":"Bash","input":{"file_path":"/x"},"Input":{"command":"touch x"}}`, "toolu_C"},
		{`{"type":"not_tool_use","Type":"tool_use","id":"n3","name":"Bash","input":{"command":"true"}}`, "n3"},
		{`{"TYPE":"tool_use","ID":"n4","Name":"Bash","Input":{"command":"true"}}`, ""},
		// Not a case: an id the result would carry as U+FFFD.
		{`{"type":"tool_use","id":"\ud800","name":"Bash","input":{"command":"true"}}`, ""},
	}
	for _, tt := range tests {
		res := (&Runner{}).Handle(context.Background(), []byte(tt.in))
		if !res.Invalid || !res.IsError || !strings.Contains(res.Content, "one way only") {
			t.Errorf("%s: %+v", tt.in, res)
		}
		if res.ToolUseID != tt.wantID {
			t.Errorf("%s: tool_use_id %q, want %q", tt.in, res.ToolUseID, tt.wantID)
		}
	}
}
