package seccomp

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/bpf"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Return values of a seccomp program.
const (
	retAllow       = 0x7fff0000
	retKillProcess = 0x80000000
	retEPERM       = 0x00050000 | 1
	retENOSYS      = 0x00050000 | 38
	retNotify      = 0x7fc00000
)

// Audit architecture tokens and syscall numbers, per architecture, for the
// calls the table below uses.
var arches = map[string]struct {
	audit    uint32
	foreign  uint32
	syscalls map[string]uint32
}{
	"amd64": {0xc000003e, 0xc00000b7, map[string]uint32{
		"read": 0, "socket": 41, "socketpair": 53, "ioctl": 16, "clone": 56, "clone3": 435, "unshare": 272,
		"ptrace": 101, "mount": 165, "bpf": 321, "io_uring_setup": 425, "setns": 308, "keyctl": 250,
		"kexec_load": 246, "open_tree": 428, "userfaultfd": 323, "pidfd_getfd": 438,
		"chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "creat": 85, "mknod": 133, "mknodat": 259,
		"open": 2, "openat": 257, "openat2": 437, "connect": 42, "sendto": 44,
	}},
	"arm64": {0xc00000b7, 0xc000003e, map[string]uint32{
		"read": 63, "socket": 198, "socketpair": 199, "ioctl": 29, "clone": 220, "clone3": 435, "unshare": 97,
		"ptrace": 117, "mount": 40, "bpf": 280, "io_uring_setup": 425, "setns": 268, "keyctl": 219,
		"kexec_load": 104, "open_tree": 428, "userfaultfd": 282, "pidfd_getfd": 438,
		"fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "mknodat": 33, "openat": 56, "openat2": 437,
		"connect": 203, "sendto": 206,
	}},
}

// seccompData lays out struct seccomp_data for the x/net/bpf VM, which
// loads words big-endian: each 32-bit word is stored big-endian here with
// the value the kernel would load on a little-endian machine.
func seccompData(nr, arch uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32))
	}
	return b
}

