package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseClaudeCall(t *testing.T) {
	snap := `source /home/u/.claude/shell-snapshots/snapshot-bash-1-x.sh 2>/dev/null || true && { shopt -u extglob || setopt NO_EXTENDED_GLOB NO_BARE_GLOB_QUAL; } >/dev/null 2>&1 || true && `
	for _, tc := range []struct {
		in, script, cwd string
		ok              bool
	}{
		{snap + `eval 'echo hi' < /dev/null && pwd -P >| /tmp/claude-8c4c-cwd`, snap + `eval 'echo hi' < /dev/null`, "/tmp/claude-8c4c-cwd", true},
		{`eval 'a && pwd -P >| /tmp/claude-1-cwd' < /dev/null && pwd -P >| /var/tmp/x/claude-ab-cwd`, `eval 'a && pwd -P >| /tmp/claude-1-cwd' < /dev/null`, "/var/tmp/x/claude-ab-cwd", true},
		{`echo hookran >> /tmp/hook.out`, "", "", false},
		{`eval 'x' && pwd -P >| /tmp/claude-zz-cwd`, "", "", false},          // not hex
		{`eval 'x' && pwd -P >| /tmp/claude-1-cwd; rm -rf /`, "", "", false}, // not the end
		{`eval 'x' && pwd -P >| relative/claude-1-cwd`, "", "", false},
		{`eval 'x' && pwd -P >| '/tmp/a b/claude-1-cwd'`, "", "", false},
		{`true && pwd -P >| /tmp/claude-1-cwd`, "", "", false}, // no eval: not Claude Code's
	} {
		c, ok := ParseClaudeCall(tc.in)
		if ok != tc.ok || c.Script != tc.script || c.CwdFile != tc.cwd {
			t.Errorf("ParseClaudeCall(%q) = %+v, %v; want %q %q %v", tc.in, c, ok, tc.script, tc.cwd, tc.ok)
		}
	}
}

func FuzzParseClaudeCall(f *testing.F) {
	f.Add(`eval 'echo hi' < /dev/null && pwd -P >| /tmp/claude-8c4c-cwd`)
	f.Add(`echo x`)
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := ParseClaudeCall(s)
		if !ok {
			return
		}
		if !filepath.IsAbs(c.CwdFile) || !strings.HasPrefix(s, c.Script+" && pwd -P >| ") || !strings.Contains(c.Script, "eval ") {
			t.Errorf("ParseClaudeCall(%q) = %+v", s, c)
		}
	})
}

func TestCopyCwd(t *testing.T) {
	dir := t.TempDir()
	report, to := filepath.Join(dir, "cwd"), filepath.Join(dir, "claude-1-cwd")
	if err := copyCwd(report, to); err != nil {
		t.Fatal(err) // no report: nothing written, no error
	}
	if _, err := os.Stat(to); err == nil {
		t.Error("a missing report wrote the file")
	}
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	for _, tc := range []struct {
		content string
		ok      bool
	}{{sub + "\n", true}, {"relative\n", false}, {"/a\n/b\n", false}, {dir + "/nonexistent\n", false},
		{report + "x\n", false}, {dir + "\r\x1b[2J\n", false}} {
		os.WriteFile(report, []byte(tc.content), 0o600)
		err := copyCwd(report, to)
		if (err == nil) != tc.ok {
			t.Errorf("report %q: %v", tc.content, err)
		}
	}
	if b, _ := os.ReadFile(to); string(b) != sub+"\n" {
		t.Errorf("Claude Code's file holds %q", b)
	}
	os.Remove(report)
	os.Symlink("/etc/hostname", report)
	if err := copyCwd(report, to); err == nil {
		t.Error("a symlinked report was followed")
	}
}

func TestSameStream(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out")
	a, _ := os.Create(p)
	defer a.Close()
	b, _ := os.OpenFile(p, os.O_WRONLY, 0)
	defer b.Close()
	c, _ := os.Create(p + "2")
	defer c.Close()
	if !sameStream(a, b) || !sameStream(a, a) || sameStream(a, c) || sameStream(nil, nil) {
		t.Error("sameStream is wrong")
	}
}

func TestSameStreamNil(t *testing.T) {
	var buf strings.Builder
	if sameStream(&buf, nil) || sameStream(nil, &buf) || !sameStream(&buf, &buf) {
		t.Error("sameStream with nil or one buffer is wrong")
	}
}
