//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/pipeline"
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
		// A red team's list of tools' credential files read in clear before.
		".config/git/credentials": "SECRET-XDG-GIT", ".config/containers/auth.json": "SECRET-PODMAN", ".pgpass": "SECRET-PG",
		".my.cnf": "SECRET-MY", ".vault-token": "SECRET-VAULT", ".config/hub": "SECRET-HUB",
		".terraform.d/credentials.tfrc.json": "SECRET-TF", ".gem/credentials": "SECRET-GEM", ".config/rclone/rclone.conf": "SECRET-RCLONE",
		".s3cfg": "SECRET-S3", ".boto": "SECRET-BOTO", ".cache/huggingface/token": "SECRET-HF", ".pulumi/credentials.json": "SECRET-PULUMI",
		".databrickscfg": "SECRET-DBX", ".authinfo": "SECRET-AUTHINFO", ".config/github-copilot/hosts.json": "SECRET-COPILOT",
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

// TestHTTPSInjectionThroughTheSandbox: a command in the sandbox calls a
// TLS server with a masked token; TLS is terminated for the bound host
// only, the server gets the real token, the command sees only the
// placeholder.
func TestHTTPSInjectionThroughTheSandbox(t *testing.T) {
	requireCurl(t)
	e := newEnv(t)
	var mu sync.Mutex
	var got []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Get("Authorization"))
		io.WriteString(w, "secured")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	real := "realtoken-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	masked, err := creds.MaskEnv([]string{"SERVICE_TOKEN=" + real, "PATH=/usr/bin:/bin"}, creds.Config{Vars: map[string]creds.VarConfig{"SERVICE_TOKEN": {Hosts: []string{"127.0.0.1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ex := e.executor()
	ex.UpstreamRoots = x509.NewCertPool()
	ex.UpstreamRoots.AddCert(srv.Certificate())
	spec := e.spec(t, fmt.Sprintf(`echo "seen: $SERVICE_TOKEN"; curl -fsS -m 5 --noproxy '' -H "Authorization: Bearer $SERVICE_TOKEN" https://127.0.0.1:%d/`, port), "127.0.0.1")
	spec.Env, spec.Secrets = masked.Env, masked.Secrets
	var out bytes.Buffer
	if _, err := ex.Run(context.Background(), spec, pipeline.Stdio{Stdout: &out, Stderr: &out}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "Bearer "+real {
		t.Errorf("server got %q; output %s", got, out.String())
	}
	if strings.Contains(out.String(), real) || !strings.Contains(out.String(), "secured") {
		t.Errorf("output %q", out.String())
	}
}

// TestSecretNotInSandboxProcesses scans the argv and environment of every
// process of the sandbox (bubblewrap, the init, the command) during a run.
func TestSecretNotInSandboxProcesses(t *testing.T) {
	e := newEnv(t)
	real := "sk-ant-" + strings.Repeat("Zq9", 8)
	cmd := e.startReady([]string{"ANTHROPIC_API_KEY=" + real}, "run", "-c", "echo ready; printf '%200s\\n' ''; sleep 2") // padding: the redactor holds back a tail
	defer cmd.Wait()
	scanned := 0
	for _, pid := range Descendants(cmd.Process.Pid) {
		for _, f := range []string{"cmdline", "environ"} {
			data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), f))
			if err != nil {
				continue
			}
			scanned++
			if bytes.Contains(data, []byte(real)) {
				t.Errorf("process %d %s holds the real value", pid, f)
			}
		}
	}
	if scanned < 6 {
		t.Errorf("scanned only %d files", scanned)
	}
}

// A secret the command prints across the point where the tool_result's
// middle is cut is redacted whole (output is redacted before it is cut),
// in the text and in the structured output.
func TestSecretAcrossTheOutputCut(t *testing.T) {
	e := newEnv(t)
	real := "topsecretVALUE_4242_abcdefXYZ"
	e.write("secretfile", real)
	// 100,000 characters; the value starts 10 characters before the kept
	// tail (the last 15,000) and at 14,990 (across the head's end).
	e.write("gen.py", `v = open("secretfile").read()
head = "a" * 14990 + v
tail = v[10:] + "b" * (15000 - len(v) + 10)
mid = "m" * (100000 - len(head) - len(tail) - 10) + v[:10]
print(head + mid + tail, end="")
`)
	for _, args := range [][]string{nil, {"--output", "structured"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, sbxBin, append([]string{"tool"}, args...)...)
		cmd.Dir, cmd.Env = e.ws, append(e.environ(), "MYSECRET_TOKEN="+real)
		cmd.Stdin = strings.NewReader(`{"type":"tool_use","id":"cut","name":"Bash","input":{"command":"python3 gen.py"}}`)
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var res struct{ Content string }
		json.Unmarshal(out, &res)
		if !strings.Contains(res.Content, "cut") {
			t.Fatalf("%v: no cut in the result: %d characters", args, len(res.Content))
		}
		for _, part := range []string{real, "topsecretV", "ALUE_4242_abcdefXYZ"} {
			if strings.Contains(string(out), part) {
				t.Errorf("%v: %q in the result", args, part)
			}
		}
	}
}

