//go:build !linux && !darwin

package session

import (
	"time"

	"context"

	"github.com/sbx-sandbox/sbx/darwin"
	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// masksFiles says the backend can show a file with other content
// (credential files masked rather than hidden).
const masksFiles = false

// sandboxSupported says this platform has a sandbox backend.
const sandboxSupported = false

func platformHonours(string) bool { return false }

// none refuses every command: this platform has no sandbox.
type none struct{}

func (none) Run(context.Context, *pipeline.Spec, pipeline.Stdio) (*pipeline.Result, error) {
	return nil, darwin.ErrNotDarwin
}

// arrival is when a call came: now.
func (s *Session) arrival() time.Time { return time.Now() }

func newExecutor(*Options, *settings.Settings, string, *Audit) pipeline.Executor {
	return none{}
}

// Reexec does nothing where sbx has no sandbox.
func Reexec() {}

func insideSandbox(func(string) string) bool { return false }
