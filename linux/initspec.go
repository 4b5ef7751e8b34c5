package linux

// InitArg is argv[1] of the sbx binary when it runs as the in-sandbox init.
// Dispatch on it happens before any flag parsing (session.Reexec).
const InitArg = "__sbx_init"

// The descriptors and messages between sbx (the parent) and the init.
// sbx passes the same table to the transaction helper, which passes it to
// bubblewrap, which passes it to the init (bwrap's own stdout and stderr
// are a pipe to sbx, so its setup errors can be told apart from the
// command's output):
//
//	fd  direction       what
//	3   sbx  → init     the InitSpec (the policy), as JSON, at once; then
//	                    the InitCall (the command), in its wire form
//	                    (callwire.go), when there is
//	                    one (a warm sandbox gets it later), then EOF
//	                    (InitSpecFD); EOF without a call: nothing runs
//	4   bwrap → sbx     bubblewrap's --info-fd: {"child-pid": N} (relayed
//	                    by the helper; N is the init's pid in the helper's
//	                    pid namespace)
//	5-7 sbx ↔ command   the command's stdin, stdout, stderr; the init
//	                    moves them to 0, 1, 2
//	8   init → sbx      one byte each, then EOF when the init exits
//	                    (InitReadyFD):
//	                      InitRunning    the init runs: from now on the
//	                                     exit status is the command's
//	                      InitForked     the held command waits to be
//	                                     moved into its cgroup (Hold)
//	                      TmpFullReport  the command ended with the
//	                                     size-limited /tmp full
//	                      InitStamp      followed by a phase number and
//	                                     8 bytes of wall clock
//	                                     (InitCall.Trace)
//	9   sbx  → init     only with Hold: one byte once the command is in
//	                    its cgroup; EOF without it means "do not run"
//	                    (initHoldFD)
//	10  sbx  ↔ helper   the transaction helper's control socket (the
//	                    TxSpec and the start clock out, the TxReport
//	                    back, its acknowledgement out); 9 without Hold
//	3+N init → helper   (N: the descriptors above passed to bubblewrap,
//	                    InitSpec.QuietFD) QuietReport and the command's
//	                    status, once every process of the sandbox but
//	                    the init has been killed and reaped, and the
//	                    init has closed every other descriptor it shares
//	                    with sbx: the helper merges while the init exits
//	                    and bubblewrap tears the namespaces down. An init
//	                    that dies without it leaves the helper waiting
//	                    for bubblewrap's exit.
//
// sbx waits for nothing by the clock: each reader ends at EOF, which comes
// because the helper is the first process of a pid namespace of its own,
// so every holder of a descriptor dies with it.
const InitSpecFD = 3

// The descriptors the init inherits besides InitSpecFD; see the table.
const (
	infoFD       = 4
	initStdinFD  = 5
	initStdoutFD = 6
	initStderrFD = 7
	InitReadyFD  = 8
	initHoldFD   = 9
)

// quietFD is the init's descriptor for QuietReport when nfiles
// descriptors of the table go to bubblewrap: the next one.
func quietFD(nfiles int) int { return 3 + nfiles }

// innerBwrapFD is the descriptor at which bubblewrap inherits the sealed
// memfd of sbx-inner, which it runs as the init, when nfiles descriptors
// of the table go to it: the one after quietFD. The init makes it
// close-on-exec with every other at its start.
func innerBwrapFD(nfiles int) int { return quietFD(nfiles) + 1 }

// The messages on InitReadyFD; see the table.
const (
	InitRunning   = 1
	InitForked    = 'F'
	TmpFullReport = 'T'
	InitStamp     = 'S'
	// QuietReport is the only message on InitSpec.QuietFD.
	QuietReport = 'Q'
)

// The init's phases, in the order it reports them with InitStamp.
var initPhases = [...]string{
	"init: running (bubblewrap's setup and the runtime's start)",
	"init: policy read",
	"init: read-only binds, capabilities dropped, bridge",
	"init: limits stub forked (Landlock, seccomp) and released",
	"init: command received",
	"init: command started",
	"init: the command exited",
}

// The init's phases by number.
const (
	phaseRunning = iota
	phasePolicy
	phaseSetUp
	phaseStub
	phaseCall
	phaseStarted
	phaseExited
)