func vm(t *testing.T, goarch string, variant Variant) *bpf.VM {
	t.Helper()
	prog, err := Program(goarch, variant)
	if err != nil {
		t.Fatal(err)
	}
	var ins []bpf.Instruction
	for _, p := range prog {
		ins = append(ins, bpf.RawInstruction{Op: p.Code, Jt: p.Jt, Jf: p.Jf, K: p.K}.Disassemble())
	}
	v, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestFilterDecisions(t *testing.T) {
	tests := []struct {
		name    string
		syscall string
		args    []uint64
		want    uint32
	}{
		{"read allowed", "read", nil, retAllow},
		{"socket AF_UNIX", "socket", []uint64{1, 1}, retEPERM},
		{"socket AF_UNIX high bits", "socket", []uint64{0x1_0000_0001, 1}, retEPERM},
		{"socket AF_UNSPEC", "socket", []uint64{0, 1}, retEPERM},
		{"socket AF_INET", "socket", []uint64{2, 1}, retAllow},
		{"socket AF_INET6", "socket", []uint64{10, 2}, retAllow},
		{"socket AF_NETLINK route", "socket", []uint64{16, 3, 0}, retAllow},
		{"socket AF_NETLINK sock_diag", "socket", []uint64{16, 3, 4}, retAllow},
		{"socket AF_NETLINK netfilter", "socket", []uint64{16, 3, 12}, retEPERM},
		{"socket AF_NETLINK audit", "socket", []uint64{16, 3, 9}, retEPERM},
		{"socket AF_NETLINK protocol high bits", "socket", []uint64{16, 3, 0x1_0000_0000}, retEPERM},
		{"socket AF_PACKET", "socket", []uint64{17, 3}, retEPERM},
		{"socket AF_VSOCK", "socket", []uint64{40, 1}, retEPERM},
		{"socket AF_INET high bits", "socket", []uint64{0x1_0000_0002, 1}, retEPERM},
		{"socket AF_ALG", "socket", []uint64{38, 5}, retEPERM},
		{"socketpair AF_UNIX allowed", "socketpair", []uint64{1, 1}, retAllow},
		{"socketpair AF_UNIX seqpacket", "socketpair", []uint64{1, 5}, retAllow},
		{"socketpair AF_UNIX dgram", "socketpair", []uint64{1, 2}, retEPERM},
		{"socketpair AF_UNIX dgram cloexec", "socketpair", []uint64{1, 2 | 0o2000000}, retEPERM},
		{"socketpair AF_UNIX raw (a datagram pair)", "socketpair", []uint64{1, 3}, retEPERM},
		{"socketpair AF_UNIX type 0", "socketpair", []uint64{1, 0}, retEPERM},
		{"socketpair AF_UNIX stream nonblock cloexec", "socketpair", []uint64{1, 1 | 0o4000 | 0o2000000}, retAllow},
		{"connect allowed", "connect", nil, retAllow},
		{"ioctl TIOCSTI", "ioctl", []uint64{0, 0x5412}, retEPERM},
		{"ioctl TIOCSTI high bits", "ioctl", []uint64{0, 0xdead_0000_5412}, retEPERM},
		{"ioctl TIOCLINUX", "ioctl", []uint64{0, 0x541C}, retEPERM},
		{"ioctl TCGETS", "ioctl", []uint64{0, 0x5401}, retAllow},
		{"clone thread", "clone", []uint64{0x3d0f00}, retAllow},
		{"clone vfork", "clone", []uint64{0x4111}, retAllow},
		{"clone NEWUSER", "clone", []uint64{0x10000000 | 17}, retEPERM},
		{"clone NEWNS", "clone", []uint64{0x20000}, retEPERM},
		{"clone NEWTIME", "clone", []uint64{0x80}, retEPERM},
		{"unshare NEWNET", "unshare", []uint64{0x40000000}, retEPERM},
		{"unshare FILES", "unshare", []uint64{0x400}, retAllow},
		{"clone3", "clone3", nil, retENOSYS},
		{"ptrace", "ptrace", nil, retEPERM},
		{"mount", "mount", nil, retEPERM},
		{"open_tree", "open_tree", nil, retEPERM},
		{"bpf", "bpf", nil, retEPERM},
		{"io_uring_setup", "io_uring_setup", nil, retEPERM},
		{"setns", "setns", nil, retEPERM},
		{"keyctl", "keyctl", nil, retEPERM},
		{"kexec_load", "kexec_load", nil, retEPERM},
		{"userfaultfd", "userfaultfd", nil, retEPERM},
		{"pidfd_getfd", "pidfd_getfd", nil, retEPERM},
		{"fchmod 0755", "fchmod", []uint64{3, 0o755}, retAllow},
		{"fchmod 04755", "fchmod", []uint64{3, 0o4755}, retEPERM},
		{"fchmod 02755", "fchmod", []uint64{3, 0o2755}, retEPERM},
		{"fchmod sticky", "fchmod", []uint64{3, 0o1777}, retAllow},
		{"fchmodat 0644", "fchmodat", []uint64{0xffffff9c, 0, 0o644}, retAllow},
		{"fchmodat 04755", "fchmodat", []uint64{0xffffff9c, 0, 0o4755}, retEPERM},
		{"fchmodat2 0644", "fchmodat2", []uint64{0xffffff9c, 0, 0o644, 0x100}, retAllow},
		{"fchmodat2 06755", "fchmodat2", []uint64{0xffffff9c, 0, 0o6755, 0x100}, retEPERM},
		{"mknodat regular suid", "mknodat", []uint64{0xffffff9c, 0, 0o100000 | 0o4755, 0}, retEPERM},
		{"mknodat fifo", "mknodat", []uint64{0xffffff9c, 0, 0o10000 | 0o644, 0}, retAllow},
		{"openat O_CREAT 0644", "openat", []uint64{0xffffff9c, 0, 0o101, 0o644}, retAllow},
		{"openat O_CREAT 04755", "openat", []uint64{0xffffff9c, 0, 0o101, 0o4755}, retEPERM},
		{"openat O_TMPFILE 02755", "openat", []uint64{0xffffff9c, 0, 0o20200002, 0o2755}, retEPERM},
		{"openat read, mode bits ignored", "openat", []uint64{0xffffff9c, 0, 0, 0o4755}, retAllow},
		{"openat2", "openat2", nil, retENOSYS},
	}
	for goarch, a := range arches {
		v := vm(t, goarch, Strict)
		for _, tt := range tests {
			t.Run(goarch+"/"+tt.name, func(t *testing.T) {
				nr, ok := a.syscalls[tt.syscall]
				if !ok {
					t.Fatalf("no number for %s", tt.syscall)
				}
				got, err := v.Run(seccompData(nr, a.audit, tt.args...))
				if err != nil {
					t.Fatal(err)
				}
				if uint32(got) != tt.want {
					t.Errorf("%s%v = %#x, want %#x", tt.syscall, tt.args, uint32(got), tt.want)
				}
			})
		}
		t.Run(goarch+"/foreign arch killed", func(t *testing.T) {
			got, _ := v.Run(seccompData(0, a.foreign))
			if uint32(got) != retKillProcess {
				t.Errorf("foreign arch = %#x, want kill", uint32(got))
			}
		})
	}
	for _, tt := range []struct {
		name    string
		syscall string
		args    []uint64
		want    uint32
	}{
		{"chmod 04755", "chmod", []uint64{0, 0o4755}, retEPERM},
		{"chmod 0755", "chmod", []uint64{0, 0o755}, retAllow},
		{"creat 02755", "creat", []uint64{0, 0o2755}, retEPERM},
		{"mknod suid", "mknod", []uint64{0, 0o100000 | 0o4755, 0}, retEPERM},
		{"open O_CREAT 04755", "open", []uint64{0, 0o101, 0o4755}, retEPERM},
		{"open O_CREAT 0644", "open", []uint64{0, 0o101, 0o644}, retAllow},
	} {
		t.Run("amd64/"+tt.name, func(t *testing.T) {
			a := arches["amd64"]
			got, _ := vm(t, "amd64", Strict).Run(seccompData(a.syscalls[tt.syscall], a.audit, tt.args...))
			if uint32(got) != tt.want {
				t.Errorf("%s%v = %#x, want %#x", tt.syscall, tt.args, uint32(got), tt.want)
			}
		})
	}
	// Calls newer than the rules: open_tree_attr refused, numbers above
	// it ENOSYS, in both programs of both architectures (arm64's rules by
	// number are inserted in front of what libseccomp builds).
	for _, goarch := range []string{"amd64", "arm64"} {
		for _, variant := range Variants {
			for _, tt := range []struct {
				nr   uint32
				want uint32
			}{{467, retEPERM}, {468, retENOSYS}, {500, retENOSYS}, {1023, retENOSYS}, {1024, retAllow}, {466, retAllow}} {
				t.Run(fmt.Sprintf("%s/%s/nr %d", goarch, variant, tt.nr), func(t *testing.T) {
					got, _ := vm(t, goarch, variant).Run(seccompData(tt.nr, arches[goarch].audit))
					if uint32(got) != tt.want {
						t.Errorf("syscall %d = %#x, want %#x", tt.nr, uint32(got), tt.want)
					}
				})
			}
		}
	}
	t.Run("amd64/x32 killed", func(t *testing.T) {
		got, _ := vm(t, "amd64", Strict).Run(seccompData(0x40000000|41, arches["amd64"].audit, 1))
		if uint32(got) != retKillProcess {
			t.Errorf("x32 socket = %#x, want kill", uint32(got))
		}
	})
}

// TestSupervisedDecisions: the Supervised program lets the command make
// Unix stream and seqpacket sockets, never datagram ones, and hands every
// connect to the supervisor; the rest is the Strict program's.
func TestSupervisedDecisions(t *testing.T) {
	tests := []struct {
		name    string
		syscall string
		args    []uint64
		want    uint32
	}{
		{"socket AF_UNIX stream", "socket", []uint64{1, 1}, retAllow},
		{"socket AF_UNIX stream cloexec nonblock", "socket", []uint64{1, 1 | 0o4000 | 0o2000000}, retAllow},
		{"socket AF_UNIX seqpacket", "socket", []uint64{1, 5}, retAllow},
		{"socket AF_UNIX dgram", "socket", []uint64{1, 2}, retEPERM},
		{"socket AF_UNIX raw (a datagram socket)", "socket", []uint64{1, 3}, retEPERM},
		{"socket AF_UNIX type 15", "socket", []uint64{1, 15}, retEPERM},
		{"socket AF_UNIX high bits", "socket", []uint64{0x1_0000_0001, 2}, retEPERM},
		{"socket AF_INET", "socket", []uint64{2, 1}, retAllow},
		{"socket AF_PACKET", "socket", []uint64{17, 3}, retEPERM},
		{"socket AF_UNSPEC", "socket", []uint64{0, 1}, retEPERM},
		{"socket AF_NETLINK netfilter", "socket", []uint64{16, 3, 12}, retEPERM},
		{"socketpair AF_UNIX dgram", "socketpair", []uint64{1, 2}, retEPERM},
		{"socketpair AF_UNIX raw", "socketpair", []uint64{1, 3}, retEPERM},
		{"socketpair AF_UNIX stream", "socketpair", []uint64{1, 1}, retAllow},
		{"connect notifies", "connect", nil, retNotify},
		{"sendto allowed (no address on a stream socket)", "sendto", nil, retAllow},
		{"ptrace", "ptrace", nil, retEPERM},
		{"io_uring_setup", "io_uring_setup", nil, retEPERM},
		{"clone NEWNET", "clone", []uint64{0x40000000}, retEPERM},
	}
	for goarch, a := range arches {
		v := vm(t, goarch, Supervised)
		for _, tt := range tests {
			t.Run(goarch+"/"+tt.name, func(t *testing.T) {
				got, err := v.Run(seccompData(a.syscalls[tt.syscall], a.audit, tt.args...))
				if err != nil {
					t.Fatal(err)
				}
				if uint32(got) != tt.want {
					t.Errorf("%s%v = %#x, want %#x", tt.syscall, tt.args, uint32(got), tt.want)
				}
			})
		}
		t.Run(goarch+"/foreign arch killed", func(t *testing.T) {
			if got, _ := v.Run(seccompData(a.syscalls["connect"], a.foreign)); uint32(got) != retKillProcess {
				t.Errorf("foreign arch = %#x, want kill", uint32(got))
			}
		})
	}
	t.Run("amd64/x32 connect killed", func(t *testing.T) {
		got, _ := vm(t, "amd64", Supervised).Run(seccompData(0x40000000|42, arches["amd64"].audit, 1))
		if uint32(got) != retKillProcess {
			t.Errorf("x32 connect = %#x, want kill", uint32(got))
		}
	})
}

func TestDisassemblyGolden(t *testing.T) {
	for _, p := range []struct {
		goarch string
		v      Variant
	}{{"amd64", Strict}, {"arm64", Strict}, {"amd64", Supervised}, {"arm64", Supervised}} {
		prog, err := Program(p.goarch, p.v)
		if err != nil {
			t.Fatal(err)
		}
		got := Disassemble(prog)
		name := p.goarch
		if p.v == Supervised {
			name += "_unix"
		}
		path := filepath.Join("testdata", name+".asm")
		if *update {
			os.WriteFile(path, []byte(got), 0o644)
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), got); diff != "" {
			t.Errorf("%s program changed (-want +got):\n%s", name, diff)
		}
	}
}

