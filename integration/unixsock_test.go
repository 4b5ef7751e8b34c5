//go:build linux

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sbx-sandbox/sbx/pipeline"
	"golang.org/x/sys/unix"
)

// hostListener is a Unix stream socket on the host that counts the
// connections it accepts and answers each with "host".
type hostListener struct {
	path     string
	accepted *atomic.Int32
}

func listenOnHost(t *testing.T, dir, name string) *hostListener {
	t.Helper()
	path := filepath.Join(dir, name)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	os.Chmod(path, 0o777)
	return &hostListener{path: path, accepted: countAccepts(ln, []byte("host"))}
}

// hostDir makes a directory under parent that the sandbox can see and
// the test removes; parent is outside /tmp unless the test needs the
// host's /tmp (the sandbox's is private).
func hostDir(t *testing.T, parent, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	return dir
}

// unixClientScript tries every way the issue named to reach a host
// socket, and the sockets of the sandbox's own; it prints one line per
// attempt: "<name> ok <reply>" or "<name> err <errno>".
const unixClientScript = `import os, socket, sys
allowed, other = sys.argv[1], sys.argv[2]
def attempt(name, f):
    try:
        print(name, "ok", f())
    except OSError as e:
        print(name, "err", e.errno)
def dial(path, kind=socket.SOCK_STREAM):
    c = socket.socket(socket.AF_UNIX, kind)
    c.connect(path)
    return c.recv(16).decode() or "-"
def serve(path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(8)
    return s
def echo(path):
    s = serve(path)
    c = socket.socket(socket.AF_UNIX)
    c.connect(path)
    a, _ = s.accept()
    a.send(b"inside")
    return c.recv(16).decode()
attempt("tmp", lambda: echo("/tmp/own.sock"))
attempt("workspace", lambda: echo("own.sock"))
attempt("abstract", lambda: echo("\0sbx-own"))
def cached():
    path = os.environ["XDG_CACHE_HOME"] + "/own.sock"
    if os.path.lexists(path):
        os.unlink(path)
    return echo(path)
attempt("cache", cached)
attempt("allowed", lambda: dial(allowed))
attempt("other", lambda: dial(other))
attempt("seqpacket", lambda: dial(other, socket.SOCK_SEQPACKET))
os.symlink(other, "/tmp/link.sock")
attempt("symlink", lambda: dial("/tmp/link.sock"))
fd = os.open(other, os.O_PATH)
attempt("procfd", lambda: dial("/proc/self/fd/%d" % fd))
cwd = os.getcwd()
os.chdir("/proc/self/fd")
attempt("procfd-relative", lambda: dial(str(fd)))
os.chdir(cwd)
attempt("relative", lambda: dial(os.path.relpath(other)))
from multiprocessing import Manager
def manager():
    with Manager() as m:
        d = m.dict()
        d["k"] = "v"
        return d["k"]
attempt("manager", manager)
`

