package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// audited records each command's start, then the changes that did not
// reach the host, the limits that stopped it, and its end. A timeout is recorded with status
// 124, what `sbx run` exits with (as timeout(1)).
type audited struct {
	pipeline.Executor
	audit *Audit
}

// signalsCaught stops a run of a one-command process (sbx run, sbx tool,
// --claude-shell) that a signal interrupts while its sandbox is set up,
// and says so (pipeline.CatchSignals): the run removes what it made, where
// the signal's default action left it behind.
type signalsCaught struct{ pipeline.Executor }

func (e signalsCaught) Run(ctx context.Context, s *pipeline.Spec, stdio pipeline.Stdio) (*pipeline.Result, error) {
	ctx, release := pipeline.CatchSignals(ctx)
	defer release()
	res, err := e.Executor.Run(ctx, s, stdio)
	return res, pipeline.Interruption(ctx, err)
}

// ExitTimeout is the status of a command the wall-clock limit killed.
const ExitTimeout = 124

func (e audited) Run(ctx context.Context, s *pipeline.Spec, stdio pipeline.Stdio) (*pipeline.Result, error) {
	if e.audit == nil {
		return e.Executor.Run(ctx, s, stdio)
	}
	e.audit.RunStart(s)
	start := time.Now()
	res, err := e.Executor.Run(ctx, s, stdio)
	if err == nil {
		e.audit.Changes(res.Changes)
		if res.LimitHit != "" {
			e.audit.Limit(res.LimitHit, res.ExitCode)
		}
		if res.TimedOut {
			e.audit.Limit(fmt.Sprintf("wall clock (timeout %s)", s.Timeout), ExitTimeout)
		}
	}
	e.audit.RunEnd(res, err, time.Since(start))
	return res, err
}

// unsandboxed runs a command directly on the host, for an explicit
// opt-out: no policy applies, only the timeout.
type unsandboxed struct{}

func (unsandboxed) Run(ctx context.Context, s *pipeline.Spec, stdio pipeline.Stdio) (*pipeline.Result, error) {
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Env, cmd.Dir = s.Env, s.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := pipeline.CommandStarts(ctx); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	group := func(sig os.Signal) { _ = syscall.Kill(-cmd.Process.Pid, sig.(syscall.Signal)) }
	sv := pipeline.Supervision{Timeout: s.Timeout, Signal: group, Kill: func() { group(syscall.SIGKILL) }}
	waitErr, timedOut, err := sv.Supervise(ctx, exited)
	if err != nil {
		return nil, err
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return nil, waitErr
	}
	return &pipeline.Result{ExitCode: pipeline.ExitStatus(cmd.ProcessState), TimedOut: timedOut}, nil
}
