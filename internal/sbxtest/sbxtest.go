// Package sbxtest builds the sbx binary for tests that run real sandboxes.
package sbxtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Build builds ./cmd/sbx (found from this file's module root) with
// CGO_ENABLED=0, as the sandbox's init needs, into a new temporary
// directory; remove the directory when done. Build output goes to stderr.
func Build() (bin, dir string, err error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if dir, err = os.MkdirTemp("", "sbx-test-bin-"); err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "sbx")
	// As the README builds it: with sbx-inner embedded.
	build := exec.Command(filepath.Join(root, "scripts", "build"), bin)
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", "", err
	}
	return bin, dir, nil
}
