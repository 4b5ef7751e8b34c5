package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSetShellPrefix(t *testing.T) {
	file := filepath.Join(t.TempDir(), ".claude", "settings.local.json")
	old, err := setShellPrefix(file, "/bin/sbx --claude-shell")
	if err != nil || old != "" {
		t.Fatalf("new file: %q %v", old, err)
	}
	os.WriteFile(file, []byte(`{"permissions": {"allow": ["Bash(ls:*)"]}, "env": {"FOO": "1", "CLAUDE_CODE_SHELL_PREFIX": "/old"}}`), 0o644)
	if old, err = setShellPrefix(file, "/bin/sbx --claude-shell"); err != nil || old != "/old" {
		t.Fatalf("existing file: %q %v", old, err)
	}
	b, _ := os.ReadFile(file)
	for _, want := range []string{`"Bash(ls:*)"`, `"FOO": "1"`, `"CLAUDE_CODE_SHELL_PREFIX": "/bin/sbx --claude-shell"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lost %s:\n%s", file, want, b)
		}
	}
	os.WriteFile(file, []byte(`{"env": [1]}`), 0o644)
	if _, err := setShellPrefix(file, "/x"); err == nil {
		t.Error("an env that is not an object was overwritten")
	}
	os.WriteFile(file, []byte(`{not json`), 0o644)
	if _, err := setShellPrefix(file, "/x"); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("a broken file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != `{not json` {
		t.Error("a broken file was changed")
	}
}
