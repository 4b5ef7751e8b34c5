//go:build linux

package session

import (
	"os"
	"strings"
	"time"

	"github.com/sbx-sandbox/sbx/linux"
	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// masksFiles says the backend can show a file with other content
// (credential files masked rather than hidden).
const masksFiles = true

// sandboxSupported says this platform has a sandbox backend.
const sandboxSupported = true

// platformHonours reports whether this platform honours a platform key
// (pipeline.Platform): Linux honours none.
func platformHonours(key string) bool {
	return key == "sandbox.network.allowUnixSockets" || key == "sandbox.network.allowAllUnixSockets"
}

// arrival is when a call came, on the host's file clock: the command's
// conflict clock then starts within a tick (see linux.FileClock).
func (s *Session) arrival() time.Time { return linux.FileClock(s.StateDir()) }

func newExecutor(o *Options, st *settings.Settings, stateDir string, audit *Audit) pipeline.Executor {
	e := &linux.Executor{Bwrap: st.BwrapPath.V, Exe: o.Exe, StateDir: stateDir, Ask: o.NetAsk, Warm: o.Warm}
	if audit != nil {
		e.Audit = audit.Event
	}
	return e
}

// Reexec runs sbx's re-exec entry points (the sandbox's init, the rlimit
// and transaction helpers) when this process is one of them, and then
// exits; otherwise it returns. Call it first in main, and in TestMain of
// tests that run sandboxes.
func Reexec() {
	if code, ok := linux.Inner(os.Args); ok {
		os.Exit(code)
	}
}

// insideSandbox reports whether this process runs in an sbx sandbox: the
// marker is set and the pid namespace's init is sbx's (which nothing on the
// host can fake).
func insideSandbox(getenv func(string) string) bool {
	if getenv(InsideMarker) != "1" {
		return false
	}
	b, err := os.ReadFile("/proc/1/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(string(b), "\x00")
	return len(args) > 1 && args[1] == linux.InitArg
}
