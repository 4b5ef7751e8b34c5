//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/linux"
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

// warmExecutor is the test's executor with warm sandboxes, closed at the
// end of the test.
func (e *env) warmExecutor(t *testing.T) *linux.Executor {
	ex := e.executor()
	ex.Warm = true
	t.Cleanup(func() { ex.Close() })
	return ex
}

// toolSpec is a spec for script with the tool calls' default limits.
func (e *env) toolSpec(t *testing.T, script string) *pipeline.Spec {
	t.Helper()
	s := e.spec(t, script)
	s.Limits = pipeline.DefaultToolLimits().Limits
	return s
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
	ex := e.warmExecutor(t)
	limited := func(script string) *pipeline.Spec { return e.toolSpec(t, script) }
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

// A warm sandbox starts from the host as it is when the call comes: the
// host's edits made while it waited are its starting point, not
// conflicts; a workspace renamed and made again, or a writable root that
// is a single file (copied at the launch), makes the call start cold.
func TestWarmSandboxFollowsTheHost(t *testing.T) {
	e := newEnv(t)
	ex := e.warmExecutor(t)
	limited := func(script string) *pipeline.Spec { return e.toolSpec(t, script) }
	e.write("a.txt", "hello\n")
	ex.Prewarm(limited(""))
	if !ex.WaitWarm(context.Background()) {
		t.Fatal("Prewarm launched no warm sandbox")
	}
	e.write("a.txt", "hello\nhost edit\n")
	e.write("hostnew.txt", "h\n") // right before the call: no conflict either
	out, code, warm := warmRun(t, ex, limited("echo sandbox >> a.txt; cat hostnew.txt; rm hostnew.txt"))
	if code != 0 || !warm || out != "h\n" {
		t.Fatalf("edit after host edits: %d warm=%v %q", code, warm, out)
	}
	if b, _ := os.ReadFile(e.path("a.txt")); string(b) != "hello\nhost edit\nsandbox\n" {
		t.Errorf("a.txt: %q", b)
	}
	if _, err := os.Stat(e.path("hostnew.txt")); err == nil {
		t.Error("the command's rm of a file the host made while the sandbox waited was refused")
	}
	// The workspace renamed and made again while the next sandbox waits
	// (launched: one launched after the rename would rightly be warm).
	if !ex.WaitWarm(context.Background()) {
		t.Fatal("no warm sandbox was launched after the first call")
	}
	if err := os.Rename(e.ws, e.ws+"-old"); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(e.ws, 0o755)
	e.write("marker", "fresh\n")
	out, code, warm = warmRun(t, ex, limited("ls; echo two > two.txt"))
	if code != 0 || warm || out != "marker\n" {
		t.Errorf("after the workspace was replaced: %d warm=%v %q", code, warm, out)
	}
	if _, err := os.Stat(e.path("two.txt")); err != nil {
		t.Errorf("the write did not reach the new workspace: %v", err)
	}
	// A single file as a writable root: never launched ahead.
	file := filepath.Join(e.home, "data.txt")
	os.WriteFile(file, []byte("v1\n"), 0o644)
	withFile := func(script string) *pipeline.Spec {
		s := limited(script)
		fs := *s.FS
		fs.Writable = append(fs.Writable[:len(fs.Writable):len(fs.Writable)], fsrules.Path{Path: file, Exists: true, Origin: "test"})
		s.FS = &fs
		return s
	}
	warmRun(t, ex, withFile("true"))
	time.Sleep(300 * time.Millisecond)
	os.WriteFile(file, []byte("v2\n"), 0o644)
	if out, _, warm = warmRun(t, ex, withFile("cat "+file)); warm || out != "v2\n" {
		t.Errorf("file root: warm=%v %q", warm, out)
	}
}

// A call whose stdout and stderr are one writer (a tool call's text, as
// Claude Code's Bash shows it) gets a warm sandbox with one pipe: the
// order of the command's writes is kept exactly. Prepared for one stream,
// a warm sandbox is not given to a call with two (it starts cold).
func TestWarmOneStream(t *testing.T) {
	e := newEnv(t)
	ex := e.warmExecutor(t)
	spec := func(script string, one bool) *pipeline.Spec {
		s := e.toolSpec(t, script)
		s.OneStream = one
		return s
	}
	const script = "for i in 1 2 3; do echo out$i; echo err$i >&2; done"
	const want = "out1\nerr1\nout2\nerr2\nout3\nerr3\n"
	run := func(s *pipeline.Spec, one bool) (string, bool) {
		var trace, out, errb bytes.Buffer
		tr := pipeline.NewTrace(&trace)
		stdio := pipeline.Stdio{Stdout: &out, Stderr: &errb}
		if one {
			stdio.Stderr = &out
		}
		if _, err := ex.Run(pipeline.WithTrace(context.Background(), tr), s, stdio); err != nil {
			t.Fatal(err)
		}
		tr.Report()
		return out.String() + "|" + errb.String(), strings.Contains(trace.String(), "warm sandbox taken")
	}
	for i := 0; i < 2; i++ {
		ex.Prewarm(spec("", true))
		if got, warm := run(spec(script, true), true); got != want+"|" || !warm {
			t.Fatalf("one stream, call %d: warm=%v %q, want %q", i, warm, got, want)
		}
	}
	ex.Prewarm(spec("", true))
	if got, warm := run(spec(script, false), false); warm || got != "out1\nout2\nout3\n|err1\nerr2\nerr3\n" {
		t.Fatalf("two streams after a one-stream warm sandbox: warm=%v %q", warm, got)
	}
}

// sbx tool's text is one stream in the order written; --output structured
// keeps stdout and stderr apart.
func TestToolOneStream(t *testing.T) {
	e := newEnv(t)
	call := `{"type":"tool_use","id":"o","name":"Bash","input":{"command":"echo out1; echo err1 >&2; echo out2"}}`
	var res struct {
		Content string
		Output  struct{ Stdout, Stderr string }
	}
	r := e.tool(call)
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Content != "out1\nerr1\nout2\n" {
		t.Fatalf("text: %v %q", err, r.stdout)
	}
	r = e.tool(call, "--output", "structured")
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Output.Stdout != "out1\nout2\n" || res.Output.Stderr != "err1\n" {
		t.Fatalf("structured: %v %q", err, r.stdout)
	}
}
