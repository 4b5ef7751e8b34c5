//go:build linux

package integration

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/internal/sbxtest"
)

// sbxOnPTY starts sbx with args in the workspace on a new pseudo-terminal
// (its controlling terminal, stdin, stderr, and stdout unless out is
// given) and collects what reaches the terminal; the test's end kills it.
func sbxOnPTY(t *testing.T, e *env, out *os.File, args ...string) (*exec.Cmd, *os.File, *screen) {
	t.Helper()
	ptmx, pts := sbxtest.OpenPTY(t)
	cmd := exec.Command(sbxBin, args...)
	cmd.Dir, cmd.Env = e.ws, append(e.environ(), "TERM=dumb")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	if out != nil {
		cmd.Stdout = out
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s := &screen{}
	go s.read(ptmx)
	return cmd, ptmx, s
}

// screen collects what sbx writes to the terminal.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *screen) read(f *os.File) {
	b := make([]byte, 4096)
	for {
		n, err := f.Read(b)
		s.mu.Lock()
		s.buf.Write(b[:n])
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// waitFor waits until the screen holds text, at most 20 s.
func (s *screen) waitFor(t *testing.T, text string) string {
	t.Helper()
	for i := 0; i < 2000; i++ {
		if out := s.String(); strings.Contains(out, text) {
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%q never appeared on the terminal:\n%q", text, s.String())
	return ""
}

// askScript runs a background writer to the terminal and one request to
// the host's loopback at port, which no rule names.
func askScript(port int) string {
	return fmt.Sprintf(`(while :; do printf W; sleep 0.02; done) &
curl -s -m 20 -o /dev/null http://host.sbx.internal:%d/asked; echo " curl=$?"; sleep 0.5; kill %%1`, port)
}

// While sbx asks on the terminal about a host no rule names, the command
// (which shares that terminal) is paused: a background writer that would
// write over the question writes nothing until the answer, then goes on;
// the host, denied, gets no request.
func TestNetAskPausesTheSandbox(t *testing.T) {
	e := newEnv(t)
	requireCurl(t)
	srv := newCounted(t, false)
	cmd, ptmx, s := sbxOnPTY(t, e, nil, "run", "--", "bash", "-c", askScript(srv.port))
	out := s.waitFor(t, "[d] deny (default)\r\n> ")
	asked := len(out)
	time.Sleep(500 * time.Millisecond)
	if after := s.String()[asked:]; after != "" {
		t.Fatalf("the command wrote while the question was on the terminal: %q", after)
	}
	if _, err := ptmx.Write([]byte("d\n")); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, " curl=")
	if err := cmd.Wait(); err != nil {
		t.Logf("sbx: %v", err)
	}
	if n := srv.hits.Load(); n != 0 {
		t.Errorf("the denied host got %d requests", n)
	}
	resumed := false
	for i := 0; i < 500 && !resumed; i++ {
		resumed = strings.Contains(s.String()[asked:], "W")
		time.Sleep(10 * time.Millisecond)
	}
	if !resumed {
		t.Errorf("the command did not go on after the answer:\n%q", s.String())
	}
}

// An allow answer holds when nothing of the sandbox ran while the
// question was shown (the pause's check does not take a stopped writer
// for a running one): the host gets its request, and the writer goes on.
func TestNetAskAllowedWhileTheSandboxStaysPaused(t *testing.T) {
	e := newEnv(t)
	requireCurl(t)
	srv := newCounted(t, false)
	cmd, ptmx, s := sbxOnPTY(t, e, nil, "run", "--", "bash", "-c", askScript(srv.port))
	s.waitFor(t, "[d] deny (default)\r\n> ")
	time.Sleep(300 * time.Millisecond)
	if _, err := ptmx.Write([]byte("o\n")); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, " curl=")
	if err := cmd.Wait(); err != nil {
		t.Logf("sbx: %v", err)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("the allowed host got %d requests, want 1:\n%q", n, s.String())
	}
	if strings.Contains(s.String(), "denied whatever the answer") {
		t.Errorf("the pause took the sandbox for one that ran:\n%q", s.String())
	}
}

// When sbx's output goes to a pipe (sbx run … | tee log), what the command
// wrote before the pause may reach the terminal after the question: sbx
// denies without asking, and says why.
func TestNetAskDeniedWhenOutputIsAPipe(t *testing.T) {
	e := newEnv(t)
	requireCurl(t)
	srv := newCounted(t, false)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	go io.Copy(io.Discard, pr)
	cmd, _, s := sbxOnPTY(t, e, pw, "run", "--", "curl", "-s", "-m", "20", "-o", "/dev/null", fmt.Sprintf("http://host.sbx.internal:%d/asked", srv.port))
	pw.Close()
	out := s.waitFor(t, "denied without asking")
	if strings.Contains(out, "[d] deny") || !strings.Contains(out, "pipe") {
		t.Errorf("asked, or did not say why:\n%q", out)
	}
	cmd.Wait()
	if n := srv.hits.Load(); n != 0 {
		t.Errorf("the host got %d requests", n)
	}
}
