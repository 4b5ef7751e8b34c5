// Package darwin is sbx's macOS executor: the compiled policy rendered as a
// Seatbelt (SBPL) profile ([Profile], pure Go, golden-tested on Linux) and
// run with /usr/bin/sandbox-exec, network only through sbx's proxy on a
// per-run localhost port that requires a per-run token.
package darwin

import (
	"context"
	"net/netip"

	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/proxy"
)

// SandboxExec is the sandbox-exec binary.
const SandboxExec = "/usr/bin/sandbox-exec"

// Executor runs commands under sandbox-exec. It implements
// [pipeline.Executor] on macOS; elsewhere Run refuses.
type Executor struct {
	// StateDir holds per-run state; required.
	StateDir string
	// Audit receives the proxy's events; nil drops them.
	Audit func(proxy.Event)
	// Ask decides a host no rule names when the network policy is not
	// strict; nil denies. It gets no pause (sandbox-exec has no pid
	// namespace whose processes sbx could stop), so an asker that would
	// show its question to the command's terminal denies instead.
	Ask pipeline.NetAsk
	// Resolve replaces the system resolver in the proxy; nil means the
	// system resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Violations, when set, receives the operations the sandbox denied, read
	// from the unified log (`log stream`) while the command runs: best
	// effort, as the log may drop or delay messages.
	Violations func(Violation)
}

var _ pipeline.Executor = (*Executor)(nil)
