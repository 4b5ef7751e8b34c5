package pipeline

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// The sandbox lists come from the gate's own parse of each rule, so the
// two agree on anchors and depth.
func TestPermissionPathsUseTheGatesAnchors(t *testing.T) {
	tests := []struct {
		rule, behavior string
		list           string // "denyRead", "denyWrite", "allowWrite", "" for none
		pattern        string
	}{
		{"Read(.env)", "deny", "denyRead", "/p/**/.env"},
		{"Read(./.env)", "deny", "denyRead", "/p/**/.env"},
		{"Read(./sub/.env)", "deny", "denyRead", "/p/sub/.env"},
		{"Read(//etc/shadow)", "deny", "denyRead", "/etc/shadow"},
		{"Read(~/.aws/**)", "deny", "denyRead", "/home/u/.aws"},
		{"Edit(src/**)", "deny", "denyWrite", "/p/**/src"}, // any depth for deny
		{"Edit(src/**)", "allow", "allowWrite", "/p/src"},  // only <cwd>/src for allow
		{"Edit(/build/)", "allow", "allowWrite", "/p/build"},
		{"Read(.env)", "ask", "", ""},
		{"Read(x", "deny", "", ""}, // unparseable: the gate refuses it
		{"Bash(rm *)", "deny", "", ""},
	}
	for _, tt := range tests {
		st := &settings.Settings{Home: "/home/u"}
		st.Perm.Rules = []settings.PermRule{{Rule: tt.rule, Behavior: tt.behavior}}
		var in fsrules.Input
		permissionPaths(st, "/p", &in)
		lists := map[string][]fsrules.Rule{"denyRead": in.DenyRead, "denyWrite": in.DenyWrite, "allowWrite": in.AllowWrite}
		n := len(in.DenyRead) + len(in.DenyWrite) + len(in.AllowWrite)
		if tt.list == "" {
			if n != 0 {
				t.Errorf("%s %s: added %+v, want nothing", tt.behavior, tt.rule, in)
			}
			continue
		}
		if l := lists[tt.list]; n != 1 || len(l) != 1 || l[0].Pattern != tt.pattern {
			t.Errorf("%s %s: %+v, want %s %s", tt.behavior, tt.rule, in, tt.list, tt.pattern)
		}
	}
}

// Credential files the environment moves out of the home directory are
// denied where it moved them (CARGO_HOME=/usr/local/cargo in Rust's
// images); relative values and unset variables add nothing.
func TestEnvCredentialDenies(t *testing.T) {
	env := map[string]string{"CARGO_HOME": "/usr/local/cargo", "DOCKER_CONFIG": "rel/docker", "KUBECONFIG": "/k/a::/k/b:kc",
		"GNUPGHOME": "/", "GH_CONFIG_DIR": "/w/.."}
	in := FSInput(nil, FSFlags{Getenv: func(k string) string { return env[k] }}, "/w")
	var got []string
	for _, r := range in.DenyRead {
		got = append(got, r.Pattern)
	}
	want := []string{"/usr/local/cargo/credentials", "/usr/local/cargo/credentials.toml", "/w/rel/docker/config.json", "/k/a", "/k/b", "/w/kc"}
	if !slices.Equal(got, want) {
		t.Errorf("denyRead %q, want %q", got, want)
	}
}

// The .env files of the home and of every directory above the workspace
// are denied, each once, also when the workspace lies in the home; those
// inside the workspace stay readable.
func TestDotEnvAboveTheWorkspace(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	ws := filepath.Join(home, "proj")
	os.MkdirAll(ws, 0o755)
	for _, p := range []string{filepath.Join(home, ".env"), filepath.Join(root, ".env.local"), filepath.Join(ws, ".env")} {
		os.WriteFile(p, []byte("x"), 0o600)
	}
	var in fsrules.Input
	defaultCredentialDenies(home, ws, filepath.Glob, &in)
	var got []string
	for _, r := range in.DenyRead {
		if strings.Contains(filepath.Base(r.Pattern), ".env") {
			got = append(got, r.Pattern)
		}
	}
	slices.Sort(got)
	want := []string{filepath.Join(root, ".env.local"), filepath.Join(home, ".env")}
	if !slices.Equal(got, want) {
		t.Errorf(".env denies %q, want %q", got, want)
	}
}
