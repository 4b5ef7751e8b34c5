//go:build !darwin

package darwin

import (
	"context"
	"errors"
	"fmt"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// ErrNotDarwin is returned by Run on any other system.
var ErrNotDarwin = fmt.Errorf("%w: the Seatbelt sandbox runs only on macOS: %w", pipeline.ErrUnavailable, errors.ErrUnsupported)

// Run implements [pipeline.Executor]; only on macOS.
func (e *Executor) Run(context.Context, *pipeline.Spec, pipeline.Stdio) (*pipeline.Result, error) {
	return nil, ErrNotDarwin
}
