// Package pipeline is the gate in front of every spawn, and the contract
// between it and the sandbox backends: a [Spec] of plain data that an
// [Executor] (linux/, darwin/) only renders and runs.
package pipeline

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"time"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/netrules"
)

// Spec is everything a backend needs to run one command. It is pure data:
// every path is absolute and symlink-resolved.
type Spec struct {
	Argv []string
	Env  []string // the command's whole environment
	Dir  string   // working directory inside the sandbox
	FS   *fsrules.Policy
	// Net is the network policy. Nil means no network at all: not even the
	// proxy runs.
	Net *NetPolicy
	// Timeout kills the whole sandbox after this long; zero means none.
	Timeout time.Duration
	// Limits bound what the command may use; zero values mean no limit.
	Limits Limits
	// Discard runs the command and reports what it would have changed in
	// its writable roots, applying nothing.
	Discard bool
	// Secrets are the masked credentials (the command's Env holds their
	// placeholders): the proxy swaps a placeholder for the real value in
	// requests to its bound hosts only, and blocks it anywhere else.
	Secrets []*creds.Secret
	// Platform holds the keys only some backends honour.
	Platform Platform
	// MaskedFiles are denyRead credential files the sandbox sees with their
	// secrets replaced by placeholders (the Secrets above), instead of
	// empty; a backend that cannot show them keeps them hidden.
	MaskedFiles []MaskedFile
	// OneStream says the call's stdout and stderr will be one writer (one
	// pipe: the order of the command's writes kept), so that a sandbox
	// prepared before the call is prepared that way.
	OneStream bool
}

// MaskedFile is a file the sandbox sees, at Path, with Content.
type MaskedFile struct {
	Path    string
	Content []byte
}

// Platform are settings only some backends honour; a backend that cannot
// honour one that is set ignores it only where that is stricter, and says
// so ([Platform.Unsupported]).
type Platform struct {
	// UnixSockets may be connected to (sandbox.network.allowUnixSockets).
	UnixSockets []string
	// AllUnixSockets allows every Unix socket
	// (sandbox.network.allowAllUnixSockets; Linux).
	AllUnixSockets bool
	// LocalBinding allows bind/listen on localhost
	// (sandbox.network.allowLocalBinding; macOS).
	LocalBinding bool
	// WeakerNetworkIsolation allows the TLS trust service
	// (sandbox.enableWeakerNetworkIsolation; macOS).
	WeakerNetworkIsolation bool
	// MachLookup are extra Mach services the command may look up (a
	// trailing * is a prefix), checked by [CheckMachServices]
	// (sandbox.network.allowMachLookup; macOS).
	MachLookup []string
}

// Unsupported names the platform keys that are set, for a backend that
// honours none of them (each is then ignored, which is stricter).
func (p Platform) Unsupported() []string {
	var out []string
	if len(p.UnixSockets) > 0 {
		out = append(out, "sandbox.network.allowUnixSockets")
	}
	if p.AllUnixSockets {
		out = append(out, "sandbox.network.allowAllUnixSockets")
	}
	if p.LocalBinding {
		out = append(out, "sandbox.network.allowLocalBinding")
	}
	if len(p.MachLookup) > 0 {
		out = append(out, "sandbox.network.allowMachLookup")
	}
	if p.WeakerNetworkIsolation {
		out = append(out, "sandbox.enableWeakerNetworkIsolation")
	}
	return out
}

