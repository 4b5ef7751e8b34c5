package linux

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const stubRestrictEnv = "SBX_TEST_STUB_RESTRICT"

// The limits stub's read rules (restrictEveryThread, as RlimitExec
// applies them) hold on every thread of the stub, not only on the one
// that applied them: the command runs under them whichever thread execs
// it. TestStubRestrictHelper applies them as the stub does and reads a
// hidden file from several other threads, made before and after. (With
// restrictSelf in its place, each of those threads reads it.)
func TestStubReadRulesHoldOnEveryThread(t *testing.T) {
	requireLandlock(t)
	d := t.TempDir()
	mkfile(t, filepath.Join(d, "home/.netrc"), "SECRET")
	mkfile(t, filepath.Join(d, "home/plain"), "x")
	spec := InitSpec{Writable: []string{filepath.Join(d, "w")}, Hidden: []string{filepath.Join(d, "home/.netrc")}}
	b, _ := json.Marshal(spec)
	cmd := exec.Command(noCgoTestBinary(t), "-test.run=^TestStubRestrictHelper$")
	cmd.Env = append(os.Environ(), stubRestrictEnv+"="+string(b))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	var restricted string
	others := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "restricted":
			restricted = f[1]
		case len(f) == 4 && f[0] == "thread":
			if f[1] != restricted {
				others++
			}
			if f[2] != "denied" || f[3] != "readable" {
				t.Errorf("thread %s (restricted: %s): the hidden file %s, a plain one %s", f[1], restricted, f[2], f[3])
			}
		}
	}
	if restricted == "" || others < 2 {
		t.Fatalf("the helper read from %d threads other than %q:\n%s", others, restricted, out)
	}
}

// noCgoTestBinary is this package's test binary, built without cgo when
// this one has it (-race): AllThreadsSyscall, which the stub uses, works
// only without it (as sbx and sbx-inner are built).
func noCgoTestBinary(t *testing.T) string {
	if _, _, errno := syscall.AllThreadsSyscall(syscall.SYS_GETPID, 0, 0, 0); errno != syscall.ENOTSUP {
		return os.Args[0]
	}
	bin := filepath.Join(t.TempDir(), "linux.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test binary without cgo: %v\n%s", err, out)
	}
	return bin
}

// TestStubRestrictHelper is TestStubReadRulesHoldOnEveryThread's
// restricted process.
func TestStubRestrictHelper(t *testing.T) {
	spec := helperSpec(t, stubRestrictEnv, "TestStubReadRulesHoldOnEveryThread")
	// The stub starts with no_new_privs on every thread (inherited).
	if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); errno != 0 {
		t.Fatal(errno)
	}
	abi, err := LandlockABI()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := readRuleset(abi, &spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Threads that exist before the rules, each held by a goroutine that
	// reads when asked.
	started := make(chan chan chan string)
	for range 3 {
		go func() {
			runtime.LockOSThread()
			req := make(chan chan string)
			started <- req
			(<-req) <- tryRead(spec)
		}()
	}
	var early []chan chan string
	for range 3 {
		early = append(early, <-started)
	}
	runtime.LockOSThread()
	if err := restrictEveryThread(fd); err != nil {
		t.Fatal(err)
	}
	fmt.Println("restricted", unix.Gettid())
	for _, req := range early {
		reply := make(chan string)
		req <- reply
		fmt.Println(<-reply)
	}
	// And threads made after.
	for range 3 {
		res := make(chan string)
		go func() {
			runtime.LockOSThread()
			res <- tryRead(spec)
		}()
		fmt.Println(<-res)
	}
}

// tryRead reads, from the calling thread, the spec's hidden file and a
// plain file beside it: "thread TID denied|read readable|unreadable".
func tryRead(spec InitSpec) string {
	hidden := spec.Hidden[0]
	h, p := "read", "readable"
	if _, err := os.ReadFile(hidden); err != nil {
		h = "denied"
	}
	if _, err := os.ReadFile(filepath.Join(filepath.Dir(hidden), "plain")); err != nil {
		p = "unreadable"
	}
	return fmt.Sprintf("thread %d %s %s", unix.Gettid(), h, p)
}
