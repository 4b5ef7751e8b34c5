//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// withoutLandlockEnv makes the test binary exec its arguments with the
// Landlock system calls failing with ENOSYS: a kernel built without it.
const withoutLandlockEnv = "SBX_WITHOUT_LANDLOCK"

// execWithoutLandlock installs, on this thread, a seccomp filter that
// answers landlock_create_ruleset, landlock_add_rule and
// landlock_restrict_self (444 to 446 on every architecture) with ENOSYS,
// then execs argv.
func execWithoutLandlock(argv []string) int {
	runtime.LockOSThread()
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, K: 444, Jt: 0, Jf: 2},
		{Code: unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K, K: 446, Jt: 1, Jf: 0},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail("no_new_privs", err)
	}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fail("seccomp", err)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fail("look up", err)
	}
	return fail("exec", unix.Exec(path, argv, os.Environ()))
}

func fail(what string, err error) int {
	os.Stderr.WriteString("without landlock: " + what + ": " + err.Error() + "\n")
	return 125
}

// TestInitOutOfReachWithoutLandlock: where Landlock does not scope the
// command, it runs as the init's user with no capabilities, and the init
// (outside the seccomp filter, answering its Unix socket checks, holding
// sbx's pipes) must still be out of its reach: no write to /proc/1/mem,
// no opening of the init's descriptors.
func TestInitOutOfReachWithoutLandlock(t *testing.T) {
	requireSandbox(t)
	without := func(args ...string) *exec.Cmd {
		c := exec.Command(os.Args[0], append([]string{sbxBin}, args...)...)
		c.Env = append(os.Environ(), withoutLandlockEnv+"=1")
		return c
	}
	out, _ := without("doctor").CombinedOutput()
	if !strings.Contains(string(out), "[no  ] landlock") {
		t.Fatalf("the wrapper did not take Landlock away; doctor says:\n%s", out)
	}
	ws := t.TempDir()
	script := `for fd in /proc/1/fd/*; do { :; } 3>"$fd" && echo "$fd" >> opened; done
{ :; } 3<>/proc/1/mem && echo /proc/1/mem >> opened
{ :; } 3<>/proc/self/mem && touch self-mem
exit 0`
	c := without("run", "-c", script)
	c.Dir = ws
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("sbx run: %v\n%s", err, out)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "opened")); err == nil {
		t.Errorf("the command opened the init's files for writing:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "self-mem")); err != nil {
		t.Errorf("control: the command could not open its own /proc/self/mem: %v", err)
	}
}
