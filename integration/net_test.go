//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/linux"
	"github.com/sbx-sandbox/sbx/netrules"
	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/proxy"
)

// counted is a local test server with a hit counter, plain or TLS.
type counted struct {
	srv  *httptest.Server
	hits atomic.Int32
	port int
}

func newCounted(t *testing.T, tlsToo bool) *counted {
	t.Helper()
	c := &counted{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		fmt.Fprint(w, "reached-the-server")
	})
	if tlsToo {
		c.srv = httptest.NewTLSServer(h)
	} else {
		c.srv = httptest.NewServer(h)
	}
	t.Cleanup(c.srv.Close)
	c.port = c.srv.Listener.Addr().(*net.TCPAddr).Port
	return c
}

// requireTool skips (or, in CI, fails) when a program a test runs in the
// sandbox is missing.
func requireTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if inCI() {
			t.Fatalf("%s not installed", name)
		}
		t.Skipf("%s not installed", name)
	}
}

func requireCurl(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		if inCI() {
			t.Fatal("curl not installed")
		}
		t.Skip("curl not installed")
	}
}

// curls is a script that tries the server over the HTTP proxy, CONNECT,
// SOCKS5 and a direct connection, each bounded to 5 s.
func curls(plain, tlsSrv *counted, host string) string {
	return fmt.Sprintf(`
curl -sS -m5 --noproxy '' http://%[1]s:%[2]d/http; echo " http=$?"
curl -sSk -m5 --noproxy '' https://%[1]s:%[3]d/connect; echo " connect=$?"
curl -sS -m5 --noproxy '' -x socks5h://127.0.0.1:1080 http://%[1]s:%[2]d/socks; echo " socks=$?"
(exec 3<>/dev/tcp/127.0.0.1/%[2]d && printf 'GET /direct HTTP/1.0\r\n\r\n' >&3 && cat <&3) 2>/dev/null; echo " direct=$?"
true`, host, plain.port, tlsSrv.port)
}

func TestNetworkStrictEmptyAllowlist(t *testing.T) {
	requireCurl(t)
	e := newEnv(t)
	plain, tlsSrv := newCounted(t, false), newCounted(t, true)
	audit := filepath.Join(e.home, "audit.jsonl")
	r := e.sh(curls(plain, tlsSrv, "127.0.0.1"), "--audit", audit)
	time.Sleep(100 * time.Millisecond)
	if n := plain.hits.Load() + tlsSrv.hits.Load(); n != 0 {
		t.Errorf("servers got %d hits, want 0\n%s\n%s", n, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "reached-the-server") {
		t.Errorf("output shows a response: %s", r.stdout)
	}
	// The agent is told why.
	for _, want := range []string{"not on the allowlist", "403"} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("output lacks %q:\n%s\n%s", want, r.stdout, r.stderr)
		}
	}
	data, _ := os.ReadFile(audit)
	for _, proto := range []string{`"proto":"http"`, `"proto":"connect"`, `"proto":"socks5"`} {
		if !bytes.Contains(data, []byte(proto)) || !bytes.Contains(data, []byte(`"decision":"deny"`)) {
			t.Errorf("audit lacks a %s deny: %s", proto, data)
		}
	}
}

func TestNetworkAllowedIPRule(t *testing.T) {
	requireCurl(t)
	e := newEnv(t)
	plain, tlsSrv := newCounted(t, false), newCounted(t, true)
	audit := filepath.Join(e.home, "audit.jsonl")
	r := e.sh(curls(plain, tlsSrv, "127.0.0.1"), "--allow-domain", "127.0.0.1", "--audit", audit)
	for _, want := range []string{"http=0", "connect=0", "socks=0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %s:\n%s\n%s", want, r.stdout, r.stderr)
		}
	}
	// HTTP and SOCKS reach the plain server, CONNECT the TLS one; the
	// direct connection reaches nothing (the sandbox's own loopback).
	if plain.hits.Load() != 2 || tlsSrv.hits.Load() != 1 {
		t.Errorf("hits plain %d (want 2), tls %d (want 1)", plain.hits.Load(), tlsSrv.hits.Load())
	}
	time.Sleep(100 * time.Millisecond)
	var allowed int
	data, _ := os.ReadFile(audit)
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var ev struct {
			Kind string `json:"event"`
			proxy.Event
		}
		if json.Unmarshal(line, &ev) == nil && ev.Kind == "network" && ev.Decision == "allow" {
			allowed++
			if ev.Source != "--allow-domain" || ev.Rule != "127.0.0.1" || ev.BytesDown == 0 {
				t.Errorf("event %+v", ev)
			}
		}
	}
	if allowed != 3 {
		t.Errorf("%d allow events, want 3: %s", allowed, data)
	}
}

