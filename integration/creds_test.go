//go:build linux

package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCredentialFilesUnreadable(t *testing.T) {
	e := newEnv(t)
	// A home outside /tmp: the sandbox's private /tmp would hide one there.
	home, err := os.MkdirTemp("/var/tmp", "sbx-it-home-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	e.home = home
	files := map[string]string{
		".ssh/id_ed25519": "SECRET-SSH", ".aws/credentials": "SECRET-AWS", ".netrc": "SECRET-NETRC",
		".git-credentials": "SECRET-GIT", ".config/gh/hosts.yml": "SECRET-GH", ".npmrc": "SECRET-NPM",
		".kube/config": "SECRET-KUBE", ".docker/config.json": "SECRET-DOCKER", ".pypirc": "SECRET-PYPI",
		".gnupg/private.key": "SECRET-GPG", ".env": "SECRET-DOTENV", ".claude/.credentials.json": "SECRET-CLAUDE",
	}
	var cats []string
	for rel, content := range files {
		p := filepath.Join(e.home, rel)
		os.MkdirAll(filepath.Dir(p), 0o700)
		os.WriteFile(p, []byte(content), 0o600)
		cats = append(cats, "cat "+p+" 2>/dev/null")
	}
	os.WriteFile(filepath.Join(e.home, ".ssh/known_hosts"), []byte("PUBLIC-KNOWN-HOSTS"), 0o644)
	os.WriteFile(filepath.Join(e.home, ".ssh/id_ed25519.pub"), []byte("PUBLIC-KEY"), 0o644)
	r := e.sh(strings.Join(cats, "; ") + "; cat ~/.ssh/known_hosts ~/.ssh/id_ed25519.pub; true")
	if strings.Contains(r.stdout, "SECRET-") {
		t.Errorf("a credential file was readable: %s", r.stdout)
	}
	if !strings.Contains(r.stdout, "PUBLIC-KNOWN-HOSTS") || !strings.Contains(r.stdout, "PUBLIC-KEY") {
		t.Errorf("public halves not readable: %s", r.stdout)
	}
	// allowRead re-opens one.
	r = e.sh("cat ~/.netrc", "--allow-read", filepath.Join(e.home, ".netrc"))
	if !strings.Contains(r.stdout, "SECRET-NETRC") {
		t.Errorf("allowRead did not re-open .netrc: %q %s", r.stdout, r.stderr)
	}
}

// TestSecretsNeverInClear scans what a whole run exposes: the sandbox's
// environment and files, sbx's stdout, stderr and audit log.
func TestSecretsNeverInClear(t *testing.T) {
	e := newEnv(t)
	real := "ghp_" + strings.Repeat("A1b2", 9)
	audit := filepath.Join(e.home, "audit.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sbxBin, "run", "--audit", audit, "--allow-domain", "127.0.0.1", "-c",
		`env; cat /proc/self/environ; cat /proc/1/environ 2>/dev/null; echo "$GITHUB_TOKEN" > token.txt; echo "$GITHUB_TOKEN" | base64; curl -sS -m 3 --noproxy '' -H "Authorization: token $GITHUB_TOKEN" http://127.0.0.1:9/ ; true`)
	cmd.Dir = e.ws
	cmd.Env = append(e.environ(), "GITHUB_TOKEN="+real, "MY_SERVICE_PASSWORD=hunter2hunter2")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	token, _ := os.ReadFile(e.path("token.txt"))
	auditData, _ := os.ReadFile(audit)
	for where, data := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String(), "token.txt (written in the sandbox)": string(token), "audit log": string(auditData)} {
		for _, secret := range []string{real, "hunter2hunter2"} {
			if strings.Contains(data, secret) {
				t.Errorf("%s holds a real secret value:\n%s", where, data)
			}
		}
	}
	if !strings.HasPrefix(string(token), "ghp_") {
		t.Errorf("the placeholder does not look like a GitHub token: %q", token)
	}
	if !strings.Contains(stderr.String(), "GITHUB_TOKEN (mask)") {
		t.Errorf("stderr does not name the masked variable: %s", stderr.String())
	}
}
