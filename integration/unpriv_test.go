//go:build linux

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUnprivilegedCaller runs sbx as a user other than root (nobody): the
// sandbox, its read-only binds and the disk budget must work without any
// privilege on the host.
func TestUnprivilegedCaller(t *testing.T) {
	requireSandbox(t)
	if os.Getuid() != 0 {
		t.Skip("already unprivileged: every other test covers it")
	}
	const nobody = 65534
	root, err := os.MkdirTemp("", "sbx-it-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	bin := filepath.Join(root, "sbx")
	data, err := os.ReadFile(sbxBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	home, ws := filepath.Join(root, "home"), filepath.Join(root, "ws")
	for _, d := range []string{home, ws} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = ws
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := run("run", "--mode", "bypassPermissions", "-c", `id -u; echo plain > plain.txt; echo evil > .bashrc`); code == 0 || !strings.HasPrefix(out, "65534\n") {
		t.Errorf("plain run as nobody: exit %d, output:\n%s", code, out)
	}
	assertContent(t, filepath.Join(ws, "plain.txt"), "plain\n")
	assertAbsent(t, filepath.Join(ws, ".bashrc"))
	out, code := run("run", "--max-disk", "1M", "-c", `echo disk > disk.txt; head -c 2097152 /dev/zero > big`)
	if code == 0 || !strings.Contains(out, "disk budget is spent") {
		t.Errorf("disk budget as nobody: exit %d, output:\n%s", code, out)
	}
	assertContent(t, filepath.Join(ws, "disk.txt"), "disk\n")
	if st, err := os.Stat(filepath.Join(ws, "disk.txt")); err == nil && st.Sys().(*syscall.Stat_t).Uid != nobody {
		t.Errorf("disk.txt owned by uid %d, want %d", st.Sys().(*syscall.Stat_t).Uid, nobody)
	}
}
