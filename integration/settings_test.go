//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Nothing runs when the settings are wrong: the marker file the command
// would write never appears.
func TestBadSettingsRunNothing(t *testing.T) {
	tests := []struct {
		name, file, content, want string
	}{
		{"invalid JSON", ".sbx/settings.json", "{\n  \"sandbox\": {\n    \"enabled\": true,\n  }\n}", ".sbx/settings.json:4:"},
		{"wrong type", ".sbx/settings.json", `{"sandbox": {"filesystem": {"denyRead": "secrets"}}}`, "sandbox.filesystem.denyRead: expected array of strings"},
		{"unknown security key", ".sbx/settings.json", `{"sandbox": {"filesystem": {"denyWirte": ["x"]}}}`, "sandbox.filesystem.denyWirte: unknown key"},
		{"user settings", "../home/.config/sbx/settings.json", `{"sandbox": []}`, "settings.json:1:13: sandbox: expected object"},
		{"claude settings", ".claude/settings.json", `{"sandbox": {"credentials": {"envVars": {"X": {"mode": "leak"}}}}}`, "sandbox.credentials.envVars.X.mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.write(tt.file, tt.content)
			r := e.sh("echo ran > marker", "--claude")
			if r.code != 125 {
				t.Errorf("exit %d, want 125", r.code)
			}
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr %q lacks %q", r.stderr, tt.want)
			}
			assertAbsent(t, e.path("marker"))
		})
	}
}

func TestUntrustedProjectCannotLoosen(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	e.write(".sbx/settings.json", `{"sandbox": {"filesystem": {"allowWrite": ["`+outside+`"], "denyWrite": ["./locked"]}}}`)
	e.write("locked", "orig")
	r := e.sh("echo x > " + outside + "/escaped; echo evil > locked; true")
	assertAbsent(t, filepath.Join(outside, "escaped"))
	assertContent(t, e.path("locked"), "orig")
	if !strings.Contains(r.stderr, "sandbox.filesystem.allowWrite: loosens the sandbox from an untrusted project file") {
		t.Errorf("no warning naming the key: %s", r.stderr)
	}

	// Trusted (flag, or the user's trustedProjects list), the same file applies.
	r = e.sh("echo x > "+outside+"/escaped", "--trust-project")
	assertContent(t, filepath.Join(outside, "escaped"), "x\n")
	os.Remove(filepath.Join(outside, "escaped"))
	os.MkdirAll(filepath.Join(e.home, ".config/sbx"), 0o755)
	os.WriteFile(filepath.Join(e.home, ".config/sbx/settings.json"), []byte(`{"sbx": {"trustedProjects": ["`+e.ws+`"]}}`), 0o644)
	r = e.sh("echo y > " + outside + "/escaped")
	assertContent(t, filepath.Join(outside, "escaped"), "y\n")
}

func TestClaudeSettingsRead(t *testing.T) {
	e := newEnv(t)
	e.write(".claude/settings.json", `{"permissions": {"allow": ["Bash(ls:*)"]}, "sandbox": {"filesystem": {"denyWrite": ["./keep"]}}}`)
	e.write("keep", "orig")
	r := e.sh("echo evil > keep; true")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	// Without --claude, Claude Code's files are not read.
	assertContent(t, e.path("keep"), "evil\n")
	e.write("keep", "orig")
	e.sh("echo evil > keep; true", "--claude")
	assertContent(t, e.path("keep"), "orig")
}

// With the sandbox impossible to build, nothing runs, whatever
// failIfUnavailable says; the error says why and what to do.
func TestUnavailableSandboxRunsNothing(t *testing.T) {
	for _, fail := range []string{"true", "false"} {
		t.Run("failIfUnavailable="+fail, func(t *testing.T) {
			e := newEnv(t)
			settings := `{"sandbox": {"bwrapPath": "/nonexistent/bwrap", "failIfUnavailable": ` + fail + `}}`
			r := e.sh("echo ran > marker", "--settings", settings)
			if r.code != 125 {
				t.Errorf("exit %d, want 125", r.code)
			}
			assertAbsent(t, e.path("marker"))
			for _, want := range []string{"bubblewrap not found", "sbx doctor"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr %q lacks %q", r.stderr, want)
				}
			}
		})
	}
	e := newEnv(t)
	// Unsandboxed, the sandbox's auto-allow does not apply: the command
	// needs the permission flow's approval (here: bypassPermissions).
	r := e.sh("echo ran > marker", "--settings", `{"sandbox": {"bwrapPath": "/nonexistent/bwrap"}}`, "--unsandboxed", "--mode", "bypassPermissions")
	if r.code != 0 {
		t.Errorf("--unsandboxed: exit %d: %s", r.code, r.stderr)
	}
	assertContent(t, e.path("marker"), "ran\n")
	if !strings.Contains(r.stderr, "WITHOUT a sandbox") {
		t.Errorf("no warning: %s", r.stderr)
	}
}

func TestSandboxDisabledNeedsUnsandboxed(t *testing.T) {
	e := newEnv(t)
	r := e.sh("echo ran > marker", "--settings", `{"sandbox": {"enabled": false}}`)
	if r.code != 125 || !strings.Contains(r.stderr, "--unsandboxed") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	assertAbsent(t, e.path("marker"))
}

func TestUsageErrors(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{{"run"}, {"run", "-c", "true", "--", "ls"}, {"bogus"}, {"run", "--no-such-flag"}} {
		if r := e.sbx(args...); r.code != 2 {
			t.Errorf("sbx %q: exit %d, want 2", args, r.code)
		}
	}
	// Flags after the command belong to the command.
	r := e.sbx("run", "--", "sh", "-c", "echo $0 $1", "--timeout", "x")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "--timeout x" {
		t.Errorf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestDoctorJSON(t *testing.T) {
	e := newEnv(t)
	r := e.sbx("doctor", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stdout)
	}
	for _, want := range []string{`"name": "bubblewrap"`, `"name": "user namespaces"`, `"name": "seccomp"`,
		`"name": "landlock"`, `"name": "resource limits"`, `"name": "sandbox"`, `"usable": true`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor --json lacks %s:\n%s", want, r.stdout)
		}
	}
}
