//go:build !sbxinner

package linux

import (
	"slices"
	"strconv"
	"strings"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// OpKind is a mount operation of the plan.
type OpKind uint8

// The mount operations, in tie-break order: at the same path, a later kind
// is applied after (and so wins over) an earlier one.
const (
	OpTmpfs     OpKind = iota // private writable tmpfs (/tmp)
	OpBind                    // writable bind of a host path onto itself
	OpROBind                  // read-only bind of Src onto Dst
	OpHide                    // empty read-only tmpfs over a directory
	OpDir                     // create a directory (a mount point inside a hidden tree)
	OpRemountRO               // make a mount read-only (with its current submounts)
)

// Op is one step of the mount plan.
type Op struct {
	Kind OpKind `json:"kind"`
	Src  string `json:"src,omitempty"`
	Dst  string `json:"dst"`
	Why  string `json:"why"`
	Size int64  `json:"size,omitempty"` // OpTmpfs: bytes, 0 for the default
}

// PlanInput is what [BuildPlan] needs besides the policy.
type PlanInput struct {
	Policy *fsrules.Policy
	// EmptyFile is an empty read-only regular file on the host, bound over
	// denyRead files.
	EmptyFile string
	// Masked maps a denyRead file to the host file bound over it instead of
	// EmptyFile: its masked copy (secrets replaced by placeholders).
	Masked map[string]string
	// Exe is the sbx binary, bound read-only at its own path so that it is
	// there even if its directory is hidden (sbx run inside says sandboxes
	// do not nest, sbx --claude-shell runs the command directly), cannot
	// be modified, and, when it runs as the init itself (a build without
	// sbx-inner), can run.
	Exe string
	// ProxySocket, when set, is the proxy's Unix socket, bound into the
	// sandbox at the same path for the init's bridge.
	ProxySocket string
	// HandoffSocket, when set, is the proxy's hand-over socket, bound the
	// same way for the bridge.
	HandoffSocket string
	// ExtraROBinds are host files bound read-only at the same path (the
	// per-run CA certificate and trust bundle).
	ExtraROBinds []string
	// TmpSize bounds the private /tmp in bytes; 0 means tmpfs's default.
	TmpSize int64
	// BudgetStage, when set, is where the disk budget is mounted (in the
	// transaction helper's namespace, which bubblewrap starts from): unless
	// TmpSize is set the private /tmp is its [TmpInBudget] directory.
	BudgetStage string
	// UnixSockets are host Unix sockets the command may connect to
	// (sandbox.network.allowUnixSockets, resolved), bound read-only at the
	// same path: a connect needs no write access to the mount.
	UnixSockets []string
	// StateDir is sbx's state directory (run directories, staged writes,
	// the quarantine): hidden from the sandbox.
	StateDir string
}

// BuildPlan orders the mount operations for a policy. Shallower paths come
// first, so that a more specific rule is applied later and wins; at the same
// path the [OpKind] order decides (deny after allow).
func BuildPlan(in PlanInput) []Op {
	pol := in.Policy
	var ops []Op
	if in.BudgetStage != "" && in.TmpSize == 0 {
		ops = append(ops, Op{Kind: OpBind, Src: in.BudgetStage + "/" + TmpInBudget, Dst: "/tmp", Why: "private /tmp in the disk budget"})
	} else {
		ops = append(ops, Op{Kind: OpTmpfs, Dst: "/tmp", Why: "private /tmp", Size: in.TmpSize})
	}
	if in.StateDir != "" {
		ops = append(ops, Op{Kind: OpHide, Dst: in.StateDir, Why: "sbx's state"})
	}
	for _, w := range pol.Writable {
		ops = append(ops, Op{Kind: OpBind, Src: w.Path, Dst: w.Path, Why: "writable: " + w.Origin})
		if p, ok := tmpParent(w.Path); ok {
			ops = append(ops, Op{Kind: OpROBind, Src: p, Dst: p, Why: "read-only parent of a writable root in /tmp"})
		}
	}
	for _, c := range pol.Caches {
		ops = append(ops, Op{Kind: OpBind, Src: c.Path, Dst: c.Path, Why: "toolchain cache (sbx's own, written directly)"})
	}
	for _, d := range pol.DenyWrite {
		if d.Exists {
			ops = append(ops, Op{Kind: OpROBind, Src: d.Path, Dst: d.Path, Why: "denyWrite: " + d.Origin})
		}
	}
	for _, d := range pol.DenyRead {
		if d.Dir {
			ops = append(ops, Op{Kind: OpHide, Dst: d.Path, Why: "denyRead: " + d.Origin})
		} else if src, ok := in.Masked[d.Path]; ok {
			ops = append(ops, Op{Kind: OpROBind, Src: src, Dst: d.Path, Why: "credential file, secrets masked: " + d.Origin})
		} else {
			ops = append(ops, Op{Kind: OpROBind, Src: in.EmptyFile, Dst: d.Path, Why: "denyRead: " + d.Origin})
		}
	}
	for _, a := range pol.AllowRead {
		if hiddenBy(a.Path, pol.DenyRead) {
			ops = append(ops, Op{Kind: OpROBind, Src: a.Path, Dst: a.Path, Why: "allowRead: " + a.Origin})
		}
	}
	if in.ProxySocket != "" {
		ops = append(ops, Op{Kind: OpROBind, Src: in.ProxySocket, Dst: in.ProxySocket, Why: "proxy socket"})
	}
	if in.HandoffSocket != "" {
		ops = append(ops, Op{Kind: OpROBind, Src: in.HandoffSocket, Dst: in.HandoffSocket, Why: "proxy hand-over socket"})
	}
	for _, f := range in.ExtraROBinds {
		ops = append(ops, Op{Kind: OpROBind, Src: f, Dst: f, Why: "trust"})
	}
	for _, f := range in.UnixSockets {
		ops = append(ops, Op{Kind: OpROBind, Src: f, Dst: f, Why: "allowUnixSockets"})
	}
	if in.Exe != "" {
		ops = append(ops, Op{Kind: OpROBind, Src: in.Exe, Dst: in.Exe, Why: "sbx"})
	}
	ops = dedupeOps(ops)
	slices.SortStableFunc(ops, func(a, b Op) int {
		if da, db := depth(a.Dst), depth(b.Dst); da != db {
			return da - db
		}
		if a.Dst == b.Dst {
			return int(a.Kind) - int(b.Kind)
		}
		return 0
	})
	return withMountPoints(ops, in.EmptyFile, pol)
}

// whyMountPoint is the Why of the operations that make a mount point
// inside a hidden directory for a later bind.
const whyMountPoint = "mount point"

// withMountPoints makes, for a bind that lies under a hidden directory,
// its mount point while the hiding tmpfs is still writable; then the tmpfs
// is made read-only, then the bind is applied.
func withMountPoints(ops []Op, emptyFile string, pol *fsrules.Policy) []Op {
	var out []Op
	for i, op := range ops {
		out = append(out, op)
		if op.Kind != OpHide {
			continue
		}
		var made []string
		for _, later := range ops[i+1:] {
			if !fsrules.Within(later.Dst, op.Dst) || later.Dst == op.Dst {
				continue
			}
			// Inside a path that an earlier bind of this tree brings back,
			// the mount point exists already.
			if slices.ContainsFunc(made, func(m string) bool { return fsrules.Within(later.Dst, m) }) {
				continue
			}
			made = append(made, later.Dst)
			if later.Kind == OpBind || (later.Kind == OpROBind && isDirOp(later, pol)) {
				out = append(out, Op{Kind: OpDir, Dst: later.Dst, Why: whyMountPoint})
			} else {
				out = append(out, Op{Kind: OpROBind, Src: emptyFile, Dst: later.Dst, Why: whyMountPoint})
			}
		}
		out = append(out, Op{Kind: OpRemountRO, Dst: op.Dst, Why: op.Why})
	}
	return out
}

// tmpParent returns the top directory below /tmp holding a writable root
// deeper in /tmp: it shows the host's (read-only) in the private /tmp, so
// that a write next to the root fails instead of landing in the private
// /tmp and vanishing.
func tmpParent(p string) (string, bool) {
	rel, ok := strings.CutPrefix(p, "/tmp/")
	if !ok {
		return "", false
	}
	top, _, deeper := strings.Cut(rel, "/")
	return "/tmp/" + top, deeper
}

// dedupeOps drops repeated operations (two roots below one /tmp parent).
func dedupeOps(ops []Op) []Op {
	seen := map[Op]bool{}
	return slices.DeleteFunc(ops, func(o Op) bool {
		if seen[o] {
			return true
		}
		seen[o] = true
		return false
	})
}

// isDirOp reports whether a read-only bind's source is a directory, from
// what the policy knows.
func isDirOp(op Op, pol *fsrules.Policy) bool {
	for _, l := range [][]fsrules.Path{pol.AllowRead, pol.DenyWrite, pol.Writable, pol.Caches} {
		for _, p := range l {
			if p.Path == op.Src {
				return p.Dir
			}
		}
	}
	return false
}

// Masks returns the paths the plan hides or masks (a denyRead file or
// directory, a credential file shown with placeholders) that the host can
// unmask: the kernel detaches a mount whose mount point the host removes
// or renames over (git credential-store, an editor's save), and the
// sandbox's path then shows the new file. That holds where the mount
// point lies on a host file system the sandbox sees directly (the root,
// a read-only bind of a host folder, a toolchain cache); not on the
// overlay of a writable root (roots), a tmpfs of the sandbox's, its /proc
// or its /dev.
func Masks(plan []Op, roots []string) []string {
	var out []string
	for i, op := range plan {
		mask := op.Kind == OpHide || op.Kind == OpROBind && op.Src != op.Dst
		if mask && op.Why != whyMountPoint && onHost(plan[:i], op.Dst, roots) {
			out = append(out, op.Dst)
		}
	}
	return out
}

// onHost reports whether the mount point of a mount at p lies on a host
// file system: the deepest operation of before that holds p (the plan is
// ordered by depth) is none (the root), or a bind of a host path other
// than a writable root's overlay.
func onHost(before []Op, p string, roots []string) bool {
	if fsrules.Within(p, "/proc") || fsrules.Within(p, "/dev") {
		return false
	}
	for i := len(before) - 1; i >= 0; i-- {
		op := before[i]
		if op.Dst == p || !fsrules.Within(p, op.Dst) {
			continue
		}
		switch op.Kind {
		case OpDir, OpRemountRO: // no mount of its own
			continue
		case OpTmpfs, OpHide:
			return false
		case OpBind:
			return !slices.Contains(roots, op.Dst) && op.Dst != "/tmp" // /tmp: the budget's stage
		}
		return true
	}
	return true
}

// ReadHiding returns what the init gives Landlock so that a host file
// replaced during the run never shows through a mask (see
// InitSpec.Hidden): the masks the host can detach (Masks) and the denied
// paths missing at start (which the host may make during the run) that
// lie outside the paths writable (where Landlock grants reads with
// writes) and outside one another;
// the bind operations among them that show a file, which stays readable
// (a credential file with its secrets masked, the empty file over a
// denyRead file); and what the plan binds inside a hidden directory
// (allowRead, writable roots, sbx's sockets and binary), readable too.
func ReadHiding(plan []Op, roots, writable, missing []string) (hidden []string, files []Op, readable []string) {
	inside := func(p string, dirs []string) bool {
		return slices.ContainsFunc(dirs, func(d string) bool { return fsrules.Within(p, d) })
	}
	for _, m := range Masks(plan, roots) {
		if !inside(m, writable) {
			hidden = append(hidden, m)
		}
	}
	masks := len(hidden)
	for _, m := range missing {
		if !inside(m, writable) && !inside(m, []string{"/proc", "/dev"}) && !inside(m, hidden[:masks]) {
			hidden = append(hidden, m)
		}
	}
	var dirs []string
	for _, op := range plan {
		switch {
		case op.Why == whyMountPoint || !slices.Contains(hidden, op.Dst):
		case op.Kind == OpHide:
			dirs = append(dirs, op.Dst)
		case op.Kind == OpROBind && op.Src != op.Dst:
			files = append(files, op)
		}
	}
	for _, op := range plan {
		shows := op.Kind == OpBind || op.Kind == OpROBind && op.Src == op.Dst
		if shows && op.Why != whyMountPoint && !slices.Contains(dirs, op.Dst) && inside(op.Dst, dirs) {
			readable = append(readable, op.Dst)
		}
	}
	return hidden, files, readable
}

func hiddenBy(p string, deny []fsrules.Path) bool {
	for _, d := range deny {
		if d.Dir && fsrules.Within(p, d.Path) && p != d.Path {
			return true
		}
	}
	return false
}

// SplitPlan moves the read-only self-binds that lie inside writable roots
// (protected files, placeholders, denyWrite paths) from bubblewrap to the
// in-sandbox init, which makes each with two mount calls instead of
// bubblewrap's per-mount scan of the whole mount table. Only binds whose
// path looks the same inside the sandbox as on the host qualify: the
// deepest earlier operation above them must be a writable bind or another
// such self-bind. Init binds recursively, so operations bubblewrap applied
// below them are kept.
func SplitPlan(plan []Op) (bwrap []Op, initRO []string) {
	for i, op := range plan {
		if op.Kind == OpROBind && op.Src == op.Dst && sameView(plan[:i], op.Dst) {
			initRO = append(initRO, op.Dst)
			continue
		}
		bwrap = append(bwrap, op)
	}
	return bwrap, initRO
}

// sameView reports whether the deepest operation in before that covers p
// shows the host's own file at p.
func sameView(before []Op, p string) bool {
	best := -1
	for i, op := range before {
		if op.Dst != p && fsrules.Within(p, op.Dst) && (best < 0 || depth(op.Dst) >= depth(before[best].Dst)) {
			best = i
		}
	}
	if best < 0 {
		return false
	}
	op := before[best]
	return (op.Kind == OpBind || op.Kind == OpROBind) && op.Src == op.Dst
}

// BwrapOptions are the parts of the bubblewrap command line that are not
// mounts.
type BwrapOptions struct {
	InfoFD   int    // fd bwrap writes the child's pid to
	Hostname string // empty means "sbx"
}

// BwrapArgs renders the plan as a bubblewrap argv (without the bwrap path).
// The sandbox gets new user, mount, pid, ipc, uts, cgroup and network
// namespaces, no capabilities, a fresh /proc and a minimal /dev; the root
// file system is read-only. The command run inside is init.
func BwrapArgs(plan []Op, opt BwrapOptions, init []string) []string {
	host := opt.Hostname
	if host == "" {
		host = "sbx"
	}
	a := []string{
		"--new-session", "--die-with-parent",
		"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net",
		// No --disable-userns: it puts the sandbox in a nested user
		// namespace that could not make init's mounts. New user namespaces
		// are refused by the seccomp filter instead (clone and unshare with
		// CLONE_NEWUSER, clone3), and no process keeps a capability.
		"--unshare-uts", "--unshare-cgroup",
		// Init keeps CAP_SYS_ADMIN (in the sandbox's user namespace) for
		// the read-only binds of SplitPlan, and CAP_SETPCAP to empty its
		// bounding set; it drops both on every thread before the command
		// starts.
		"--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP",
		"--as-pid-1", "--hostname", host,
	}
	if opt.InfoFD > 0 {
		a = append(a, "--info-fd", strconv.Itoa(opt.InfoFD))
	}
	a = append(a, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc")
	for _, op := range plan {
		switch op.Kind {
		case OpTmpfs:
			if op.Size > 0 {
				a = append(a, "--size", strconv.FormatInt(op.Size, 10))
			}
			a = append(a, "--tmpfs", op.Dst)
		case OpBind:
			a = append(a, "--bind", op.Src, op.Dst)
		case OpROBind:
			a = append(a, "--ro-bind", op.Src, op.Dst)
		case OpHide:
			a = append(a, "--perms", "0555", "--tmpfs", op.Dst)
		case OpDir:
			a = append(a, "--dir", op.Dst)
		case OpRemountRO:
			a = append(a, "--remount-ro", op.Dst)
		}
	}
	a = append(a, "--")
	return append(a, init...)
}
