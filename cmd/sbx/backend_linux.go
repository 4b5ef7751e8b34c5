//go:build linux

package main

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/linux"
)

// closeLeakedFDs marks every descriptor the caller leaked to sbx
// close-on-exec, so none reaches bubblewrap or the command.
func closeLeakedFDs() {
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}

// backend is what sbx doctor needs of the platform.
type backend struct {
	exec *linux.Executor
}

func newBackend(bwrapPath, stateDir string) *backend {
	return &backend{exec: &linux.Executor{Bwrap: bwrapPath, StateDir: stateDir}}
}

func (b *backend) doctor(ctx context.Context) any {
	return b.exec.Doctor(ctx)
}

func (b *backend) usable(rep any) bool { return rep.(*linux.Report).Usable }

func (b *backend) clean() (any, error) { return b.exec.Clean(context.Background()) }
