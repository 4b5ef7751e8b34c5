package pipeline

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestTraceOrdersStampsFromAllProcesses(t *testing.T) {
	var out bytes.Buffer
	tr := NewTrace(&out)
	base := tr.start.UnixNano()
	tr.Add(Stamp{Name: "third", Time: base + 3e6}, Stamp{Name: "first", Time: base + 1e6})
	tr.Add(Stamp{Name: "second", Time: base + 2e6})
	tr.Printf("argv: %s", "x")
	tr.Report()
	got := out.String()
	if !strings.HasPrefix(got, "sbx: debug: argv: x\n") {
		t.Fatalf("line: %q", got)
	}
	i1, i2, i3 := strings.Index(got, "first"), strings.Index(got, "second"), strings.Index(got, "third")
	if i1 < 0 || i1 > i2 || i2 > i3 || !strings.Contains(got, "+1.00 ms  second") || !strings.Contains(got, "total") {
		t.Errorf("report:\n%s", got)
	}
}

func TestNilTraceRecordsNothing(t *testing.T) {
	tr := TraceFrom(context.Background())
	tr.Mark("x")
	tr.Add(Stamp{Name: "y", Time: time.Now().UnixNano()})
	tr.Printf("z")
	tr.Report()
	if tr != nil {
		t.Fatal("a context without a trace has one")
	}
	var out bytes.Buffer
	if got := TraceFrom(WithTrace(context.Background(), NewTrace(&out))); got == nil {
		t.Fatal("WithTrace lost the trace")
	}
}
