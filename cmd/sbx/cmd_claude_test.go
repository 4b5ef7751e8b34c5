package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// A settings file that is a FIFO or a link to a device is refused unread
// (it hung, or read /dev/zero until memory ran out); one with a key twice
// is refused (the rewrite kept only the last); one that is a link is
// rewritten at its target, the link kept.
func TestSetShellPrefixRefusesWhatItCannotRewrite(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.json")
	os.Symlink("/dev/zero", zero)
	dup := filepath.Join(dir, "dup.json")
	os.WriteFile(dup, []byte(`{"env": {"A": "1"}, "env": {"B": "2"}}`), 0o644)
	for _, f := range []string{fifo, zero, dup} {
		done := make(chan error, 1)
		go func() { _, err := setShellPrefix(f, "/x"); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), f) {
				t.Errorf("%s: %v", f, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still reading after 10 s", f)
		}
	}
	if b, _ := os.ReadFile(dup); string(b) != `{"env": {"A": "1"}, "env": {"B": "2"}}` {
		t.Errorf("the file with a key twice was changed: %s", b)
	}
	target := filepath.Join(dir, "target.json")
	os.WriteFile(target, []byte(`{"env": {"A": "1"}}`), 0o600)
	link := filepath.Join(dir, "link.json")
	os.Symlink(target, link)
	if _, err := setShellPrefix(link, "/x"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(target); !strings.Contains(string(b), `"A": "1"`) || !strings.Contains(string(b), `"CLAUDE_CODE_SHELL_PREFIX": "/x"`) {
		t.Errorf("target: %s", b)
	}
}
