//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/linux"
	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

const initArg = linux.InitArg

// sandboxSupported says this platform has a sandbox backend.
const sandboxSupported = true

func initMain() int { return linux.Init() }

const rlimitArg = linux.RlimitArg

func rlimitMain(args []string) int { return linux.RlimitExec(args) }

const txArg = linux.TxHelperArg

func txMain(args []string) int { return linux.TxHelper(args) }

// closeLeakedFDs marks every descriptor the caller leaked to sbx
// close-on-exec, so none reaches bubblewrap or the command.
func closeLeakedFDs() {
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}

type backend struct {
	exec *linux.Executor
}

func newBackend(bwrapPath, stateDir string) *backend {
	return &backend{exec: &linux.Executor{Bwrap: bwrapPath, StateDir: stateDir}}
}

func (b *backend) executor() pipeline.Executor { return b.exec }

func (b *backend) setAudit(a *auditLog) { b.exec.Audit = a.event }

func (b *backend) setAsk(f func(string, int) bool) { b.exec.Ask = f }

func (b *backend) setSecrets(s []*creds.Secret) { b.exec.Secrets = s }

func (b *backend) doctor(ctx context.Context) any {
	return b.exec.Doctor(ctx)
}

func (b *backend) usable(rep any) bool { return rep.(*linux.Report).Usable }

func (b *backend) clean() (any, error) { return b.exec.Clean(context.Background()) }

// isTerminal reports whether r is a terminal (not merely a character device
// such as /dev/null).
// isTerminalW reports whether w is a terminal.
func isTerminalW(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// platformSettings applies or reports the settings only some platforms
// honour.
func (b *backend) platformSettings(st *settings.Settings, stderr io.Writer) {
	for _, k := range []struct {
		set  bool
		name string
	}{
		{len(st.AllowUnixSockets) > 0, "sandbox.network.allowUnixSockets"},
		{st.AllowLocalBinding.Or(false), "sandbox.network.allowLocalBinding"},
		{st.EnableWeakerNetworkIsolation.Or(false), "sandbox.enableWeakerNetworkIsolation"},
	} {
		if k.set {
			fmt.Fprintf(stderr, "sbx: warning: %s is macOS only; ignored on Linux (stricter)\n", k.name)
		}
	}
}
