//go:build linux

package integration

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// zipFile is a zip archive of files (name → content).
func zipFile(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// goProxyDouble serves one module, sbx.test/dep v1.0.0, over the GOPROXY
// protocol, counting zip downloads.
func goProxyDouble(t *testing.T, zips *atomic.Int32) http.Handler {
	const mod = "module sbx.test/dep\n\ngo 1.22\n"
	zipped := zipFile(t, map[string]string{
		"sbx.test/dep@v1.0.0/go.mod": mod,
		"sbx.test/dep@v1.0.0/dep.go": "package dep\n\nconst Hello = \"from the Go module proxy double\"\n",
	})
	info, _ := json.Marshal(map[string]string{"Version": "v1.0.0", "Time": "2024-01-01T00:00:00Z"})
	mux := http.NewServeMux()
	mux.HandleFunc("/sbx.test/dep/@v/list", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("v1.0.0\n")) })
	mux.HandleFunc("/sbx.test/dep/@latest", func(w http.ResponseWriter, r *http.Request) { w.Write(info) })
	mux.HandleFunc("/sbx.test/dep/@v/v1.0.0.info", func(w http.ResponseWriter, r *http.Request) { w.Write(info) })
	mux.HandleFunc("/sbx.test/dep/@v/v1.0.0.mod", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(mod)) })
	mux.HandleFunc("/sbx.test/dep/@v/v1.0.0.zip", func(w http.ResponseWriter, r *http.Request) {
		zips.Add(1)
		w.Write(zipped)
	})
	return mux
}

// go build downloads a module through a GOPROXY double with no flag but
// the proxy's domain: the module lands in the sandbox's own GOMODCACHE for
// the project, go.sum on the host, nothing in the host's Go caches; a
// second build downloads nothing.
func TestGoModuleProxyZeroConfig(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		if inCI() {
			t.Fatal("go not on PATH")
		}
		t.Skip("go not on PATH")
	}
	e := newEnv(t)
	var zips atomic.Int32
	host := hostDouble(t, goProxyDouble(t, &zips))
	e.write("go.mod", "module app\n\ngo 1.22\n\nrequire sbx.test/dep v1.0.0\n")
	e.write("main.go", "package main\n\nimport \"sbx.test/dep\"\n\nfunc main() { println(dep.Hello) }\n")
	script := "export GOPROXY=http://" + host + " GONOSUMDB=sbx.test GOFLAGS=-mod=mod GOTOOLCHAIN=local; " +
		gobin + " build -o app . && ./app"
	r := e.sh(script, "--allow-domain", host, "--max-disk", "none")
	if r.code != 0 || !strings.Contains(r.stderr, "from the Go module proxy double") {
		t.Fatalf("go build: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	mods, _ := filepath.Glob(filepath.Join(e.home, ".cache", "sbx", "projects", "ws-*", "go-mod", "sbx.test", "dep@v1.0.0", "dep.go"))
	if len(mods) != 1 {
		t.Errorf("the module is not in the sandbox's GOMODCACHE: %v", mods)
	}
	if sum := readFile(t, filepath.Join(e.ws, "go.sum")); !strings.Contains(sum, "sbx.test/dep v1.0.0 h1:") {
		t.Errorf("go.sum on the host:\n%s", sum)
	}
	assertAbsent(t, filepath.Join(e.home, "go"))
	os.Remove(filepath.Join(e.ws, "app"))
	if r = e.sh(script, "--allow-domain", host, "--max-disk", "none"); r.code != 0 || zips.Load() != 1 {
		t.Errorf("second build: exit %d, %d downloads (want 1: the cache kept)\n%s", r.code, zips.Load(), r.stderr)
	}
}

// pipIndexDouble serves one wheel, sbxdep 1.0.0, over PEP 503's simple
// index.
func pipIndexDouble(t *testing.T, wheels *atomic.Int32) http.Handler {
	const name = "sbxdep-1.0.0-py3-none-any.whl"
	files := map[string]string{
		"sbxdep/__init__.py":              "HELLO = \"from the pip index double\"\n",
		"sbxdep-1.0.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: sbxdep\nVersion: 1.0.0\n",
		"sbxdep-1.0.0.dist-info/WHEEL":    "Wheel-Version: 1.0\nGenerator: sbx-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	var record strings.Builder
	for f := range files {
		record.WriteString(f + ",,\n")
	}
	record.WriteString("sbxdep-1.0.0.dist-info/RECORD,,\n")
	files["sbxdep-1.0.0.dist-info/RECORD"] = record.String()
	wheel := zipFile(t, files)
	sum := sha256.Sum256(wheel)
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/sbxdep/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>\n", name, hex.EncodeToString(sum[:]), name)
	})
	mux.HandleFunc("/files/"+name, func(w http.ResponseWriter, r *http.Request) {
		wheels.Add(1)
		// As a package index serves files: cacheable for ever.
		w.Header().Set("Cache-Control", "max-age=365000000, immutable, public")
		w.Write(wheel)
	})
	return mux
}

