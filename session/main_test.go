package session_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/sbx-sandbox/sbx/internal/sbxtest"
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
	bin, dir, err := sbxtest.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "building sbx:", err)
		os.Exit(1)
	}
	sbxBinary = bin
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
