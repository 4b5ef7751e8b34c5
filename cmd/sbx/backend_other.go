//go:build !linux && !darwin

package main

import (
	"context"
	"io"
	"runtime"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/darwin"
	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

const initArg = "__sbx_init"

// sandboxSupported says this platform has a sandbox backend.
const sandboxSupported = false

func initMain() int { return exitSbxError }

const rlimitArg = "__sbx_rlimit"

func rlimitMain([]string) int { return exitSbxError }

const txArg = "__sbx_tx"

func txMain([]string) int { return exitSbxError }

func closeLeakedFDs() {}

type backend struct{}

func newBackend(bwrapPath, stateDir string) *backend { return &backend{} }

func (b *backend) executor() pipeline.Executor { return &darwin.Executor{} }

func (b *backend) setAudit(*auditLog) {}

func (b *backend) setAsk(func(string, int) bool) {}

func (b *backend) setSecrets([]*creds.Secret) {}

type otherReport struct {
	OS     string `json:"os"`
	Usable bool   `json:"usable"`
	Detail string `json:"detail"`
}

func (b *backend) doctor(context.Context) any {
	return &otherReport{OS: runtime.GOOS, Detail: darwin.ErrNotDarwin.Error()}
}

func (b *backend) usable(any) bool { return false }

func (b *backend) clean() (any, error) { return nil, darwin.ErrNotDarwin }

// isTerminal is false where sbx cannot run commands anyway.
func isTerminal(io.Reader) bool { return false }

// isTerminalW is false where sbx cannot run commands anyway.
func isTerminalW(io.Writer) bool { return false }

func (b *backend) platformSettings(*settings.Settings, io.Writer) {}
