package session_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sbx-sandbox/sbx/session"
)

// sbxBinary is an sbx built with CGO_ENABLED=0 for the sandbox's init: this
// test binary may be built with cgo (go test -race), which the init cannot
// be.
var sbxBinary string

func TestMain(m *testing.M) {
	session.Reexec()
	if runtime.GOOS != "linux" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "sbx-session-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sbxBinary = filepath.Join(dir, "sbx")
	build := exec.Command("go", "build", "-o", sbxBinary, "../cmd/sbx")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building sbx:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
