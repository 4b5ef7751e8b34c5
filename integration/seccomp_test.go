//go:build linux

package integration

import (
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestSeccompVictims runs a victim process in the sandbox for every
// blocked system call and checks the errno it got.
func TestSeccompVictims(t *testing.T) {
	e := newEnv(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	victimPath := filepath.Join(e.ws, "victim")
	if err := os.Link(self, victimPath); err != nil {
		data, rerr := os.ReadFile(self)
		if rerr != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(victimPath, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{
		"socket_unix_dgram": "EPERM", "socket_unix_raw": "EPERM", "socket_unix_highbits": "EPERM", "socket_packet": "EPERM",
		"socket_vsock": "EPERM", "socket_alg": "EPERM",
		"io_uring_setup": "EPERM", "io_uring_enter": "EPERM", "io_uring_register": "EPERM",
		"ptrace": "EPERM", "process_vm_readv": "EPERM", "process_vm_writev": "EPERM", "pidfd_getfd": "EPERM",
		"bpf": "EPERM", "perf_event_open": "EPERM", "userfaultfd": "EPERM",
		"keyctl": "EPERM", "add_key": "EPERM", "request_key": "EPERM",
		"mount": "EPERM", "umount2": "EPERM", "pivot_root": "EPERM", "move_mount": "EPERM",
		"open_tree": "EPERM", "fsopen": "EPERM", "fsconfig": "EPERM", "fsmount": "EPERM",
		"fspick": "EPERM", "mount_setattr": "EPERM",
		"unshare_user": "EPERM", "unshare_ns": "EPERM", "unshare_net": "EPERM",
		"clone_newuser": "EPERM", "clone_newpid": "EPERM", "clone3": "ENOSYS", "setns": "EPERM",
		"kexec_load": "EPERM", "kexec_file_load": "EPERM", "init_module": "EPERM",
		"finit_module": "EPERM", "delete_module": "EPERM",
		"ioctl_tiocsti": "EPERM", "ioctl_tioclinux": "EPERM",
		"fchmodat_suid": "EPERM", "fchmod_sgid": "EPERM", "fchmodat2_suid": "EPERM",
		"openat_creat_suid": "EPERM", "mknodat_suid": "EPERM", "openat2": "ENOSYS",
		"socketpair_unix_dgram": "EPERM", "socketpair_unix_raw": "EPERM", "socket_netlink_netfilter": "EPERM", "socket_netlink_highbits": "EPERM", "open_tree_attr": "EPERM",
		// Controls: what must keep working.
		"socket_inet": "OK", "socket_unix": "OK", "socketpair_unix": "OK", "fchmodat_plain": "OK", "openat_creat_plain": "OK",
		"socket_netlink_route": "OK", "socket_netlink_sockdiag": "OK",
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	r := e.sbx(append([]string{"run", "--", "./victim"}, names...)...)
	if r.code != 0 {
		t.Fatalf("victim exited %d: %s", r.code, r.stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if n, v, ok := strings.Cut(line, " "); ok {
			got[n] = v
		}
	}
	for _, n := range names {
		if got[n] != want[n] {
			t.Errorf("%s: got %q, want %s", n, got[n], want[n])
		}
	}
	// From outside: no file in the workspace is set-user-ID or
	// set-group-ID, and the refused creations left nothing.
	for _, f := range []string{"v-fchmodat", "v-fchmod", "v-fchmodat2", "v-plain", "v-open-plain"} {
		st, err := os.Stat(e.path(f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s is %v on the host", f, st.Mode())
		}
	}
	assertAbsent(t, e.path("v-open"))
	assertAbsent(t, e.path("v-mknod"))

	// The same calls outside the sandbox do not all fail with those errors:
	// the results above come from the sandbox, not from the host.
	if os.Geteuid() == 0 {
		out := victimOnHost(t, victimPath, "socket_unix_dgram", "io_uring_setup")
		if strings.Contains(out, "socket_unix_dgram EPERM") {
			t.Errorf("socket(AF_UNIX, SOCK_DGRAM) fails on the host too: %s", out)
		}
	}
}

// A datagram socket on the host, reachable by path from inside the sandbox
// (/var/tmp is the host's): no call path from inside delivers to it.
func TestHostDatagramSocketUnreachable(t *testing.T) {
	e := newEnv(t)
	requireTool(t, "python3")
	dir := hostDir(t, "/var/tmp", "sbx-it-dgram-")
	path := filepath.Join(dir, "recv.sock")
	recv, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	os.Chmod(path, 0o777)
	got := make(chan string, 16)
	go func() {
		buf := make([]byte, 512)
		for {
			n, _, err := recv.ReadFromUnix(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
		}
	}()
	// Every constructor of a Unix socket the command may try, and every
	// way to send to a path: datagram and raw (a datagram socket for
	// AF_UNIX) pairs and sockets are refused; stream and seqpacket
	// sockets ignore or refuse an address on send, and their connect to a
	// host socket is refused by the supervisor.
	script := `import socket
U = socket.AF_UNIX
ctors = [("socketpair", lambda: socket.socketpair(U, socket.SOCK_DGRAM)[0]),
         ("socketpair-raw", lambda: socket.socketpair(U, socket.SOCK_RAW)[0]),
         ("socketpair-seqpacket", lambda: socket.socketpair(U, socket.SOCK_SEQPACKET)[0]),
         ("socketpair-stream", lambda: socket.socketpair(U, socket.SOCK_STREAM)[0]),
         ("socket", lambda: socket.socket(U, socket.SOCK_DGRAM)),
         ("socket-raw", lambda: socket.socket(U, socket.SOCK_RAW)),
         ("socket-seqpacket", lambda: socket.socket(U, socket.SOCK_SEQPACKET)),
         ("socket-stream", lambda: socket.socket(U, socket.SOCK_STREAM))]
for kind, f in ctors:
    try:
        s = f()
    except OSError as e:
        print(kind, "refused", e.errno)
        continue
    for how in ("sendto", "sendmsg", "connect"):
        try:
            if how == "sendto":
                s.sendto(b"leak-" + how.encode(), "` + path + `")
            elif how == "sendmsg":
                s.sendmsg([b"leak-" + how.encode()], [], 0, "` + path + `")
            else:
                s.connect("` + path + `")
                s.send(b"leak-connect")
            print(kind, how, "sent")
        except OSError as e:
            print(kind, how, "refused", e.errno)
`
	r := e.sbx("run", "--", "python3", "-c", script)
	time.Sleep(200 * time.Millisecond)
	select {
	case m := <-got:
		t.Errorf("the host socket received %q from the sandbox (%s)", m, r.stdout)
	default:
	}
	for _, want := range []string{"socketpair refused 1", "socketpair-raw refused 1", "socket refused 1", "socket-raw refused 1",
		"socket-stream connect refused", "socket-seqpacket connect refused", "socket-seqpacket sendto refused"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s\n%s", want, r.stdout, r.stderr)
		}
	}
}
