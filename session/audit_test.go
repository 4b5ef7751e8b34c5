package session

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestAuditViolationLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	a.Violation("2026-12-02 10:00:00.000000+0000", "touch", 42, "file-write-create", "/Users/dev/.bashrc")
	a.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	for k, want := range map[string]any{"event": "sandbox-violation", "process": "touch", "pid": 42.0, "operation": "file-write-create", "target": "/Users/dev/.bashrc"} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (line %s)", k, got[k], want, b)
		}
	}
}
