// Package seccomp holds sbx's seccomp filter: the rules (portable data), the
// BPF programs compiled from them at build time with libseccomp
// (go generate, committed as bpf_<arch>.bin and embedded), and their
// installation on Linux.
//
// The filter is compiled at build time so that the shipped sbx binary is
// static (CGO_ENABLED=0) and needs no libseccomp on the host, and so that the
// exact program is reviewed and golden-tested. `make generate` rebuilds it;
// CI checks that the committed programs match the rules.
package seccomp

// Action is what a rule does to a matching system call.
type Action uint8

// The actions a rule can take.
const (
	// EPERM makes the call fail with EPERM, so tools degrade gracefully.
	EPERM Action = iota
	// ENOSYS makes the call fail with ENOSYS. clone3 gets it, because its
	// flags sit behind a pointer the filter cannot read; libc then falls back
	// to clone, whose flags the filter checks.
	ENOSYS
	// Notify stops the caller and hands the call to sbx's supervisor
	// (SECCOMP_RET_USER_NOTIF), which performs it or refuses it.
	Notify
)

// Variant selects one of the compiled programs.
type Variant uint8

// The programs sbx compiles.
const (
	// Strict refuses every Unix socket except connected stream and
	// seqpacket pairs: for kernels, or parent sandboxes, where the
	// supervisor cannot run.
	Strict Variant = iota
	// Supervised lets the command create Unix stream and seqpacket
	// sockets and sends every connect(2) to the supervisor, which
	// performs it on a duplicate of the caller's socket after checking
	// the address it copied (so nothing the caller changes later counts).
	Supervised
)

// Variants lists every program variant, for the generator and the tests.
var Variants = []Variant{Strict, Supervised}

// String names the variant as its program file does.
func (v Variant) String() string {
	if v == Supervised {
		return "unix"
	}
	return "strict"
}

// Op compares a system call argument.
type Op uint8

// The comparisons a condition can make.
const (
	// MaskedEq matches when arg & Mask == Value.
	MaskedEq Op = iota
	// GE matches when arg >= Value (unsigned, 64 bits).
	GE
)

// Cond is one condition on a system call argument.
type Cond struct {
	Arg   uint
	Op    Op
	Mask  uint64
	Value uint64
}

// Rule blocks one system call, always or when all of Conds hold.
type Rule struct {
	Syscall string
	// Nr is the call's number where the libseccomp that builds the filter
	// may not know its name; it must be the same on every architecture
	// (true of every call added since Linux 5.1).
	Nr     uint32
	Action Action
	Conds  []Cond
	Why    string
}

// Address families that stay allowed: IPv4 and IPv6 reach the in-sandbox
// proxy bridge; netlink lets libc query interfaces in the sandbox's own empty
// network namespace.
// Netlink protocols: route and sock_diag stay allowed.
//
// socketRules: socket() takes AF_INET, AF_INET6 and AF_NETLINK, and in the
// Supervised variant AF_UNIX of the stream and seqpacket types (whose
// connect goes to the supervisor; sendto and sendmsg ignore or refuse an
// address on them). socketpair(AF_UNIX) keeps only those two types in both
// variants: a datagram pair sends to any host datagram socket by path.
const (
	netlinkRoute     = 0
	netlinkSockDiag  = 4
	netlinkProtocols = 32 // MAX_LINKS
)

// Unix socket types: only stream and seqpacket are kept. SOCK_RAW is
// SOCK_DGRAM for AF_UNIX, and a datagram socket sends to any host socket by
// path with sendto or sendmsg, which the filter cannot read.
const (
	afUNIX        = 1
	sockSTREAM    = 1
	sockSEQPACKET = 5
	sockTypeMask  = 0xf
	sockTypeLimit = 16
)

const (
	afINET    = 2
	afINET6   = 10
	afNETLINK = 16
)

// Mode bits and open flags the filter looks at (the same on amd64 and
// arm64).
const (
	sISUID   = 0o4000
	sISGID   = 0o2000
	oCREAT   = 0o100
	oTMPFILE = 0o20000000 // __O_TMPFILE, without O_DIRECTORY
)

// Namespace flags of clone and unshare.
var nsFlags = []uint64{
	0x00000080, // CLONE_NEWTIME
	0x00020000, // CLONE_NEWNS
	0x02000000, // CLONE_NEWCGROUP
	0x04000000, // CLONE_NEWUTS
	0x08000000, // CLONE_NEWIPC
	0x10000000, // CLONE_NEWUSER
	0x20000000, // CLONE_NEWPID
	0x40000000, // CLONE_NEWNET
}