// An upstream's bytes that come after its response are logged by Go's
// transport, quoted: with a bound credential's real value in them (the
// upstream echoes the request), they must not reach sbx's stderr, which
// an agent shows its model.
func TestUnsolicitedBytesNotOnStderr(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokX-Echo: %s\r\n", strings.TrimSpace(line))
				time.Sleep(500 * time.Millisecond)
			}()
		}
	}()
	real := "realsecretvalue-unsolicited-0123456789"
	port := ln.Addr().(*net.TCPAddr).Port
	settings := `{"sandbox": {"credentials": {"envVars": {"MY_TOKEN": {"hosts": ["127.0.0.1"]}}}}}`
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sbxBin, "run", "--settings", settings, "--allow-domain", "127.0.0.1", "-c",
		fmt.Sprintf(`curl -sS -m 5 --noproxy '' "http://127.0.0.1:%d/x/$MY_TOKEN"; sleep 1`, port))
	cmd.Dir = e.ws
	cmd.Env = append(e.environ(), "MY_TOKEN="+real)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	if stdout.String() != "ok" {
		t.Errorf("stdout %q, want ok", stdout.String())
	}
	if strings.Contains(stdout.String()+stderr.String(), real) {
		t.Errorf("the real value is in sbx's output:\n%s%s", stdout.String(), stderr.String())
	}
}

// A credential file or denyRead folder the host replaces while a command
// runs (git credential-store, an editor's save) detaches the sandbox's
// mask over it; Landlock keeps the new one unreadable, and the files
// around it readable, whether the init starts the command or the limits
// stub does; so does a credential file a login makes during the run.
// Before, the command read the new secrets in clear.
func TestReplacedMaskStaysUnreadable(t *testing.T) {
	for _, tt := range []struct {
		name  string
		flags []string
	}{{"direct", nil}, {"limits stub", []string{"--max-cpu", "10m"}}} {
		t.Run(tt.name, func(t *testing.T) { replacedMaskStaysUnreadable(t, tt.flags) })
	}
}

func replacedMaskStaysUnreadable(t *testing.T, flags []string) {
	e := newEnv(t)
	home := e.home
	put := func(rel, content string) {
		t.Helper()
		p := filepath.Join(home, rel)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p+".new", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".new", p); err != nil {
			t.Fatal(err)
		}
	}
	put(".git-credentials", "https://u:OLD-SECRET@git.example\n")
	put("private/key", "OLD-SECRET\n")
	put(".ssh/known_hosts", "PUBLIC-KNOWN-HOSTS\n")
	put(".docker/other.json", "{}\n")
	put(".config/foo/x", "x\n")
	settings := fmt.Sprintf(`{"sandbox":{"filesystem":{"denyRead":[%q]}}}`, filepath.Join(home, "private"))
	script := hostStepScript + `cat ~/.git-credentials ~/private/key ~/.docker/config.json ~/.config/gh/hosts.yml > got.txt 2>&1; cat got.txt; cat ~/.ssh/known_hosts`
	stdout, stderr := e.duringRun(func() {
		put(".git-credentials", "https://u:NEW-SECRET@git.example\n")
		os.MkdirAll(filepath.Join(home, "private.new"), 0o700)
		os.WriteFile(filepath.Join(home, "private.new/key"), []byte("NEW-SECRET\n"), 0o600)
		os.Rename(filepath.Join(home, "private"), filepath.Join(home, "private.old"))
		if err := os.Rename(filepath.Join(home, "private.new"), filepath.Join(home, "private")); err != nil {
			t.Fatal(err)
		}
		// Credential files of tools not logged in at the start.
		put(".docker/config.json", `{"auths":{"r.example":{"auth":"NEW-SECRET"}}}`)
		put(".config/gh/hosts.yml", "oauth_token: NEW-SECRET\n")
	}, append(append([]string{"run", "--settings", settings}, flags...), "-c", script)...)
	got, _ := os.ReadFile(e.path("got.txt"))
	if strings.Contains(stdout, "SECRET") || strings.Contains(string(got), "SECRET") {
		t.Errorf("the command read a replaced secret:\nstdout: %s\ngot.txt on the host: %s", stdout, got)
	}
	if !strings.Contains(stdout, "PUBLIC-KNOWN-HOSTS") {
		t.Errorf("a file beside a mask was not readable: %q (stderr %q)", stdout, stderr)
	}
	for _, p := range []string{".git-credentials", "private"} {
		if !strings.Contains(stderr, filepath.Join(home, p)+" was replaced on the host during the run: the new one stayed unreadable") {
			t.Errorf("no note of %s replaced: %q", p, stderr)
		}
	}
}

