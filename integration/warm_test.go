//go:build linux

package integration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// warmRun runs script in ex with the tool calls' default limits and
// reports whether a warm sandbox ran it (the trace says so).
func warmRun(t *testing.T, ex interface {
	Run(context.Context, *pipeline.Spec, pipeline.Stdio) (*pipeline.Result, error)
}, spec *pipeline.Spec) (out string, code int, warm bool) {
	t.Helper()
	var trace, stdout, stderr bytes.Buffer
	tr := pipeline.NewTrace(&trace)
	res, err := ex.Run(pipeline.WithTrace(context.Background(), tr), spec, pipeline.Stdio{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	tr.Report()
	return stdout.String() + stderr.String(), res.ExitCode, strings.Contains(trace.String(), "warm sandbox taken")
}

// hostProcesses counts the host's processes whose command line contains
// s.
func hostProcesses(s string) int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		if b, err := os.ReadFile(d); err == nil && strings.Contains(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), s) {
			n++
		}
	}
	return n
}

// A warm sandbox (launched while the caller thinks, for serve and MCP)
// carries nothing of the call before it: not a file in /tmp, not a
// process, not a socket file, not an environment change; the workspace's
// merged writes are what the next call sees. A call with another policy
// starts cold; Close leaves no run behind.
func TestWarmSandboxCarriesNothing(t *testing.T) {
	e := newEnv(t)
	ex := e.executor()
	ex.Warm = true
	limited := func(script string) *pipeline.Spec {
		s := e.spec(t, script)
		s.Limits = pipeline.DefaultToolLimits().Limits
		return s
	}
	first := `echo leak > /tmp/leak; export LEAK=1; echo kept > kept
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind("/tmp/leak.sock"); s.listen()'
nohup sleep 3141 >/dev/null 2>&1 &
echo started`
	// A server launches the first sandbox before its first call.
	ex.Prewarm(limited(""))
	out, code, warm := warmRun(t, ex, limited(first))
	if code != 0 || !strings.Contains(out, "started") || !warm {
		t.Fatalf("first call: %d warm=%v %q", code, warm, out)
	}
	if n := hostProcesses("sleep 3141"); n != 0 {
		t.Fatalf("the first call's background process outlived it: %d", n)
	}
	second := `ls -A /tmp; echo "LEAK=${LEAK:-unset}"; cat kept
for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; done | grep -c 'sleep 31[4]1' || true`
	// The caller thinks; the next sandbox is launched meanwhile (a call
	// that comes sooner waits for it).
	time.Sleep(200 * time.Millisecond)
	out, code, warm = warmRun(t, ex, limited(second))
	if code != 0 || !warm {
		t.Fatalf("second call: %d warm=%v %q", code, warm, out)
	}
	for _, leak := range []string{"leak", "LEAK=1"} {
		if strings.Contains(out, leak) {
			t.Errorf("%q reached the next call: %q", leak, out)
		}
	}
	for _, want := range []string{"LEAK=unset", "kept", "\n0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("second call: no %q in %q", want, out)
		}
	}
	// Another policy: the warm sandbox is thrown away, the call starts cold.
	other := limited("echo other")
	other.Limits.MaxProcs = 64
	if out, code, warm = warmRun(t, ex, other); code != 0 || warm || out != "other\n" {
		t.Errorf("other policy: %d warm=%v %q", code, warm, out)
	}
	if err := ex.Close(); err != nil {
		t.Fatal(err)
	}
	if runs, _ := os.ReadDir(filepath.Join(e.home, "state", "runs")); len(runs) != 0 {
		t.Errorf("Close left runs: %v", runs)
	}
	if out, _, warm = warmRun(t, ex, limited("echo after")); warm || out != "after\n" {
		t.Errorf("after Close: warm=%v %q", warm, out)
	}
}
