//go:build linux

package linux

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ctlPair is a control socket: sbx's end and the helper's.
func ctlPair(t *testing.T) (sbx, helper *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sbx, helper = os.NewFile(uintptr(fds[0]), "sbx"), os.NewFile(uintptr(fds[1]), "helper")
	t.Cleanup(func() { sbx.Close(); helper.Close() })
	return sbx, helper
}

// helperEnd is the helper's side after its spec: it reads sbx's messages,
// waits for the start clock when clock is set (as the helper's merge
// does), and delivers rep; it returns the start clock it got and what
// deliverReport said (or why the spec could not be read).
func helperEnd(helper *os.File, rep *TxReport, clock bool) (*TxStart, error) {
	dec := json.NewDecoder(helper)
	var spec TxSpec
	if err := dec.Decode(&spec); err != nil {
		return nil, err
	}
	start, acked := make(chan TxStart, 1), make(chan bool, 1)
	go readCtl(dec, start, acked, make(chan struct{}))
	var got *TxStart
	if clock {
		c := <-start
		got = &c
	}
	return got, deliverReport(helper, rep, acked, spec.AckReport)
}

// sbx's side of the exchange acknowledges the report, with or without a
// start clock sent first, and the helper takes it for a live sbx.
func TestReportAcknowledged(t *testing.T) {
	for _, withClock := range []bool{true, false} {
		sbx, helper := ctlPair(t)
		d := &txCtl{parent: sbx, spec: TxSpec{RunDir: "/nowhere", AckReport: true}}
		out, start := make(chan *TxReport, 1), make(chan TxStart, 1)
		now := unix.Timespec{Sec: 42}
		if withClock {
			start <- TxStart{Clock: &now}
		}
		go d.exchange(out, start)
		type res struct {
			got *TxStart
			err error
		}
		done := make(chan res, 1)
		go func() { got, err := helperEnd(helper, &TxReport{Notice: "merged"}, withClock); done <- res{got, err} }()
		var got *TxStart
		var err error
		select {
		case r := <-done:
			got, err = r.got, r.err
		case <-time.After(10 * time.Second):
			t.Fatalf("clock %v: the helper still waits for sbx's acknowledgement", withClock)
		}
		if err != nil {
			t.Errorf("clock %v: deliverReport: %v, want nil (sbx acknowledged)", withClock, err)
		}
		if rep := <-out; rep == nil || rep.Notice != "merged" {
			t.Errorf("clock %v: sbx got %+v", withClock, rep)
		}
		if withClock && (got == nil || got.Clock == nil || got.Clock.Sec != 42) {
			t.Errorf("start clock: %+v", got)
		}
	}
}

// A report written into the socket's buffer while a dying sbx still holds
// its end is not taken: the helper must see that (and clean up after
// sbx), although its write succeeded.
func TestReportNotAcknowledged(t *testing.T) {
	sbx, helper := ctlPair(t)
	if err := json.NewEncoder(sbx).Encode(TxSpec{RunDir: "/nowhere", AckReport: true}); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() {
		_, err := helperEnd(helper, &TxReport{}, false)
		res <- err
	}()
	// The report fits the buffer: the write returns while sbx is "alive".
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-res:
		t.Fatalf("deliverReport returned %v before sbx acknowledged or closed", err)
	default:
	}
	sbx.Close()
	select {
	case err := <-res:
		if !errors.Is(err, errNoAck) {
			t.Errorf("deliverReport: %v, want errNoAck", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("deliverReport still waits after sbx's end closed")
	}
}

// A sbx gone before the report: the write fails (EPIPE).
func TestReportToClosedSocket(t *testing.T) {
	sbx, helper := ctlPair(t)
	sbx.Close()
	acked := make(chan bool, 1)
	go readCtl(json.NewDecoder(helper), make(chan TxStart, 1), acked, make(chan struct{}))
	err := deliverReport(helper, &TxReport{}, acked, true)
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, errNoAck) {
		t.Errorf("deliverReport: %v, want EPIPE or errNoAck", err)
	}
}

// A helper whose sbx died removes the proxy's directory the spec names,
// also when the run directory (and its record) is gone, and nothing that
// is not named as one.
func TestCleanOrphanWithoutRecord(t *testing.T) {
	d := t.TempDir()
	net, other := filepath.Join(d, "sbx-net-0123456789abcdef"), filepath.Join(d, "keep")
	for _, p := range []string{net, other} {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	gone := filepath.Join(d, "state/runs/1-2-3")
	cleanOrphan(&TxSpec{RunDir: gone, NetDir: other})
	cleanOrphan(&TxSpec{RunDir: gone, NetDir: net})
	if _, err := os.Stat(net); !os.IsNotExist(err) {
		t.Errorf("the proxy's directory is left: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a directory not named as the proxy's was removed: %v", err)
	}
}

// An sbx that does not say it acknowledges reports (an older binary
// running a newer helper from disk) holds the socket open while it waits
// for the helper's exit: the helper must not wait for an
// acknowledgement then.
func TestReportWithoutAcknowledgementAsked(t *testing.T) {
	sbx, helper := ctlPair(t)
	if err := json.NewEncoder(sbx).Encode(TxSpec{RunDir: "/nowhere"}); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() {
		_, err := helperEnd(helper, &TxReport{}, false)
		res <- err
	}()
	select {
	case err := <-res:
		if err != nil {
			t.Errorf("deliverReport: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the helper waits for an acknowledgement sbx never said it sends")
	}
}

// The start clock: sbx's, also when it came just before sbx's end of the
// socket closed; the fallback at once when it closed without one.
func TestStartClockWhenSbxIsGone(t *testing.T) {
	fallback, sent := unix.Timespec{Sec: 1}, unix.Timespec{Sec: 2}
	spec := &TxSpec{start: make(chan TxStart, 1), gone: make(chan struct{}), clockWait: time.Hour}
	spec.start <- TxStart{Clock: &sent}
	close(spec.gone)
	got := make(chan int64, 2)
	go func() {
		got <- spec.startClock(fallback).Clock.Sec
		got <- spec.startClock(fallback).Clock.Sec
	}()
	for i, want := range []int64{2, 1} {
		select {
		case sec := <-got:
			if sec != want {
				t.Errorf("clock %d: got %d, want %d", i, sec, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("clock %d: the helper still waits for a clock from a gone sbx", i)
		}
	}
}