// Limits are resource limits for one run. A limit a backend cannot enforce
// on this host makes the run fail with ErrUnavailable (never ignored).
type Limits struct {
	// MaxProcs bounds processes and threads in the sandbox (cgroup pids).
	MaxProcs int
	// MaxMemory bounds memory in bytes (cgroup memory).
	MaxMemory int64
	// MaxCPU bounds CPU time per process (RLIMIT_CPU; SIGXCPU past it).
	MaxCPU time.Duration
	// MaxTmp bounds the private /tmp in bytes (a size-limited tmpfs).
	MaxTmp int64
	// MaxOpenFiles bounds open descriptors per process (RLIMIT_NOFILE).
	MaxOpenFiles int
	// MaxDisk bounds, in bytes, what the run may add to its writable roots
	// and its private /tmp together (unless MaxTmp is set: /tmp then has its
	// own bound). On Linux the overlays' upper layers are then in a
	// size-limited tmpfs instead of on disk.
	MaxDisk int64
	// BestEffort turns a limit this host cannot enforce into a warning in
	// the Result instead of ErrUnavailable; it is set only for defaults.
	BestEffort bool
	// Set are the limits the user asked for (flags, settings): never best
	// effort, whatever BestEffort says; the defaults beside them stay so.
	Set LimitKind
}

// LimitKind names the limits a host may be unable to enforce, as a set.
type LimitKind uint8

// The limits a host may be unable to enforce.
const (
	LimitProcs LimitKind = 1 << iota
	LimitMemory
	LimitTmp
	LimitDisk
)

// Soft reports whether limits of kind k that this host cannot enforce
// are a warning rather than a refusal: defaults the user did not set.
func (l Limits) Soft(k LimitKind) bool { return l.BestEffort && l.Set&k == 0 }

// NetPolicy is what leaves the sandbox: only connections through sbx's
// proxy, to hosts the rules allow.
type NetPolicy struct {
	Rules *netrules.Set `json:"rules"`
	// Strict denies hosts no rule names; otherwise the executor's Ask
	// callback decides (and with none, they are denied too).
	Strict bool `json:"strict"`
}

// NetAsk decides a host no rule names (strict mode off). pause, where the
// platform has one, stops every process of the sandbox until the resume it
// returns is called: an asker that shows its question where the command
// can write (the terminal the command shares) pauses first, or the
// command could write over the question once it is shown, a host of its
// choice in place of the real one. An asker that cannot pause denies.
type NetAsk func(host string, port int, pause Pause) bool

// Pause stops every process of the sandbox and waits until they have all
// stopped; resume continues them, and reports an error when a process of
// the sandbox ran while it was paused (the kernel continued it, or the
// pause missed it): a question shown meanwhile may have been drawn over,
// and its answer must not be trusted.
type Pause func() (resume func() error, err error)

// Stdio is the command's standard streams. A nil reader reads nothing; a
// nil writer discards. An *os.File is passed through as is, so a terminal
// stays a terminal.
type Stdio struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Result is how a command ended.
type Result struct {
	// ExitCode is the command's exit status, or 128+N when signal N killed it.
	ExitCode int
	// TimedOut is set when Spec.Timeout killed the sandbox.
	TimedOut bool
	// Changes is what became of the command's writes (nil where the
	// backend writes directly).
	Changes *Changes
	// Warnings are problems that did not stop the run.
	Warnings []string
	// LimitHit names the limit that stopped or constrained the command
	// ("" when none did).
	LimitHit string
	// Blocked are the network destinations the proxy refused, one line
	// each with the reason ("blocked host:443 (… not on the allowlist …)").
	Blocked []string
}

// Executor runs a Spec in a sandbox.
type Executor interface {
	// Run runs the command and waits for it. An error means the sandbox
	// could not be built or run; the command's own failure is a Result.
	Run(ctx context.Context, s *Spec, stdio Stdio) (*Result, error)
}

// ErrUnavailable is wrapped by errors that mean the sandbox cannot be built
// on this host (missing bubblewrap, user namespaces disabled …).
var ErrUnavailable = errors.New("sandbox unavailable")

// StateDir returns where sbx keeps per-run state and the quarantine:
// $XDG_STATE_HOME/sbx, or ~/.local/state/sbx.
func StateDir(getenv func(string) string, home string) string {
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "sbx")
	}
	return filepath.Join(home, ".local", "state", "sbx")
}
