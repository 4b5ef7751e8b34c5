//go:build linux

package integration

import (
	"strings"
	"testing"
)

// The sbx the README builds (scripts/build) runs its helper and the
// sandbox's init from the sbx-inner it embeds, through a sealed memfd
// that the command never holds.
func TestSandboxRunsFromTheEmbeddedInner(t *testing.T) {
	e := newEnv(t)
	r := e.sbx("run", "--debug", "--", "sh", "-c", `tr '\0' ' ' </proc/1/cmdline; echo; ls -l /proc/self/fd/`)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "the helper and the init are sbx itself") {
		t.Errorf("the embedded sbx-inner was not used:\n%s", r.stderr)
	}
	init, fds, _ := strings.Cut(r.stdout, "\n")
	if !strings.HasPrefix(init, "/proc/self/fd/") || !strings.Contains(init, " __sbx_init") {
		t.Errorf("the init is %q, want sbx-inner run from bubblewrap's descriptor", init)
	}
	if strings.Contains(fds, "memfd") || strings.Contains(fds, "sbx") {
		t.Errorf("the command holds a descriptor of sbx's:\n%s", fds)
	}
}

// A policy that hides a path in /proc (here the init's own) leaves no
// /proc/self/fd for bubblewrap to run the init from: it runs from sbx's
// path, and the command runs all the same.
func TestInitRunsWithAPathOfProcHidden(t *testing.T) {
	e := newEnv(t)
	for _, hidden := range []string{"/proc/1", "/proc/1/fd"} {
		r := e.sbx("run", "--deny-read", hidden, "--", "echo", "ran")
		if r.code != 0 || !strings.Contains(r.stdout, "ran") {
			t.Errorf("--deny-read %s: exit %d\n%s\n%s", hidden, r.code, r.stdout, r.stderr)
		}
	}
}