func TestNativeProgram(t *testing.T) {
	_, err := Native(Supervised)
	switch runtime.GOARCH {
	case "amd64", "arm64":
		if err != nil {
			t.Fatal(err)
		}
	default:
		if err == nil {
			t.Fatal("no error on an architecture without a filter")
		}
	}
}

func TestInsertByNumber(t *testing.T) {
	// ld arch; jne arch → kill; ld nr; jeq 1 → errno; ret allow; ret errno; ret kill
	prog := []Instruction{
		{Code: 0x20, K: 4},
		{Code: 0x15, Jt: 0, Jf: 4, K: 0xc00000b7},
		{Code: opLdNr, K: 0},
		{Code: 0x15, Jt: 1, Jf: 0, K: 1},
		{Code: opRet, K: retAllow},
		{Code: opRet, K: retEPERM},
		{Code: opRet, K: retKillProcess},
	}
	rules := []Rule{{Nr: 10, Why: "x"}, {Nr: 11, Action: ENOSYS}, {Nr: 12, Action: ENOSYS}, {Nr: 14, Action: ENOSYS}}
	got, err := InsertByNumber(prog, rules)
	if err != nil {
		t.Fatal(err)
	}
	var ins []bpf.Instruction
	for _, p := range got {
		ins = append(ins, bpf.RawInstruction{Op: p.Code, Jt: p.Jt, Jf: p.Jf, K: p.K}.Disassemble())
	}
	v, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ nr, arch, want uint32 }{
		{0, 0xc00000b7, retAllow}, {1, 0xc00000b7, retEPERM}, {10, 0xc00000b7, retEPERM},
		{11, 0xc00000b7, retENOSYS}, {12, 0xc00000b7, retENOSYS}, {13, 0xc00000b7, retAllow},
		{14, 0xc00000b7, retENOSYS}, {15, 0xc00000b7, retAllow}, {0, 0xc000003e, retKillProcess},
	} {
		if r, _ := v.Run(seccompData(tt.nr, tt.arch)); uint32(r) != tt.want {
			t.Errorf("nr %d arch %#x = %#x, want %#x", tt.nr, tt.arch, uint32(r), tt.want)
		}
	}
	if back, _ := Decode(Encode(got)); !cmp.Equal(back, got) {
		t.Error("Encode and Decode disagree")
	}
	far := append([]Instruction(nil), prog...)
	far[1].Jf = 250
	if _, err := InsertByNumber(far, rules); err == nil {
		t.Error("a jump past 255 was accepted")
	}
	if _, err := InsertByNumber(prog, []Rule{{Nr: 3, Conds: []Cond{{Arg: 0}}}}); err == nil {
		t.Error("a rule with conditions was inserted by number")
	}
	if _, err := InsertByNumber(prog[:2], rules); err == nil {
		t.Error("a program that never loads the number was patched")
	}
}
