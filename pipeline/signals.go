package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// InterruptedError is the error of a run that a signal stopped while its
// sandbox was set up: the command did not start, and what the run had made
// (its directory, its proxy, its cgroups) was removed.
type InterruptedError struct{ Signal syscall.Signal }

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("stopped by signal %d (%v) while the sandbox was set up; the command did not run", int(e.Signal), e.Signal)
}

// ExitCode is sbx's status for it: 128+N, as if the signal had ended sbx.
func (e *InterruptedError) ExitCode() int { return 128 + int(e.Signal) }

type catcherKey struct{}

// catcher holds the signals a one-command process receives from the start
// of its run: until the command may start, one that would end the process
// cancels the run instead; then they are the command's ([Supervision.Supervise]
// forwards them from the same channel, so none falls between the two).
type catcher struct {
	sigs   chan os.Signal
	cancel context.CancelCauseFunc
	handed chan struct{} // closed by handOver
	done   chan struct{} // closed once catch has returned
	once   sync.Once
}

// CatchSignals, for the run of a process marked [WithSignalsKept], takes
// from now on the signals sbx forwards to its command. Until the backend
// calls [CommandStarts], a signal that would have ended sbx (SIGINT,
// SIGTERM, SIGHUP …) cancels the returned context with an
// *InterruptedError as its cause: the run stops where it is and removes
// what it made, where the signal's default action left the run's
// directory, its proxy and its cgroups for the next run to clean. A
// SIGTSTP stops sbx as it would have. release ends the catching once the
// run has returned; the signals that come after are dropped (the process
// is finishing). Without the mark, ctx is returned as it is.
func CatchSignals(ctx context.Context) (_ context.Context, release func()) {
	if ctx.Value(signalsKeptKey{}) == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	c := &catcher{sigs: make(chan os.Signal, 16), cancel: cancel, handed: make(chan struct{}), done: make(chan struct{})}
	signal.Notify(c.sigs, notIgnored(forwardedSignals())...)
	go c.catch()
	return context.WithValue(ctx, catcherKey{}, c), func() {
		c.handOver()
		cancel(nil)
		go func() {
			for range c.sigs { // dropped: the run is over
			}
		}()
	}
}

// catch cancels the run at the first signal that would have ended sbx,
// until handOver. A SIGTSTP stops sbx, unless a SIGCONT comes with it
// (as Supervise's stopSelf: stopped after the SIGCONT was spent, sbx
// would wait for another).
func (c *catcher) catch() {
	defer close(c.done)
	sv := Supervision{Signal: c.handle}
	var lastCont time.Time
	for {
		select {
		case <-c.handed:
			return
		case s := <-c.sigs:
			switch s {
			case syscall.SIGCONT:
				lastCont = time.Now()
			case syscall.SIGTSTP:
				sv.stopSelf(c.sigs, lastCont)
			default:
				c.handle(s)
			}
		}
	}
}

// handle is what a signal does before the command may start: one that
// would end sbx cancels the run; SIGWINCH, SIGCONT and SIGTSTP have no
// command to reach yet.
func (c *catcher) handle(s os.Signal) {
	switch s {
	case syscall.SIGWINCH, syscall.SIGCONT, syscall.SIGTSTP:
	default:
		c.cancel(&InterruptedError{Signal: s.(syscall.Signal)})
	}
}

// handOver ends catch and waits for it: no signal is taken after it
// returns but from sigs.
func (c *catcher) handOver() {
	c.once.Do(func() { close(c.handed) })
	<-c.done
}

// CommandStarts is called by a backend just before it lets the command
// start: the signals caught from then on are the command's, and Supervise
// forwards them. A non-nil error is the run's interruption (or ctx's own
// error): the command must not start.
func CommandStarts(ctx context.Context) error {
	if c, ok := ctx.Value(catcherKey{}).(*catcher); ok {
		c.handOver()
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// Interruption returns the run's *InterruptedError in place of err when a
// caught signal stopped it (the backend returns ctx's plain error), else
// err.
func Interruption(ctx context.Context, err error) error {
	var ie *InterruptedError
	if err != nil && errors.As(context.Cause(ctx), &ie) {
		return ie
	}
	return err
}

// caughtSignals is the channel Supervise forwards from: the catcher's,
// handed over, when the run has one (own is false: Supervise must leave
// it registered), else a new one.
func caughtSignals(ctx context.Context) (sigs chan os.Signal, own bool) {
	if c, ok := ctx.Value(catcherKey{}).(*catcher); ok {
		c.handOver()
		return c.sigs, false
	}
	sigs = make(chan os.Signal, 16)
	signal.Notify(sigs, notIgnored(forwardedSignals())...)
	return sigs, true
}