func TestNetworkDeniedBeatsAllowed(t *testing.T) {
	requireCurl(t)
	e := newEnv(t)
	plain, tlsSrv := newCounted(t, false), newCounted(t, true)
	e.write(".sbx/settings.json", fmt.Sprintf(`{"sandbox": {"network": {"deniedDomains": ["127.0.0.1:%d", "127.0.0.1:%d"]}}}`, plain.port, tlsSrv.port))
	e.sh(curls(plain, tlsSrv, "127.0.0.1"), "--allow-domain", "127.0.0.1")
	if n := plain.hits.Load() + tlsSrv.hits.Load(); n != 0 {
		t.Errorf("servers got %d hits, want 0", n)
	}
}

func TestNetworkIPSpellings(t *testing.T) {
	requireCurl(t)
	e := newEnv(t)
	plain := newCounted(t, false)
	// Denied in one spelling, asked for in others: all the same address.
	script := ""
	for _, h := range []string{"2130706433", "0x7f.0.0.1", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]"} {
		script += fmt.Sprintf("curl -sS -m5 --noproxy '' -x socks5h://127.0.0.1:1080 http://%s:%d/; curl -sS -m5 --noproxy '' http://%s:%d/\n", h, plain.port, h, plain.port)
	}
	e.sh(script+"true", "--allow-domain", "localhost", "--deny-domain", "127.0.0.1")
	if n := plain.hits.Load(); n != 0 {
		t.Errorf("server got %d hits through other spellings of a denied address", n)
	}
}

// The host's loopback is reached by one name only, host.sbx.internal, when
// a rule names it; localhost in the sandbox is the sandbox's own.
func TestNetworkHostLoopbackByName(t *testing.T) {
	requireCurl(t)
	e := newEnv(t)
	plain := newCounted(t, false)
	r := e.sh(fmt.Sprintf("curl -sS -m5 http://host.sbx.internal:%[1]d/; echo; curl -sS -m5 http://localhost:%[1]d/; curl -sS -m5 --noproxy '' http://127.0.0.1:%[1]d/", plain.port),
		"--allow-domain", fmt.Sprintf("host.sbx.internal:%d", plain.port), "--allow-domain", "localhost")
	if plain.hits.Load() != 1 {
		t.Errorf("hits %d, want 1 (host.sbx.internal only)\n%s\n%s", plain.hits.Load(), r.stdout, r.stderr)
	}
}

// A server started in the sandbox is reached on the sandbox's loopback,
// directly, whatever the rules say about localhost.
func TestSandboxLoopbackIsDirect(t *testing.T) {
	requireCurl(t)
	e := newEnv(t)
	requireTool(t, "python3")
	e.write("index.html", "served inside")
	script := "python3 -m http.server 18765 --bind 127.0.0.1 >/dev/null 2>&1 & for i in 1 2 3 4 5 6 7 8 9 10; do curl -s -m1 http://localhost:18765/index.html && break; sleep 0.3; done"
	for _, flags := range [][]string{nil, {"--allow-domain", "localhost"}} {
		r := e.sh(script, flags...)
		if !strings.Contains(r.stdout, "served inside") {
			t.Errorf("flags %v: %q %q", flags, r.stdout, r.stderr)
		}
	}
}

func TestNetworkSettingsAndWebFetchRules(t *testing.T) {
	requireCurl(t)
	e := newEnv(t)
	plain := newCounted(t, false)
	os.MkdirAll(filepath.Join(e.home, ".claude"), 0o755)
	os.WriteFile(filepath.Join(e.home, ".claude/settings.json"), []byte(`{"permissions": {"allow": ["WebFetch(domain:host.sbx.internal)"]}}`), 0o644)
	// An untrusted project cannot open the network.
	e.write(".sbx/settings.json", `{"sandbox": {"network": {"allowedDomains": ["127.0.0.1"]}}}`)
	url := fmt.Sprintf("http://127.0.0.1:%d/", plain.port)
	r := e.sh("curl -sS -m5 --noproxy '' " + url)
	if plain.hits.Load() != 0 || !strings.Contains(r.stderr, "allowedDomains: loosens the sandbox") {
		t.Errorf("untrusted project opened the network: hits %d, stderr %s", plain.hits.Load(), r.stderr)
	}
	e.sh(fmt.Sprintf("curl -sS -m5 http://host.sbx.internal:%d/", plain.port), "--claude")
	if plain.hits.Load() != 1 {
		t.Errorf("WebFetch(domain:host.sbx.internal) did not allow the host's loopback: hits %d", plain.hits.Load())
	}
}