// TestUnixSocketsInsideOnly: the command's own Unix sockets work (in /tmp,
// in the workspace, abstract, multiprocessing.Manager), but for those in
// the toolchain cache, a folder shared with the host; no connection
// reaches a host socket by any path trick, unless
// sandbox.network.allowUnixSockets names it, and then only that one. The
// host listeners count what they accept.
func TestUnixSocketsInsideOnly(t *testing.T) {
	e := newEnv(t)
	requireTool(t, "python3")
	dir := hostDir(t, "/var/tmp", "sbx-it-unix-")
	allowed, other := listenOnHost(t, dir, "allowed.sock"), listenOnHost(t, dir, "other.sock")
	e.write("client.py", unixClientScript)
	want := map[string]string{"tmp": "ok inside", "workspace": "ok inside", "abstract": "ok inside", "manager": "ok v", "cache": "err 1",
		"allowed": "err 1", "other": "err 1", "seqpacket": "err 1", "symlink": "err 1", "procfd": "err 1",
		"procfd-relative": "err 1", "relative": "err 1"}
	check := func(r result) {
		t.Helper()
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if name, rest, ok := strings.Cut(line, " "); ok {
				got[name] = rest
			}
		}
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%s: got %q, want %q\nstdout:\n%s\nstderr:\n%s", name, got[name], w, r.stdout, r.stderr)
			}
		}
	}
	check(e.sbx("run", "--", "python3", "client.py", allowed.path, other.path))
	if n := allowed.accepted.Load() + other.accepted.Load(); n != 0 {
		t.Fatalf("host sockets accepted %d connections from the sandbox", n)
	}
	// Allowed by its real path through a link: exactly that socket.
	link := filepath.Join(dir, "link-to-allowed.sock")
	if err := os.Symlink(allowed.path, link); err != nil {
		t.Fatal(err)
	}
	want["allowed"] = "ok host"
	r := e.sbx("run", "--settings", fmt.Sprintf(`{"sandbox":{"network":{"allowUnixSockets":[%q]}}}`, link),
		"--", "python3", "client.py", allowed.path, other.path)
	check(r)
	if n := allowed.accepted.Load(); n != 1 {
		t.Errorf("the allowed host socket accepted %d connections, want 1", n)
	}
	if n := other.accepted.Load(); n != 0 {
		t.Errorf("a host socket not allowed accepted %d connections", n)
	}
	if !strings.Contains(r.stderr, "sbx: connect to "+other.path+" refused") {
		t.Errorf("no notice names the refused socket:\n%s", r.stderr)
	}
}

