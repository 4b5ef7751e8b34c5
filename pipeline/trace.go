package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Trace collects what one call does on its way to the command, for
// `--debug`: the moments each phase ended (in any of sbx's processes: the
// clock is the wall clock, shared by all of them) and lines that show how
// the sandbox was built (the bubblewrap command line, the mount plan). A nil
// *Trace records nothing, so callers mark phases unconditionally.
type Trace struct {
	w      io.Writer
	start  time.Time
	mu     sync.Mutex
	stamps []Stamp
}

// Stamp is the moment a phase of a run ended.
type Stamp struct {
	// Name says which phase ended ("helper: mounts", "init: exec").
	Name string `json:"n"`
	// Time is the wall clock in nanoseconds since the Unix epoch.
	Time int64 `json:"t"`
}

// NewTrace returns a trace that writes its lines to w and measures from
// now.
func NewTrace(w io.Writer) *Trace {
	return &Trace{w: w, start: time.Now()}
}

// Mark records that the phase name ends now.
func (t *Trace) Mark(name string) {
	if t == nil {
		return
	}
	t.Add(Stamp{Name: name, Time: time.Now().UnixNano()})
}

// Add records stamps taken elsewhere (by a helper process).
func (t *Trace) Add(s ...Stamp) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.stamps = append(t.stamps, s...)
	t.mu.Unlock()
}

// Printf writes one debug line ("sbx: debug: …") at once.
func (t *Trace) Printf(format string, args ...any) {
	if t == nil || t.w == nil {
		return
	}
	fmt.Fprintf(t.w, "sbx: debug: "+format+"\n", args...)
}

// Report writes the phases in the order they ended, each with its own
// duration and the time since the trace began, and the total.
func (t *Trace) Report() {
	if t == nil || t.w == nil {
		return
	}
	t.mu.Lock()
	stamps := slices.Clone(t.stamps)
	t.mu.Unlock()
	slices.SortStableFunc(stamps, func(a, b Stamp) int { return cmp.Compare(a.Time, b.Time) })
	var b strings.Builder
	prev := t.start.UnixNano()
	for _, s := range stamps {
		fmt.Fprintf(&b, "sbx: debug: %8.2f ms %+8.2f ms  %s\n", ms(s.Time-t.start.UnixNano()), ms(s.Time-prev), s.Name)
		prev = s.Time
	}
	fmt.Fprintf(&b, "sbx: debug: %8.2f ms total (from the call to the report)\n", ms(time.Now().UnixNano()-t.start.UnixNano()))
	io.WriteString(t.w, b.String())
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

type arrivalKey struct{}

// WithArrival returns a context that says when the call came (before the
// gate and the policy): the executor takes the host's changes made before
// it as the command's starting point. t must not be before the change
// time of any file changed before the call (time.Now, or a file clock
// such as linux.FileClock).
func WithArrival(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, arrivalKey{}, t)
}

// ArrivalFrom returns when the call came, or now.
func ArrivalFrom(ctx context.Context) time.Time {
	if t, ok := ctx.Value(arrivalKey{}).(time.Time); ok {
		return t
	}
	return time.Now()
}

type traceKey struct{}

// WithTrace returns a context that carries t to the executor.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// TraceFrom returns the context's trace, or nil.
func TraceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}
