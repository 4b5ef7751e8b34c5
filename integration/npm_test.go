//go:build linux

package integration

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/linux"
	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/session"
)

// npm installs from a registry double over TLS with NPM_TOKEN bound to it:
// the proxy terminates TLS with the run's CA, npm trusts it even though
// the project's .npmrc names the system bundle as its cafile, the registry
// gets the real token, the sandbox only the placeholder.
func TestNpmWithBoundToken(t *testing.T) {
	requireTool(t, "npm")
	e := newEnv(t)
	real := "npm_" + strings.Repeat("R3al", 9)
	reg := newTLSRegistry(t)
	// The registry is reached by name (the test's certificate names
	// example.com), resolved by the proxy to the double.
	port := reg.port
	e.write("package.json", `{"name":"app","version":"1.0.0"}`)
	e.write(".npmrc", fmt.Sprintf("registry=https://example.com:%d/\n//example.com:%d/:_authToken=${NPM_TOKEN}\ncafile=/etc/ssl/certs/ca-certificates.crt\n", port, port))
	masked, err := creds.MaskEnv([]string{"NPM_TOKEN=" + real, "PATH=/usr/bin:/bin", "HOME=" + e.home, "npm_config_cache=/tmp/npm-cache"},
		creds.Config{Vars: map[string]creds.VarConfig{"NPM_TOKEN": {Hosts: []string{"example.com"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ex := reg.executor(e)
	spec := e.spec(t, "npm install --no-audit --no-fund --fetch-retries=0 sbx-dep 2>&1 && node -e 'console.log(require(\"sbx-dep\"))' && echo \"seen: $NPM_TOKEN\"", "example.com", fmt.Sprintf("127.0.0.1:%d", port))
	spec.Env, spec.Secrets = masked.Env, masked.Secrets
	var out bytes.Buffer
	res, err := ex.Run(context.Background(), spec, pipeline.Stdio{Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(out.String(), "from the registry double") {
		t.Fatalf("npm install: exit %d:\n%s", res.ExitCode, out.String())
	}
	if strings.Contains(out.String(), real) {
		t.Errorf("the real token reached the sandbox: %s", out.String())
	}
	if auth := reg.auths(); len(auth) == 0 || auth[0] != "Bearer "+real {
		t.Errorf("the registry got %q, want the real token", auth)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "node_modules", "sbx-dep", "index.js")); err != nil {
		t.Errorf("not installed on the host: %v", err)
	}
}

// tlsRegistry is the registry double over TLS, reached by name
// (example.com, which its certificate names), keeping every Authorization
// header it gets.
type tlsRegistry struct {
	srv  *httptest.Server
	port int
	mu   sync.Mutex
	auth []string
}

func newTLSRegistry(t *testing.T) *tlsRegistry {
	r := &tlsRegistry{}
	r.srv = httptest.NewTLSServer(registryDouble(t, func(req *http.Request) {
		r.mu.Lock()
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		r.mu.Unlock()
	}, func() string { return strings.Replace(r.srv.URL, "127.0.0.1", "example.com", 1) }))
	t.Cleanup(r.srv.Close)
	r.port = r.srv.Listener.Addr().(*net.TCPAddr).Port
	return r
}

func (r *tlsRegistry) auths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.auth)
}

// executor trusts the double and resolves every name to it.
func (r *tlsRegistry) executor(e *env) *linux.Executor {
	ex := e.executor()
	ex.UpstreamRoots = x509.NewCertPool()
	ex.UpstreamRoots.AddCert(r.srv.Certificate())
	ex.Resolve = func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return ex
}

// registryDouble serves one npm package, sbx-dep 1.0.0, its tarball at
// base()/sbx-dep/-/sbx-dep-1.0.0.tgz; seen, when set, is told of every
// request.
func registryDouble(t *testing.T, seen func(*http.Request), base func() string) http.Handler {
	tgz := packageTarball(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen != nil {
			seen(r)
		}
		switch {
		case strings.HasSuffix(r.URL.Path, ".tgz"):
			w.Write(tgz)
		case r.URL.Path == "/sbx-dep":
			sum, sha := sha512.Sum512(tgz), sha1.Sum(tgz)
			json.NewEncoder(w).Encode(map[string]any{"name": "sbx-dep", "dist-tags": map[string]string{"latest": "1.0.0"},
				"versions": map[string]any{"1.0.0": map[string]any{"name": "sbx-dep", "version": "1.0.0", "dist": map[string]string{
					"tarball": base() + "/sbx-dep/-/sbx-dep-1.0.0.tgz", "shasum": hex.EncodeToString(sha[:]),
					"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:])}}}})
		default:
			http.NotFound(w, r)
		}
	})
}

// hostDouble serves h on the host's loopback for the test's duration and
// returns its address as the sandbox names it (host.sbx.internal:PORT).
func hostDouble(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return fmt.Sprintf("host.sbx.internal:%d", srv.Listener.Addr().(*net.TCPAddr).Port)
}

// npmProject serves the npm registry double on the host's loopback and
// makes the workspace an npm project using it; it returns the registry's
// host as the sandbox names it.
func (e *env) npmProject(t *testing.T) string {
	var reg string
	host := hostDouble(t, registryDouble(t, nil, func() string { return reg }))
	reg = "http://" + host
	e.write("package.json", `{"name":"app","version":"1.0.0"}`)
	e.write(".npmrc", "registry="+reg+"/\n")
	return host
}

// packageTarball is an npm package: package/package.json and index.js.
func packageTarball(t *testing.T) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range map[string]string{
		"package/package.json": `{"name":"sbx-dep","version":"1.0.0","main":"index.js"}`,
		"package/index.js":     `module.exports = "from the registry double";`,
	} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// What the proxy refused is named at the end of the run and in the
// tool_result, with the reason and the fix.
func TestBlockedHostsNamed(t *testing.T) {
	requireCurl(t)
	e := newEnv(t)
	r := e.sh("curl -sS -m 5 https://blocked.example.test/ -o /dev/null; true")
	if !strings.Contains(r.stderr, "sbx: blocked blocked.example.test:443 (") || !strings.Contains(r.stderr, "--allow-domain") {
		t.Errorf("sbx run stderr: %q", r.stderr)
	}
	r = e.tool(`{"type":"tool_use","id":"b1","name":"Bash","input":{"command":"curl -sS -m 5 http://blocked.example.test/ -o /dev/null; true"}}`)
	if !strings.Contains(r.stdout, "[sbx: blocked blocked.example.test:80 (") {
		t.Errorf("tool_result: %s", r.stdout)
	}
}

// Toolchains work with zero configuration: npm installs from a registry
// double (plain HTTP, allowed by rule) with no cache variable set, and Go
// builds, each into the sandbox's own cache for the workspace under
// ~/.cache/sbx/projects; the host's own caches are untouched.
func TestToolchainCachesZeroConfig(t *testing.T) {
	requireTool(t, "npm")
	e := newEnv(t)
	host := e.npmProject(t)
	r := e.sh("npm install --no-audit --no-fund --fetch-retries=0 sbx-dep 2>&1 && node -e 'console.log(require(\"sbx-dep\"))'", "--allow-domain", host)
	if r.code != 0 || !strings.Contains(r.stdout, "from the registry double") {
		t.Fatalf("npm install: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "Unknown env config") {
		t.Errorf("a variable sbx sets makes npm warn: %s", r.stdout)
	}
	cache, _ := filepath.Glob(filepath.Join(e.home, ".cache", "sbx", "projects", "ws-*"))
	if len(cache) != 1 {
		t.Fatalf("the sandbox's caches for this workspace: %v", cache)
	}
	if ents, _ := os.ReadDir(filepath.Join(cache[0], "npm")); len(ents) == 0 {
		t.Error("the sandbox's npm cache is empty")
	}
	assertAbsent(t, filepath.Join(e.home, ".npm"))
	if gobin, err := exec.LookPath("go"); err == nil {
		e.write("go.mod", "module m\ngo 1.22\n")
		e.write("m.go", "package main\nfunc main() { println(\"built\") }\n")
		r = e.sh(gobin+" build -o m . && ./m", "--max-disk", "none")
		if r.code != 0 || !strings.Contains(r.stderr, "built") {
			t.Errorf("go build: exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		if ents, _ := os.ReadDir(filepath.Join(cache[0], "xdg", "go-build")); len(ents) == 0 {
			t.Error("the sandbox's Go build cache is empty")
		}
	}
}

// ~/.npmrc is masked, not hidden: the sandbox sees its registry= and the
// token's placeholder, npm installs with it through the proxy, and the
// registry gets the real token, which never reaches the sandbox. The same
// with a user name and a password (npm's _password is its base64: npm
// decodes the placeholder and sends it in Basic credentials the proxy
// decodes to swap).
func TestMaskedNpmrcWithBoundToken(t *testing.T) {
	real := "npm_" + strings.Repeat("Fi1e", 9)
	t.Run("token", func(t *testing.T) {
		maskedNpmrc(t, func(port int) string {
			return fmt.Sprintf("registry=https://example.com:%d/\n//example.com:%d/:_authToken=%s\n", port, port, real)
		}, "_authToken=npm_", "Bearer "+real, real)
	})
	pass := "hunter2-" + strings.Repeat("Pw", 8)
	t.Run("password", func(t *testing.T) {
		maskedNpmrc(t, func(port int) string {
			return fmt.Sprintf("registry=https://example.com:%d/\n//example.com:%d/:username=me\n//example.com:%d/:_password=%s\n",
				port, port, port, base64.StdEncoding.EncodeToString([]byte(pass)))
		}, ":_password=", "Basic "+base64.StdEncoding.EncodeToString([]byte("me:"+pass)), pass)
	})
}

func maskedNpmrc(t *testing.T, npmrcFor func(port int) string, seen, wantAuth, real string) {
	requireTool(t, "npm")
	e := newEnv(t)
	reg := newTLSRegistry(t)
	port := reg.port
	npmrc := npmrcFor(port)
	if err := os.WriteFile(filepath.Join(e.home, ".npmrc"), []byte(npmrc), 0o600); err != nil {
		t.Fatal(err)
	}
	e.write("package.json", `{"name":"app","version":"1.0.0"}`)
	ex := reg.executor(e)
	s, err := session.Open(session.Options{Dir: e.ws, Home: e.home, Executor: ex,
		Environ: []string{"PATH=/usr/bin:/bin", "HOME=" + e.home},
		Net:     pipeline.NetFlags{AllowDomain: []string{"example.com", fmt.Sprintf("127.0.0.1:%d", port)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out bytes.Buffer
	res, err := s.Run(context.Background(), session.Command{Shell: "cat ~/.npmrc; npm install --no-audit --no-fund --fetch-retries=0 sbx-dep 2>&1"},
		pipeline.Stdio{Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(out.String(), fmt.Sprintf("registry=https://example.com:%d/", port)) {
		t.Fatalf("exit %d:\n%s", res.ExitCode, out.String())
	}
	if strings.Contains(out.String(), real) || strings.Contains(out.String(), base64.StdEncoding.EncodeToString([]byte(real))) || !strings.Contains(out.String(), seen) {
		t.Errorf("the sandbox's ~/.npmrc is not the masked one:\n%s", out.String())
	}
	if auth := reg.auths(); len(auth) == 0 || auth[0] != wantAuth {
		t.Errorf("the registry got %q, want %q", auth, wantAuth)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "node_modules", "sbx-dep", "index.js")); err != nil {
		t.Errorf("not installed on the host: %v", err)
	}
}

// One project's sandbox cannot reach another project's toolchain cache: a
// poisoned entry stays in the project that made it.
func TestToolchainCachePerProject(t *testing.T) {
	a, b := newEnv(t), newEnv(t)
	b.home = a.home
	if r := a.sh("mkdir -p $XDG_CACHE_HOME $GOMODCACHE && echo planted > $XDG_CACHE_HOME/marker && echo planted > $GOMODCACHE/marker"); r.code != 0 {
		t.Fatalf("%d %s", r.code, r.stderr)
	}
	r := b.sh("cat $XDG_CACHE_HOME/marker $GOMODCACHE/marker 2>&1; true")
	if strings.Contains(r.stdout, "planted") {
		t.Errorf("another project's sandbox read the cache: %q", r.stdout)
	}
}

// pnpm installs from a registry with no flag but the registry's domain: its
// content-addressed store is the sandbox's own per project
// (PNPM_HOME/store), the package lands in the workspace, and the
// host's own pnpm store is untouched.
func TestPnpmZeroConfig(t *testing.T) {
	requireTool(t, "pnpm")
	pnpm, _ := exec.LookPath("pnpm")
	e := newEnv(t)
	host := e.npmProject(t)
	// pnpm's installer sets PNPM_HOME for the user: its store there is
	// read-only in the sandbox, which uses its own.
	os.MkdirAll(filepath.Join(e.home, ".local/share/pnpm"), 0o755)
	r := e.sbxEnv([]string{"PNPM_HOME=" + filepath.Join(e.home, ".local/share/pnpm")}, "run", "--allow-domain", host, "-c",
		"export PATH="+filepath.Dir(pnpm)+":$PATH; pnpm add sbx-dep 2>&1 && node -e 'console.log(require(\"sbx-dep\"))'")
	if r.code != 0 || !strings.Contains(r.stdout, "from the registry double") {
		t.Fatalf("pnpm add: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	store, _ := filepath.Glob(filepath.Join(e.home, ".cache", "sbx", "projects", "ws-*", "pnpm", "store", "*"))
	if len(store) == 0 {
		t.Error("the sandbox's pnpm store is empty")
	}
	if b, err := os.ReadFile(filepath.Join(e.ws, "node_modules", "sbx-dep", "index.js")); err != nil || !strings.Contains(string(b), "registry double") {
		t.Errorf("not installed on the host: %v", err)
	}
	for _, p := range []string{".local/share/pnpm/store", ".pnpm-store", ".cache/pnpm"} {
		assertAbsent(t, filepath.Join(e.home, p))
	}
}
