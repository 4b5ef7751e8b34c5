//go:build darwin

package main

import (
	"context"
	"io"
	"os"
	"runtime"

	"golang.org/x/term"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/darwin"
	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

const initArg = "__sbx_init"

// sandboxSupported says this platform has a sandbox backend.
const sandboxSupported = true

func initMain() int { return exitSbxError }

const rlimitArg = "__sbx_rlimit"

func rlimitMain([]string) int { return exitSbxError }

const txArg = "__sbx_tx"

func txMain([]string) int { return exitSbxError }

func closeLeakedFDs() {}

type backend struct{ exec *darwin.Executor }

func newBackend(_ string, stateDir string) *backend {
	return &backend{exec: &darwin.Executor{StateDir: stateDir}}
}

func (b *backend) executor() pipeline.Executor { return b.exec }

// setAudit sends the proxy's events and the sandbox's violations (from the
// unified log, best effort) to the audit log.
func (b *backend) setAudit(a *auditLog) {
	b.exec.Audit = a.event
	b.exec.Violations = func(v darwin.Violation) { a.violation(v.Time, v.Process, v.PID, v.Operation, v.Target) }
}

func (b *backend) setAsk(f func(string, int) bool) { b.exec.Ask = f }

func (b *backend) setSecrets(s []*creds.Secret) { b.exec.Secrets = s }

type darwinReport struct {
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	Usable bool   `json:"usable"`
	Detail string `json:"detail"`
}

func (b *backend) doctor(context.Context) any {
	ok, detail := darwin.DoctorCheck()
	return &darwinReport{OS: runtime.GOOS, Arch: runtime.GOARCH, Usable: ok, Detail: detail}
}

func (b *backend) usable(rep any) bool { return rep.(*darwinReport).Usable }

func (b *backend) clean() (any, error) {
	return map[string]string{"clean": "nothing to clean on macOS"}, nil
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func isTerminalW(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// platformSettings applies the macOS-only network settings.
func (b *backend) platformSettings(st *settings.Settings, _ io.Writer) {
	for _, e := range st.AllowUnixSockets {
		b.exec.UnixSockets = append(b.exec.UnixSockets, e.Value)
	}
	b.exec.LocalBinding = st.AllowLocalBinding.Or(false)
	b.exec.TrustdLookup = st.EnableWeakerNetworkIsolation.Or(false)
}
