// Package darwin will be sbx's macOS executor: the compiled policy rendered
// as a Seatbelt (SBPL) profile and run with sandbox-exec. It is not
// implemented yet: [Executor.Run] refuses with a clear error, so sbx never
// runs a command unsandboxed on macOS by surprise.
package darwin

import (
	"context"
	"errors"
	"fmt"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// ErrNotImplemented is returned by every run on macOS for now.
var ErrNotImplemented = fmt.Errorf("%w: the macOS (Seatbelt) sandbox is not supported yet: %w", pipeline.ErrUnavailable, errors.ErrUnsupported)

// Executor is the macOS executor. It implements [pipeline.Executor].
type Executor struct{}

var _ pipeline.Executor = Executor{}

// Run implements [pipeline.Executor]; it always fails with
// [ErrNotImplemented].
func (Executor) Run(context.Context, *pipeline.Spec, pipeline.Stdio) (*pipeline.Result, error) {
	return nil, ErrNotImplemented
}