// Rules returns the filter's rules for a variant. Every other system call
// is allowed; a call made with a foreign architecture's calling convention
// kills the process.
func Rules(v Variant) []Rule {
	rs := socketRules(v)
	// Netlink: only route (interfaces, addresses) and sock_diag (ss);
	// netfilter and the rest are the usual door to kernel bugs.
	for p := uint64(0); p < netlinkProtocols; p++ {
		if p == netlinkRoute || p == netlinkSockDiag {
			continue
		}
		rs = append(rs, Rule{Syscall: "socket", Conds: []Cond{{Arg: 0, Op: MaskedEq, Mask: 0xffffffff, Value: afNETLINK},
			{Arg: 2, Op: MaskedEq, Mask: 0xffffffff, Value: p}}, Why: "netlink protocols other than route and sock_diag"})
	}
	rs = append(rs, Rule{Syscall: "socket", Conds: []Cond{{Arg: 0, Op: MaskedEq, Mask: 0xffffffff, Value: afNETLINK},
		{Arg: 2, Op: GE, Value: netlinkProtocols}}, Why: "netlink protocols other than route and sock_diag"})
	if v == Supervised {
		rs = append(rs, Rule{Syscall: "connect", Action: Notify,
			Why: "the supervisor connects Unix sockets inside the sandbox only (and performs every other connect as asked)"})
	}
	for _, f := range nsFlags {
		for _, sc := range []string{"clone", "unshare"} {
			rs = append(rs, Rule{Syscall: sc, Conds: []Cond{{Arg: 0, Op: MaskedEq, Mask: f, Value: f}},
				Why: "new namespaces"})
		}
	}
	rs = append(rs, Rule{Syscall: "clone3", Action: ENOSYS, Why: "flags behind a pointer; libc falls back to clone"})
	for _, ioc := range []uint64{0x5412 /* TIOCSTI */, 0x541C /* TIOCLINUX */} {
		rs = append(rs, Rule{Syscall: "ioctl", Conds: []Cond{{Arg: 1, Op: MaskedEq, Mask: 0xffffffff, Value: ioc}},
			Why: "typing into the terminal"})
	}
	// Set-user-ID and set-group-ID files: the sandbox's mounts are nosuid,
	// but the host's are not, so a file the command marks so would run
	// with its owner's rights on the host (root's, when sbx runs as root).
	// The mode is refused wherever it is given: chmod and friends, and
	// file creation (open and openat with O_CREAT or O_TMPFILE, creat,
	// mknod). openat2 passes its mode behind a pointer: ENOSYS, libc and
	// tools fall back to openat. fchmodat2 (Linux 6.6) is given by number:
	// libseccomp 2.5 does not know its name.
	for _, bit := range []uint64{sISUID, sISGID} {
		mode := func(arg uint) Cond { return Cond{Arg: arg, Op: MaskedEq, Mask: bit, Value: bit} }
		why := "set-user-ID and set-group-ID modes"
		for _, c := range []struct {
			call string
			arg  uint
		}{{"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2}, {"creat", 1}, {"mknod", 1}, {"mknodat", 2}} {
			rs = append(rs, Rule{Syscall: c.call, Conds: []Cond{mode(c.arg)}, Why: why})
		}
		rs = append(rs, Rule{Syscall: "fchmodat2", Nr: 452, Conds: []Cond{mode(2)}, Why: why})
		for _, flag := range []uint64{oCREAT, oTMPFILE} {
			rs = append(rs,
				Rule{Syscall: "open", Conds: []Cond{{Arg: 1, Op: MaskedEq, Mask: flag, Value: flag}, mode(2)}, Why: why},
				Rule{Syscall: "openat", Conds: []Cond{{Arg: 2, Op: MaskedEq, Mask: flag, Value: flag}, mode(3)}, Why: why})
		}
	}
	rs = append(rs, Rule{Syscall: "openat2", Action: ENOSYS, Why: "its mode is behind a pointer; libc falls back to openat"})
	always := []struct {
		why   string
		calls []string
	}{
		{"io_uring bypasses the socket rule", []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}},
		{"reading or changing other processes", []string{"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"}},
		{"kernel attack surface", []string{"bpf", "perf_event_open", "userfaultfd"}},
		{"kernel keyrings", []string{"keyctl", "add_key", "request_key"}},
		{"mounts", []string{"mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"}},
		{"joining namespaces", []string{"setns"}},
		{"kernel code", []string{"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"}},
	}
	for _, g := range always {
		for _, c := range g.calls {
			rs = append(rs, Rule{Syscall: c, Why: g.why})
		}
	}
	rs = append(rs, Rule{Syscall: "open_tree_attr", Nr: 467, Why: "mounts"})
	// A call newer than these rules is one nobody has reviewed: ENOSYS,
	// as on a kernel that lacks it (beyond MaxSyscall the kernel says so
	// itself).
	for nr := uint32(LastKnownSyscall + 1); nr <= MaxSyscall; nr++ {
		rs = append(rs, Rule{Nr: nr, Action: ENOSYS, Why: "a system call newer than sbx's rules"})
	}
	return rs
}

// LastKnownSyscall is the highest system call number (the same on amd64
// and arm64 since Linux 5.1) these rules were reviewed against; MaxSyscall
// bounds the numbers that get ENOSYS from the filter.
const (
	LastKnownSyscall = 467 // open_tree_attr, Linux 6.18
	MaxSyscall       = 1023
)

func socketRules(v Variant) []Rule {
	var rs []Rule
	// The family is an int, so compare its low 32 bits; anything at or
	// above 17 (including values with high bits set) is refused too.
	for f := uint64(0); f < 17; f++ {
		if f == afINET || f == afINET6 || f == afNETLINK || (f == afUNIX && v == Supervised) {
			continue
		}
		rs = append(rs, Rule{Syscall: "socket", Conds: []Cond{{Arg: 0, Op: MaskedEq, Mask: 0xffffffff, Value: f}},
			Why: "address families other than IPv4, IPv6 and netlink (and supervised Unix sockets)"})
	}
	rs = append(rs, Rule{Syscall: "socket", Conds: []Cond{{Arg: 0, Op: GE, Value: 17}}, Why: "address families from 17 up"})
	calls := []string{"socketpair"}
	if v == Supervised {
		calls = append(calls, "socket")
	}
	for _, call := range calls {
		for t := uint64(0); t < sockTypeLimit; t++ {
			if t == sockSTREAM || t == sockSEQPACKET {
				continue
			}
			rs = append(rs, Rule{Syscall: call, Conds: []Cond{{Arg: 0, Op: MaskedEq, Mask: 0xffffffff, Value: afUNIX},
				{Arg: 1, Op: MaskedEq, Mask: sockTypeMask, Value: t}}, Why: "Unix datagram sockets send to host sockets by path"})
		}
	}
	return rs
}