// InitSpec is the policy the in-sandbox init applies to the command: all
// of it is known before the command is (see InitCall).
type InitSpec struct {
	// Writable are the paths Landlock lets the command write below; every
	// other path is read-only to it (best effort: only where the kernel has
	// Landlock).
	Writable []string `json:"writable"`
	// Hidden are the paths the plan hides or masks where the host can
	// detach the mask: outside the writable roots and the sandbox's own
	// mounts (see ReadHiding). The kernel detaches a mount whose mount
	// point the host replaces (git credential-store, an editor's save),
	// and the path then shows the new file; so, where the kernel has
	// Landlock, the command reads files only below the entries around
	// them (readRoots): a file the host puts there is unreadable.
	Hidden []string `json:"hidden,omitempty"`
	// HiddenNames are entries hidden by name pattern (denyRead `.env*`):
	// in each Dir, outside the writable roots, an entry whose name
	// matches Name gets no read rule, whenever it was made.
	HiddenNames []HiddenName `json:"hiddenNames,omitempty"`
	// Readable are the paths the plan binds inside a hidden directory:
	// readable.
	Readable []string `json:"readable,omitempty"`
	// Masks are the files bound over paths of Hidden (a credential file
	// with its secrets masked, the empty file over a denyRead file):
	// readable while the file at the path is still the mask.
	Masks []MaskFile `json:"masks,omitempty"`
	// ReadOnly are paths the init binds read-only onto themselves before it
	// drops its capabilities (see SplitPlan).
	ReadOnly []string `json:"readOnly,omitempty"`
	// Bridge, when set, makes the init relay the proxy ports on the
	// sandbox's loopback to the proxy's Unix socket.
	Bridge *BridgeSpec `json:"bridge,omitempty"`
	// Hold makes the command wait, before its exec, until sbx has moved it
	// into the run's cgroup (the init stays outside).
	Hold bool `json:"hold,omitempty"`
	// TmpLimited makes the init report a full /tmp (a size-limited tmpfs)
	// once the command is done.
	TmpLimited bool `json:"tmpLimited,omitempty"`
	// CPUSeconds and OpenFiles are rlimits for the command (0: none).
	CPUSeconds uint64 `json:"cpuSeconds,omitempty"`
	OpenFiles  uint64 `json:"openFiles,omitempty"`
	// Procs (RLIMIT_NPROC) and DataBytes (RLIMIT_DATA) stand in for a
	// cgroup that cannot be had (0: none).
	Procs     uint64 `json:"procs,omitempty"`
	DataBytes uint64 `json:"dataBytes,omitempty"`
	// RequireLandlock makes a missing Landlock an error instead of a
	// best-effort skip.
	RequireLandlock bool `json:"requireLandlock,omitempty"`
	// UnixSockets are the host Unix sockets the command may connect to
	// (sandbox.network.allowUnixSockets), bound into the sandbox at the
	// same paths; AllUnixSockets allows every one
	// (sandbox.network.allowAllUnixSockets). Sockets of the sandbox's own
	// are always allowed.
	UnixSockets    []string `json:"unixSockets,omitempty"`
	AllUnixSockets bool     `json:"allUnixSockets,omitempty"`
	// Direct are the writable folders bound straight from the host (the
	// toolchain caches): no socket there counts as the sandbox's own.
	Direct []string `json:"direct,omitempty"`
	// QuietFD, when set, is the helper's pipe for QuietReport (see the
	// table).
	QuietFD int `json:"quietFD,omitempty"`
}

// HiddenName is a pattern of InitSpec.HiddenNames: the entries of Dir
// whose names match Name (doublestar, one path element).
type HiddenName struct {
	Dir  string `json:"dir"`
	Name string `json:"name"`
}

// MaskFile is a mask of InitSpec.Masks: the file at Path is the mask
// while it has this device and inode number (the file sbx bound there).
type MaskFile struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// InitCall is the command the init runs under its InitSpec; it travels
// in a wire form of its own (MarshalBinary), never as JSON.
type InitCall struct {
	Argv []string
	Env  []string
	Dir  string
	// Trace makes the init report when each of its phases ended
	// (InitStamp), for --debug.
	Trace bool
}

// stubCall is what the init sends the limits stub (RlimitExec) on its fd
// 3: the command, resolved.
type stubCall struct {
	Path string
	Argv []string
	Env  []string
	Dir  string
}

// Exit statuses the init uses for its own failures, as a shell does.
const (
	ExitCannotExec = 126 // found but could not be executed
	ExitNotFound   = 127 // command not found
	ExitInitFailed = 125 // the sandbox could not start the command
)

// BridgeSpec is where the in-sandbox bridge listens and where it relays to.
type BridgeSpec struct {
	Socket string `json:"socket"` // the proxy's Unix socket, as seen in the sandbox
	// Handoff, when set, is the proxy's hand-over socket (SOCK_SEQPACKET):
	// the bridge passes each accepted connection's descriptor there
	// instead of relaying its bytes.
	Handoff   string `json:"handoff,omitempty"`
	HTTPPort  int    `json:"httpPort"`
	SOCKSPort int    `json:"socksPort"`
}

// The ports the bridge listens on in the sandbox, as srt and common tools
// expect them.
const (
	BridgeHTTPPort  = 3128
	BridgeSOCKSPort = 1080
)
