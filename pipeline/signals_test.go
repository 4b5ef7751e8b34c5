package pipeline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
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

// A SIGTSTP and a SIGCONT sent together while the run is set up leave sbx
// running: stopped after the SIGCONT was spent, it would wait for another
// for good. The catching process is a child (this test binary again), so
// that a stop cannot stop the test.
func TestStopAndContinueWhileSetUp(t *testing.T) {
	if os.Getenv("SBX_TEST_CATCHER") == "1" {
		_, release := CatchSignals(WithSignalsKept(context.Background()))
		defer release()
		fmt.Println("ready")
		time.Sleep(5 * time.Second)
		return
	}
	for i := 0; i < 5; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStopAndContinueWhileSetUp$")
		cmd.Env = append(os.Environ(), "SBX_TEST_CATCHER=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		syscall.Kill(cmd.Process.Pid, syscall.SIGTSTP)
		syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
		time.Sleep(200 * time.Millisecond) // ten times the settling time
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		_, after, _ := strings.Cut(string(stat), ") ")
		syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
		if strings.HasPrefix(after, "T") {
			t.Fatalf("try %d: stopped after a SIGTSTP and a SIGCONT sent together", i)
		}
	}
}