// pip installs from a package index double with no flag but the index's
// domain: the wheel comes through the proxy into the workspace, pip's
// cache is the sandbox's own (a second install downloads nothing), and
// the host's pip cache is untouched.
func TestPipIndexZeroConfig(t *testing.T) {
	if err := exec.Command("python3", "-m", "pip", "--version").Run(); err != nil {
		if inCI() {
			t.Fatalf("python3 -m pip: %v", err)
		}
		t.Skipf("python3 -m pip: %v", err)
	}
	e := newEnv(t)
	var wheels atomic.Int32
	host := hostDouble(t, pipIndexDouble(t, &wheels))
	script := "export PIP_INDEX_URL=http://" + host + "/simple/ PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_TRUSTED_HOST=host.sbx.internal; rm -rf pylib; " +
		"python3 -m pip install -q --target pylib sbxdep 2>&1 && PYTHONPATH=pylib python3 -c 'import sbxdep; print(sbxdep.HELLO)'"
	r := e.sh(script, "--allow-domain", host)
	if r.code != 0 || !strings.Contains(r.stdout, "from the pip index double") {
		t.Fatalf("pip install: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	assertContent(t, filepath.Join(e.ws, "pylib", "sbxdep", "__init__.py"), "HELLO = \"from the pip index double\"\n")
	if cache, _ := filepath.Glob(filepath.Join(e.home, ".cache", "sbx", "projects", "ws-*", "xdg", "pip")); len(cache) != 1 {
		t.Errorf("pip's cache is not the sandbox's: %v", cache)
	}
	assertAbsent(t, filepath.Join(e.home, ".cache", "pip"))
	if r = e.sh(script, "--allow-domain", host); r.code != 0 || wheels.Load() != 1 {
		t.Errorf("second install: exit %d, %d downloads (want 1: the cache kept)\n%s", r.code, wheels.Load(), r.stdout)
	}
}

// A 500 kB output mixing stdout and stderr keeps its order in the
// tool_result, with the middle cut to 30,000 characters: the head and the
// tail are the first and last lines, alternating as written.
func TestToolMixedOutputOrderAndCut(t *testing.T) {
	e := newEnv(t)
	cmd := `for i in $(seq 1 25000); do echo "out $i"; echo "err $i" >&2; done`
	in, _ := json.Marshal(map[string]any{"type": "tool_use", "id": "mix", "name": "Bash", "input": map[string]string{"command": cmd}})
	r := e.tool(string(in))
	var res struct{ Content string }
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%q: %v", r.stdout, err)
	}
	c := res.Content
	if n := len([]rune(c)); n > 30000+200 || !strings.Contains(c, "characters cut") && !strings.Contains(c, "output cut") {
		t.Fatalf("%d characters, no cut note: %q … %q", n, c[:60], c[len(c)-60:])
	}
	if !strings.HasPrefix(c, "out 1\nerr 1\nout 2\nerr 2\nout 3\nerr 3\n") || !strings.HasSuffix(c, "out 24999\nerr 24999\nout 25000\nerr 25000\n") {
		t.Errorf("order lost: %q … %q", c[:60], c[len(c)-60:])
	}
	// The note counts everything cut: the 500 kB less the 30,000 kept.
	var chars, bytes int
	if _, err := fmt.Sscanf(c[strings.Index(c, "... [")+5:], "%d characters cut, and %d bytes", &chars, &bytes); err != nil || chars+bytes < 400000 {
		t.Errorf("cut note: %v: %q", err, c[strings.Index(c, "... ["):strings.Index(c, "... [")+80])
	}
}
