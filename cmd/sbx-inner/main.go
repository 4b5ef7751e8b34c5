//go:build linux

// Command sbx-inner is the part of sbx that runs in a sandbox's namespaces:
// the transaction helper, the in-sandbox init and the limits stub. It is
// built with the sbxinner tag, which leaves out of package linux all that
// only sbx itself needs (the policy pipeline, the proxy), and embedded in
// sbx (the sbxembed tag): a process of it starts in about half the time of
// one of the whole sbx binary.
package main

import (
	"fmt"
	"os"

	_ "github.com/sbx-sandbox/sbx/internal/prefault"
	"github.com/sbx-sandbox/sbx/linux"
)

func main() {
	code, ok := linux.Inner(os.Args)
	if !ok {
		fmt.Fprintln(os.Stderr, "sbx-inner: run by sbx only")
		code = 2
	}
	os.Exit(code)
}