// TestTmuxInside: tmux's server and client talk over a Unix socket in the
// sandbox's /tmp.
func TestTmuxInside(t *testing.T) {
	e := newEnv(t)
	requireTool(t, "tmux")
	r := e.sh(`tmux new-session -d -s t 'sleep 30' && tmux list-sessions -F '#{session_name}' && tmux kill-server`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "t" {
		t.Fatalf("tmux in the sandbox: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestNodeUnixServerInside: Node's net.listen on a path and a client of
// it, in the sandbox.
func TestNodeUnixServerInside(t *testing.T) {
	e := newEnv(t)
	requireTool(t, "node")
	r := e.sbx("run", "--", "node", "-e", `const net = require("net"); const p = "/tmp/n.sock";
const s = net.createServer(c => c.end("pong")).listen(p, () =>
  net.connect(p).on("data", d => { console.log(d.toString()); s.close(); }));`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "pong" {
		t.Fatalf("node: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestUnixSocketRaces: a command that changes the address, or the
// descriptor behind the number, while its connect is being decided
// reaches its own socket or nothing, never the host socket; and connects
// blocked on a full backlog hold up no other connect.
func TestUnixSocketRaces(t *testing.T) {
	e := newEnv(t)
	requireTool(t, "python3")
	dir := hostDir(t, "/var/tmp", "sbx-it-unixrace-")
	host := listenOnHost(t, dir, "host.sock")
	for _, f := range []string{"unixrace.py", "unixbacklog.py"} {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		e.write(f, string(data))
	}
	r := e.sbx("run", "--", "python3", "unixrace.py", host.path, "400")
	if r.code != 0 || !strings.Contains(r.stdout, "descriptor race connected 0") {
		t.Errorf("race script: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := host.accepted.Load(); n != 0 {
		t.Fatalf("the host socket accepted %d connections during the races", n)
	}
	r = e.sbx("run", "--timeout", "30s", "--", "python3", "unixbacklog.py")
	if r.code != 0 || !strings.Contains(r.stdout, "all done: True 5") {
		t.Errorf("backlog script: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestAllowedSocketCannotBeSwapped: an allowed host socket under a path
// the command can change (the sandbox's /tmp) is allowed by what it was
// when the run started: renaming its folder and putting a link to another
// host socket there reaches nothing.
func TestAllowedSocketCannotBeSwapped(t *testing.T) {
	e := newEnv(t)
	requireTool(t, "python3")
	tmpDir := hostDir(t, "/tmp", "sbx-it-allowed-")
	varDir := hostDir(t, "/var/tmp", "sbx-it-other-")
	allowed, other := listenOnHost(t, tmpDir, "X0"), listenOnHost(t, varDir, "other.sock")
	script := fmt.Sprintf(`import os, socket
os.rename(%[1]q, %[1]q + ".moved")
os.mkdir(%[1]q)
os.symlink(%[2]q, %[3]q)
for p in (%[3]q, %[2]q):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(p)
        print("connected", p)
    except OSError as e:
        print("refused", p, e.errno)
`, tmpDir, other.path, allowed.path)
	r := e.sbx("run", "--settings", fmt.Sprintf(`{"sandbox":{"network":{"allowUnixSockets":[%q]}}}`, allowed.path),
		"--", "python3", "-c", script)
	if n := other.accepted.Load(); n != 0 {
		t.Fatalf("a host socket that is not allowed accepted %d connections\nstdout:\n%s\nstderr:\n%s", n, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "connected") {
		t.Errorf("a connect succeeded:\n%s\n%s", r.stdout, r.stderr)
	}
}

// TestHostSocketAsStdinReachesNothing: a socket of the host's network
// namespace handed to the command as stdin cannot be connected to the
// host's abstract names.
func TestHostSocketAsStdinReachesNothing(t *testing.T) {
	e := newEnv(t)
	requireTool(t, "python3")
	name := fmt.Sprintf("@sbx-it-abstract-%d", os.Getpid())
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := countAccepts(ln, nil)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	stdin := os.NewFile(uintptr(fd), "host-socket")
	defer stdin.Close()
	script := fmt.Sprintf(`import socket
s = socket.socket(fileno=0)
try:
    s.connect("\0%s")
    print("connected")
except OSError as e:
    print("refused", e.errno)
`, name[1:])
	r := e.sbxIn(stdin, "run", "--", "python3", "-c", script)
	if n := accepted.Load(); n != 0 || !strings.Contains(r.stdout, "refused 1") {
		t.Errorf("host abstract socket accepted %d; stdout:\n%s\nstderr:\n%s", n, r.stdout, r.stderr)
	}
}

// TestWarmSandboxFollowsAnAllowedSocketLink: allowUnixSockets names a
// link, resolved when a warm sandbox is launched; the host re-points it
// to another daemon's socket before the call. The call reaches the new
// one only, as a fresh run would (before, the warm sandbox still let it
// reach the old socket and refused the new).
func TestWarmSandboxFollowsAnAllowedSocketLink(t *testing.T) {
	e := newEnv(t)
	requireTool(t, "python3")
	dir := hostDir(t, "/var/tmp", "sbx-it-unix-")
	old := listenOnHost(t, dir, "old.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "new.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	newAccepted := countAccepts(ln, []byte("new"))
	link := filepath.Join(dir, "daemon.sock")
	if err := os.Symlink(old.path, link); err != nil {
		t.Fatal(err)
	}
	dial := fmt.Sprintf(`python3 -c 'import socket,sys
for p in sys.argv[1:]:
    c = socket.socket(socket.AF_UNIX)
    try:
        c.connect(p); print(p, c.recv(8).decode())
    except OSError as e:
        print(p, "err", e.errno)' %s %s`, link, old.path)
	spec := func() *pipeline.Spec {
		s := e.toolSpec(t, dial)
		s.Platform.UnixSockets = []string{link}
		return s
	}
	ex := e.warmExecutor(t)
	ex.Prewarm(spec())
	if !ex.WaitWarm(context.Background()) {
		t.Fatal("Prewarm launched no warm sandbox")
	}
	tmp := link + ".tmp"
	if err := os.Symlink(filepath.Join(dir, "new.sock"), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
	out, code, _ := warmRun(t, ex, spec())
	if code != 0 || !strings.Contains(out, link+" new") || !strings.Contains(out, old.path+" err") {
		t.Errorf("after the link was re-pointed: exit %d\n%s", code, out)
	}
	if n := old.accepted.Load(); n != 0 {
		t.Errorf("the socket the link no longer names accepted %d connections", n)
	}
	if n := newAccepted.Load(); n != 1 {
		t.Errorf("the socket the link names now accepted %d connections, want 1", n)
	}
}
