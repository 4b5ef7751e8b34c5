//go:build linux

package linux

import (
	"context"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestBwrapVersion(t *testing.T) {
	for _, tc := range []struct {
		out    string
		ok     bool
		detail string
	}{
		{"bubblewrap 0.4.1", false, "needs 0.5.0"},
		{"bubblewrap 0.5.0", true, "needs 0.7.0"},
		{"bubblewrap 0.6.1", true, "needs 0.7.0"},
		{"bubblewrap 0.8.0", true, "(bubblewrap 0.8.0)"},
		{"bubblewrap 1.0.0", true, "(bubblewrap 1.0.0)"},
		{"something else", false, "unrecognised"},
	} {
		c := bwrapVersion(Check{Name: "bubblewrap"}, "/usr/bin/bwrap", tc.out)
		if c.OK != tc.ok || !strings.Contains(c.Detail, tc.detail) || (!c.OK && c.Fix == "") {
			t.Errorf("%q: %+v", tc.out, c)
		}
	}
}

func TestSandboxFix(t *testing.T) {
	for _, tc := range []struct {
		msg       string
		container bool
		want      string
	}{
		{"linux: run directory: mkdir /home/u/.local/state/sbx/runs: read-only file system", false, "XDG_STATE_HOME"},
		{"bwrap: Can't mount proc on /newroot/proc: Operation not permitted", true, "systempaths=unconfined"},
		{"bwrap: setting up uid map: Permission denied", false, "user namespace check"},
		{"bwrap: Creating new namespace failed: Operation not permitted", true, "seccomp=unconfined"},
		{"something else", false, "sbx doctor --json"},
		{"mkdir /home/u/.local/state: permission denied", true, "not writable by you: check HOME and XDG_STATE_HOME"},
		{"sandbox unavailable: the writable roots cannot be made transactional here: overlay over /w: invalid argument", true, "transactional writes check above"},
	} {
		if got := sandboxFix(tc.msg, tc.container); !strings.Contains(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.msg, got, tc.want)
		}
	}
	// An overlay refused: not Docker's profiles, so not their options.
	if got := sandboxFix("the writable roots cannot be made transactional here: overlay over /w: invalid argument", true); strings.Contains(got, "seccomp=unconfined") {
		t.Errorf("staging failure sent to Docker's options: %q", got)
	}
}

// A state directory on overlayfs (a container's root) gets the volume fix;
// elsewhere the kernel and file system requirements.
func TestStagingFix(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	want := "5.11 or later"
	if st.Type == overlayfsMagic {
		want = "docker run -v sbx-state:" + dir
	}
	if got := stagingFix(dir); !strings.Contains(got, want) {
		t.Errorf("on this host's file system (type %#x): %q, want %q", st.Type, got, want)
	}
	if got := stagingFix(""); !strings.Contains(got, "not on overlayfs") {
		t.Errorf("without a state directory: %q", got)
	}
}

// A state directory sbx cannot make is named as the cause, with its fix
// (not the user-namespace advice of a helper that did not start).
func TestCheckTxStateDirNotWritable(t *testing.T) {
	c := checkTx(context.Background(), "/nonexistent/sbx", "/proc/sbx-test/state")
	if c.OK || !strings.Contains(c.Detail, "state directory") || !strings.Contains(c.Fix, "XDG_STATE_HOME") {
		t.Errorf("%+v", c)
	}
}
