package pipeline

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// A signal that would end sbx, caught before the command may start,
// cancels the run with an *InterruptedError; the backend's CommandStarts
// then refuses to start the command.
func TestSignalBeforeTheCommandStopsTheRun(t *testing.T) {
	ctx, release := CatchSignals(WithSignalsKept(context.Background()))
	defer release()
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the run was not cancelled")
	}
	var ie *InterruptedError
	if err := CommandStarts(ctx); !errors.As(err, &ie) || ie.Signal != syscall.SIGUSR1 {
		t.Fatalf("CommandStarts: %v, want the SIGUSR1 interruption", err)
	}
	if got := Interruption(ctx, context.Canceled); got != ie {
		t.Errorf("Interruption: %v, want %v", got, ie)
	}
	if ie.ExitCode() != 128+int(syscall.SIGUSR1) {
		t.Errorf("exit code %d", ie.ExitCode())
	}
}

// Once the command may start, the signals are the command's: Supervise
// forwards one that came before it ran, and the run is not cancelled.
func TestSignalAfterCommandStartsIsForwarded(t *testing.T) {
	ctx, release := CatchSignals(WithSignalsKept(context.Background()))
	defer release()
	if err := CommandStarts(ctx); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	got := make(chan os.Signal, 1)
	exited := make(chan error, 1)
	sv := Supervision{Signal: func(s os.Signal) { got <- s; exited <- nil }, Kill: func() { t.Error("killed") }}
	done := make(chan error, 1)
	go func() { _, _, err := sv.Supervise(ctx, exited); done <- err }()
	select {
	case s := <-got:
		if s != syscall.SIGUSR2 {
			t.Errorf("forwarded %v, want SIGUSR2", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the signal was not forwarded")
	}
	if err := <-done; err != nil || ctx.Err() != nil {
		t.Errorf("Supervise: %v, ctx: %v; want neither", err, ctx.Err())
	}
}

// Without the mark (serve, mcp), nothing is caught.
func TestCatchSignalsNeedsTheMark(t *testing.T) {
	ctx := context.Background()
	got, release := CatchSignals(ctx)
	defer release()
	if got != ctx {
		t.Error("an unmarked context was changed")
	}
	if err := CommandStarts(got); err != nil {
		t.Error(err)
	}
}
