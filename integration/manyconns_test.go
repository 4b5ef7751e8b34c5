//go:build linux

package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer accepts on the host's loopback and echoes every connection
// until the test ends; it counts what it accepted.
func echoServer(t *testing.T) (port int, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, accepted
}

// usage is what one process holds: open descriptors and resident memory.
type usage struct {
	fds   int
	rssKB int
}

func usageOf(pid int) usage {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	u := usage{fds: len(ents)}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "VmRSS:" {
			u.rssKB, _ = strconv.Atoi(f[1])
		}
	}
	return u
}

// initOf finds the sandbox's init below the sbx process.
func initOf(pid int) int {
	for _, d := range Descendants(pid) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", d))
		if args := strings.Split(string(b), "\x00"); len(args) > 1 && args[1] == "__sbx_init" {
			return d
		}
	}
	return 0
}

// A thousand connections at once through the proxy path (the init's
// bridge, then the proxy): every one gets an answer, the proxy opens no
// more than its bound upstream, descriptors and memory of the proxy and
// the bridge stay bounded, and every admitted tunnel still carries data.
func TestThousandConnectionsStayBounded(t *testing.T) {
	e := newEnv(t)
	requireTool(t, "python3")
	const n, proxyBound = 1000, 512
	port, accepted := echoServer(t)
	// The script goes into the workspace: a checkout under /tmp is not
	// visible in the sandbox, whose /tmp is its own.
	src, err := os.ReadFile("testdata/manyconns.py")
	if err != nil {
		t.Fatal(err)
	}
	script := e.write("manyconns.py", string(src))
	target := fmt.Sprintf("host.sbx.internal:%d", port)
	cmd := exec.Command(sbxBin, "run", "--allow-domain", target, "--", "python3", script, strconv.Itoa(n), target)
	cmd.Dir, cmd.Env = e.ws, e.environ()
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	answers := waitLine(t, lines, "answers", &stderr)
	waitLine(t, lines, "ready", &stderr)
	proxyUse, bridgeUse := usageOf(cmd.Process.Pid), usageOf(initOf(cmd.Process.Pid))
	t.Logf("%d connections held: %s; upstream accepted %d; proxy %d fds %d MB RSS; bridge %d fds %d MB RSS",
		n, answers, accepted.Load(), proxyUse.fds, proxyUse.rssKB>>10, bridgeUse.fds, bridgeUse.rssKB>>10)
	want := fmt.Sprintf("answers 200=%d 503=%d", proxyBound, n-proxyBound)
	if answers != want {
		t.Errorf("got %q, want %q (every connection answered, the bound named)", answers, want)
	}
	if got := accepted.Load(); got > proxyBound {
		t.Errorf("upstream accepted %d, more than the proxy's bound %d", got, proxyBound)
	}
	// The proxy holds four descriptors per admitted tunnel (client,
	// upstream, the splice pipe of the upload); the bridge six per relay
	// (two sockets, a splice pipe each way), at most 1024 relays, plus
	// pooled pipes; both their own few.
	if max := 4*proxyBound + 128; proxyUse.fds > max {
		t.Errorf("proxy descriptors: %d, want at most %d", proxyUse.fds, max)
	}
	if max := 6*1024 + 128; bridgeUse.fds > max {
		t.Errorf("bridge descriptors: %d, want at most %d", bridgeUse.fds, max)
	}
	if proxyUse.rssKB > 256<<10 || bridgeUse.rssKB > 256<<10 {
		t.Errorf("memory: proxy %d kB, bridge %d kB; want at most 256 MB each", proxyUse.rssKB, bridgeUse.rssKB)
	}
	stdin.Close()
	if got := waitLine(t, lines, "echoed", &stderr); got != fmt.Sprintf("echoed %d of %d", proxyBound, proxyBound) {
		t.Errorf("held tunnels after the flood: %s", got)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("sbx: %v\n%s", err, stderr.String())
	}
}

// waitLine returns the first line of the command's stdout that starts
// with prefix, waiting at most 60 s.
func waitLine(t *testing.T, lines <-chan string, prefix string, stderr *lockedBuffer) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("no %q line; stderr:\n%s", prefix, stderr.String())
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no %q line in 60 s", prefix)
		}
	}
}

// lockedBuffer is a strings.Builder that a running command may write to
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
