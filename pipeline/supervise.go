package pipeline

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// forwardedSignals are the signals sbx passes on to the command it runs.
func forwardedSignals() []os.Signal {
	return []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT, syscall.SIGTSTP}
}

type signalsKeptKey struct{}

// WithSignalsKept marks ctx as the call of a process that runs one command
// and exits (sbx run, sbx tool, --claude-shell): once the command has
// ended, [Supervision.Supervise] goes on taking the signals it forwarded,
// and drops them. Given back to their default action, one that came while
// sbx finished the run (its report, its directories) ended sbx, with the
// signal's status in place of the command's and the run's directory left
// for the next run to clean. With it, [CatchSignals] also takes them while
// the run is set up. A long-lived process (serve, mcp) has its own
// handling between calls and must not use it.
func WithSignalsKept(ctx context.Context) context.Context {
	return context.WithValue(ctx, signalsKeptKey{}, true)
}

// Supervision is how a backend reaches the command it started.
type Supervision struct {
	// Timeout kills the command after this long; zero means never.
	Timeout time.Duration
	// Signal passes a signal sbx received on to the command.
	Signal func(os.Signal)
	// Kill kills the command and everything it started.
	Kill func()
}

// Supervise is every backend's wait loop: it forwards the signals sbx
// receives, kills the command at the timeout, and kills it and waits when
// ctx ends. It returns Wait's error from exited; timedOut reports a kill by
// the timeout; err is ctx's error when ctx ended first (the command was
// killed and has exited).
func (sv Supervision) Supervise(ctx context.Context, exited <-chan error) (waitErr error, timedOut bool, err error) {
	sigs, own := caughtSignals(ctx)
	defer func() {
		if !own {
			return // the catcher's: it drops them once the run is over
		}
		if ctx.Value(signalsKeptKey{}) != nil {
			go func() {
				for range sigs { // dropped: the command has ended
				}
			}()
			return
		}
		// Stopping takes 0.1-0.4 ms (the runtime's signal thread must
		// acknowledge each signal), after the command has ended: it is
		// left to the background, off the call's path.
		go signal.Stop(sigs)
	}()
	var timeout <-chan time.Time
	var lastCont time.Time
	if sv.Timeout > 0 {
		t := time.NewTimer(sv.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case s := <-sigs:
			sv.Signal(s)
			switch s {
			case syscall.SIGCONT:
				lastCont = time.Now()
			case syscall.SIGTSTP:
				sv.stopSelf(sigs, lastCont)
			}
		case <-timeout:
			timedOut, timeout = true, nil
			sv.Kill()
		case <-ctx.Done():
			sv.Kill()
			<-exited
			return nil, timedOut, ctx.Err()
		case waitErr = <-exited:
			return waitErr, timedOut, nil
		}
	}
}

// tstpSettle is how long sbx waits, after a SIGTSTP, for a SIGCONT
// already on its way before it stops itself.
const tstpSettle = 20 * time.Millisecond

// stopSelf is Ctrl-Z: the command was told, and sbx stops as the job it is,
// with a stop it cannot catch, unless a SIGCONT came with the SIGTSTP
// (lastCont: the last one before it). Go reports signals that come
// together in the order of their numbers, not of their arrival, so a
// SIGCONT reported first may have been sent after: sbx then runs on, as
// stopped it would wait for a SIGCONT already spent, and passes the
// SIGCONT on after the SIGTSTP, so the command runs on too. Stopped, sbx
// is continued by a SIGCONT, which it passes on as any other. The
// timeout is wall-clock time: one that passed meanwhile kills the command
// when sbx goes on.
func (sv Supervision) stopSelf(sigs <-chan os.Signal, lastCont time.Time) {
	if sv.settle(sigs, time.Since(lastCont) < tstpSettle) {
		sv.Signal(syscall.SIGCONT)
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
}

// settle passes on the signals that come within tstpSettle but SIGCONT,
// and reports whether a SIGCONT came (or cont).
func (sv Supervision) settle(sigs <-chan os.Signal, cont bool) bool {
	wait := time.NewTimer(tstpSettle)
	defer wait.Stop()
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGCONT {
				cont = true
				continue
			}
			sv.Signal(s)
		case <-wait.C:
			return cont
		}
	}
}

// notIgnored drops the signals this process ignores: started with SIGINT
// or SIGHUP ignored (a background job of a script, nohup), sbx leaves them
// so, where taking them would forward them to the command.
func notIgnored(sigs []os.Signal) []os.Signal {
	var out []os.Signal
	for _, s := range sigs {
		if !signal.Ignored(s) {
			out = append(out, s)
		}
	}
	return out
}

// ExitStatus is a finished process's status as a shell reports it: its
// exit code, or 128+N when signal N killed it.
func ExitStatus(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}