// A denyRead folder in the workspace lies on the overlay, which a swap on
// the host can unmask (documented): sbx says so after the run. Before,
// a mask on an overlay was taken for one no host change could reach, and
// nothing was said.
func TestHiddenPathInWorkspaceSwappedIsReported(t *testing.T) {
	e := newEnv(t)
	e.write("sdir/k", "OLD\n")
	script := hostStepScript + `stat sdir.old >/dev/null 2>&1; cat sdir/k 2>&1; true`
	_, stderr := e.duringRun(func() {
		if err := os.Rename(e.path("sdir"), e.path("sdir.old")); err != nil {
			t.Fatal(err)
		}
		e.write("sdir/k", "NEW\n")
	}, "run", "--deny-read", e.path("sdir"), "-c", script)
	if !strings.Contains(stderr, e.path("sdir")+" was replaced on the host during the run") {
		t.Errorf("no note of the swapped folder: %q", stderr)
	}
}

// A .env file the host makes during a run in the home, or in a folder
// above the workspace that holds a .env already (`vercel env pull` at a
// monorepo's root), stays unreadable, as one there at the start is; the
// folder's other files stay readable. Before, the .env defaults were
// matched once, at the start.
func TestDotEnvMadeDuringARunStaysUnreadable(t *testing.T) {
	e := newEnv(t)
	root := filepath.Dir(e.ws)
	e.ws = filepath.Join(root, "repo", "pkg")
	if err := os.MkdirAll(e.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "repo", "README"), []byte("PUBLIC\n"), 0o644)
	os.WriteFile(filepath.Join(root, "repo", ".env"), []byte("TOKEN=OLD-SECRET\n"), 0o600)
	script := hostStepScript + `cat ../.env ../.env.local ~/.env.local > got.txt 2>&1; cat got.txt ../README`
	stdout, stderr := e.duringRun(func() {
		for _, p := range []string{filepath.Join(root, "repo", ".env.local"), filepath.Join(e.home, ".env.local")} {
			os.WriteFile(p+".tmp", []byte("TOKEN=NEW-SECRET\n"), 0o600)
			if err := os.Rename(p+".tmp", p); err != nil {
				t.Fatal(err)
			}
		}
	}, "run", "-c", script)
	got, _ := os.ReadFile(e.path("got.txt"))
	if strings.Contains(stdout, "SECRET") || strings.Contains(string(got), "SECRET") {
		t.Errorf("the command read a .env made during the run:\nstdout: %s\ngot.txt on the host: %s", stdout, got)
	}
	if !strings.Contains(stdout, "PUBLIC") {
		t.Errorf("a file beside it was not readable: %q (stderr %q)", stdout, stderr)
	}
}

// A command's stdin redirected from a host file it opens again by path
// (`cat /dev/stdin < file`) reads it, though the file lies where the
// sandbox shows something else (the host's /tmp) and the read rules hold.
// Before, Landlock refused it once something was hidden.
func TestStdinFileOpenedAgainByPath(t *testing.T) {
	e := newEnv(t)
	in := filepath.Join(t.TempDir(), "input.txt")
	if err := os.WriteFile(in, []byte("FROM-STDIN\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, flags := range [][]string{nil, {"--max-cpu", "10m"}} {
		f.Seek(0, io.SeekStart)
		r := e.sbxIn(f, append(append([]string{"run"}, flags...), "--", "cat", "/dev/stdin")...)
		if r.code != 0 || r.stdout != "FROM-STDIN\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", flags, r.code, r.stdout, r.stderr)
		}
	}
}
