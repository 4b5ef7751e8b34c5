//go:build darwin

package session

import (
	"time"

	"github.com/sbx-sandbox/sbx/darwin"
	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// masksFiles says the backend can show a file with other content
// (credential files masked rather than hidden).
const masksFiles = false

// sandboxSupported says this platform has a sandbox backend.
const sandboxSupported = true

// platformHonours reports whether this platform honours a platform key:
// macOS honours them all.
func platformHonours(key string) bool { return key != "sandbox.network.allowAllUnixSockets" }

// newExecutor builds the Seatbelt executor. With an audit log, the
// sandbox's violations are streamed from the unified log (best effort).
// arrival is when a call came: now.
func (s *Session) arrival() time.Time { return time.Now() }

func newExecutor(o *Options, _ *settings.Settings, stateDir string, audit *Audit) pipeline.Executor {
	e := &darwin.Executor{StateDir: stateDir, Ask: o.NetAsk}
	if audit != nil {
		e.Audit = audit.Event
		e.Violations = func(v darwin.Violation) { audit.Violation(v.Time, v.Process, v.PID, v.Operation, v.Target) }
	}
	return e
}

// Reexec does nothing on macOS, where sbx has no re-exec entry points;
// call it first in main all the same.
func Reexec() {}

// insideSandbox is false on macOS, where the marker cannot be verified:
// a nested sandbox-exec is refused by the kernel instead (fail closed).
func insideSandbox(func(string) string) bool { return false }