// executor is the Go API, as an embedder uses it.
func (e *env) executor() *linux.Executor {
	return &linux.Executor{Exe: sbxBin, StateDir: filepath.Join(e.home, "state")}
}

func (e *env) spec(t *testing.T, script string, allow ...string) *pipeline.Spec {
	t.Helper()
	pol, err := fsrules.Compile(fsrules.Input{Workspace: e.ws}, fsrules.Host{Home: e.home})
	if err != nil {
		t.Fatal(err)
	}
	var entries []netrules.Entry
	for _, a := range allow {
		entries = append(entries, netrules.Entry{Pattern: a, Origin: "test"})
	}
	rules, err := netrules.Compile(entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &pipeline.Spec{Argv: []string{"/bin/sh", "-c", script}, Dir: e.ws, FS: pol,
		Env: []string{"PATH=/usr/bin:/bin"}, Net: &pipeline.NetPolicy{Rules: rules, Strict: true}}
}

func TestNetworkInjectedResolver(t *testing.T) {
	requireCurl(t)
	e := newEnv(t)
	plain := newCounted(t, false)
	ex := e.executor()
	ex.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host == "api.example.test" || host == "rebind.example.test" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, fmt.Errorf("no such host")
	}
	var out bytes.Buffer
	script := fmt.Sprintf("curl -sS -m5 http://api.example.test:%d/; echo; curl -sS -m5 http://rebind.example.test:%d/", plain.port, plain.port)
	// api.example.test resolves to loopback: allowed only with the address
	// named too. rebind.example.test is allowed by name only: refused.
	res, err := ex.Run(context.Background(), e.spec(t, script, "api.example.test", "rebind.example.test", "127.0.0.1:"+fmt.Sprint(plain.port)), pipeline.Stdio{Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	_ = res
	if plain.hits.Load() != 2 {
		// Both names resolve to the allowed address: both reach it.
		t.Errorf("hits %d, want 2: %s", plain.hits.Load(), out.String())
	}
	plain.hits.Store(0)
	out.Reset()
	if _, err := ex.Run(context.Background(), e.spec(t, script, "api.example.test", "rebind.example.test"), pipeline.Stdio{Stdout: &out, Stderr: &out}); err != nil {
		t.Fatal(err)
	}
	if plain.hits.Load() != 0 || !strings.Contains(out.String(), "loopback") {
		t.Errorf("names resolving to loopback reached it: hits %d: %s", plain.hits.Load(), out.String())
	}
}

func TestNetworkProxyKilledMidRun(t *testing.T) {
	requireCurl(t)
	e := newEnv(t)
	plain := newCounted(t, false)
	ex := e.executor()
	stopped := make(chan func() error, 1)
	ex.OnProxyStart = func(stop func() error) { stopped <- stop }
	// The command's writes reach the host only when it ends: it signals
	// on stdout, and the test answers through a file next to the
	// workspace, which the sandbox sees (read-only) as it is on the host.
	goFile := filepath.Join(filepath.Dir(e.ws), "go")
	script := fmt.Sprintf(`curl -sS -m5 --noproxy '' http://127.0.0.1:%[1]d/1; echo; echo ready
for i in $(seq 200); do [ -e %[2]s ] && break; sleep 0.05; done
curl -sS -m5 --noproxy '' http://127.0.0.1:%[1]d/2; echo " second=$?"
curl -sS -m5 --noproxy '' -x socks5h://127.0.0.1:1080 http://127.0.0.1:%[1]d/3; echo " third=$?"`, plain.port, goFile)
	done := make(chan string, 1)
	out := newSignalWriter("ready\n")
	go func() {
		ex.Run(context.Background(), e.spec(t, script, "127.0.0.1"), pipeline.Stdio{Stdout: out, Stderr: out})
		done <- out.String()
	}()
	stop := <-stopped
	select {
	case <-out.seen:
	case <-time.After(20 * time.Second):
		t.Fatal("command never got ready")
	}
	if plain.hits.Load() != 1 {
		t.Fatalf("first request: hits %d", plain.hits.Load())
	}
	stop()
	os.WriteFile(goFile, nil, 0o644)
	var got string
	select {
	case got = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not finish")
	}
	if plain.hits.Load() != 1 || strings.Contains(got, "second=0") || strings.Contains(got, "third=0") {
		t.Errorf("network survived the proxy: hits %d\n%s", plain.hits.Load(), got)
	}
}

// signalWriter collects output and closes seen once it holds a marker.
type signalWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	seen   chan struct{}
}

func newSignalWriter(marker string) *signalWriter {
	return &signalWriter{marker: marker, seen: make(chan struct{})}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.marker)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.marker) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
