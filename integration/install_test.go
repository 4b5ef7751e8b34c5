//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `go install` into an empty GOPATH: with cgo (the default where a C
// compiler exists) the build fails at compile time with the fix in the
// message; with CGO_ENABLED=0 the binary works. Modules come from the
// local module cache only (GOPROXY=off): no registry is reached.
func TestGoInstall(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	cache, err := exec.Command(gobin, "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs("..")
	install := func(cgo string) (string, string, error) {
		gopath := t.TempDir()
		cmd := exec.Command(gobin, "install", "./cmd/sbx")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOPATH="+gopath, "GOBIN="+filepath.Join(gopath, "bin"), "GOMODCACHE="+strings.TrimSpace(string(cache)),
			"GOPROXY=off", "GOFLAGS=-mod=mod")
		if cgo != "" {
			cmd.Env = append(cmd.Env, "CGO_ENABLED="+cgo)
		}
		out, err := cmd.CombinedOutput()
		return filepath.Join(gopath, "bin", "sbx"), string(out), err
	}
	if def, _ := exec.Command(gobin, "env", "CGO_ENABLED").Output(); strings.TrimSpace(string(def)) == "1" {
		if _, out, err := install(""); err == nil || !strings.Contains(out, "sbx_must_be_built_with_CGO_ENABLED_0") {
			t.Errorf("a cgo build was not refused at compile time: %v\n%s", err, out)
		}
	} else {
		t.Log("cgo is off by default here: the default build is the right one")
	}
	bin, out, err := install("0")
	if err != nil {
		t.Fatalf("CGO_ENABLED=0 go install: %v\n%s", err, out)
	}
	if v, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(v), "sbx ") {
		t.Errorf("the installed sbx: %v %q", err, v)
	}
}
