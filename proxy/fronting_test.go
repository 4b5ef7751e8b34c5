package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/netrules"
)

// clientHello returns the first bytes a TLS client sends for serverName.
func clientHello(t testing.TB, serverName string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go tls.Client(a, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""}).Handshake()
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := b.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func host(t testing.TB, s string) netrules.Host {
	h, err := netrules.NormalizeHost(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestCheckFirstBytes(t *testing.T) {
	var fe *FrontingError
	tests := []struct {
		name  string
		first []byte
		host  string
		front bool
	}{
		{"same SNI", clientHello(t, "api.example.test"), "api.example.test", false},
		{"same SNI other case", clientHello(t, "API.example.test"), "api.example.test", false},
		{"other SNI", clientHello(t, "evil.test"), "api.example.test", true},
		{"no SNI", clientHello(t, ""), "api.example.test", false},
		{"HTTP same host", []byte("GET / HTTP/1.1\r\nHost: api.example.test:80\r\n\r\n"), "api.example.test", false},
		{"HTTP other host", []byte("GET / HTTP/1.1\r\nhost: evil.test\r\n\r\n"), "api.example.test", true},
		{"SSH", []byte("SSH-2.0-OpenSSH_9.2\r\n"), "api.example.test", false},
	}
	for _, tt := range tests {
		err := CheckFirstBytes(tt.first, host(t, tt.host))
		if got := errors.As(err, &fe); got != tt.front || (err != nil && !tt.front) {
			t.Errorf("%s: err = %v, want fronting=%v", tt.name, err, tt.front)
		}
	}
	// Incomplete messages wait for more.
	hello := clientHello(t, "evil.test")
	if err := CheckFirstBytes(hello[:20], host(t, "x.test")); !errors.Is(err, errNeedMore) {
		t.Errorf("partial hello: %v", err)
	}
	if err := CheckFirstBytes([]byte("GET / HTTP/1.1\r\nHost: evil.test\r\n"), host(t, "x.test")); !errors.Is(err, errNeedMore) {
		t.Errorf("partial head: %v", err)
	}
}

func TestTunnelFrontingClosed(t *testing.T) {
	tlsBe := newBackend(t, true)
	h := newHarness(t, []string{"api.example.test", "127.0.0.1"}, nil)
	for _, proto := range []string{"connect", "socks5"} {
		var c net.Conn
		if proto == "connect" {
			c = h.dial()
			fmt.Fprintf(c, "CONNECT api.example.test:%d HTTP/1.1\r\nHost: api.example.test:%d\r\n\r\n", tlsBe.port, tlsBe.port)
			buf := make([]byte, 512)
			n, _ := c.Read(buf)
			if string(buf[:12]) != "HTTP/1.1 200" {
				t.Fatalf("CONNECT reply %q", buf[:n])
			}
		} else {
			var code byte
			code, c = h.socks("api.example.test", tlsBe.port)
			if code != socksSucceeded {
				t.Fatalf("socks reply %d", code)
			}
		}
		// TLS naming another host through the tunnel: the proxy closes it.
		tc := tls.Client(c, &tls.Config{ServerName: "evil.test", InsecureSkipVerify: true})
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err == nil {
			t.Errorf("%s: handshake through a fronted tunnel succeeded", proto)
		}
		io.Copy(io.Discard, c)
		c.Close()
	}
	time.Sleep(100 * time.Millisecond)
	if n := tlsBe.hits.Load(); n != 0 {
		t.Errorf("backend got %d requests", n)
	}
	denied := 0
	for _, e := range h.eventsFor("api.example.test") {
		if e.Decision == "deny" && e.Reason != "" {
			denied++
		}
	}
	if denied != 2 {
		t.Errorf("%d fronting denials in the audit, want 2: %+v", denied, h.eventsFor("api.example.test"))
	}
}

func FuzzCheckFirstBytes(f *testing.F) {
	f.Add(clientHello(f, "a.test"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"))
	f.Add([]byte{0x16, 3, 1, 0, 5, 1, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		CheckFirstBytes(b, netrules.Host{Name: "a.test"})
	})
}

// Every request head in a plaintext tunnel names the tunnel's host: a
// second request on a keep-alive connection, pipelined requests, a leading
// empty line or an unusual method naming another Host never reach the
// server.
func TestTunnelEveryRequestChecked(t *testing.T) {
	var mu sync.Mutex
	var hosts []string
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	defer be.Close()
	port := be.Listener.Addr().(*net.TCPAddr).Port
	h := newHarness(t, []string{"api.example.test", "127.0.0.1"}, nil)
	good := fmt.Sprintf("GET / HTTP/1.1\r\nHost: api.example.test:%d\r\n\r\n", port)
	evil := "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n"
	tests := []struct {
		name   string
		writes []string
		goodOK int // requests with the right host that must arrive
	}{
		{"keep-alive second request", []string{good, evil}, 1},
		{"pipelined", []string{good + evil}, 1},
		{"leading empty line", []string{"\r\n" + evil}, 0},
		{"PROPFIND", []string{"PROPFIND / HTTP/1.1\r\nHost: evil.test\r\nContent-Length: 0\r\n\r\n"}, 0},
		{"absolute URI", []string{"GET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"}, 0},
		{"upgrade then another host", []string{fmt.Sprintf("GET / HTTP/1.1\r\nHost: api.example.test:%d\r\nUpgrade: foo\r\nConnection: upgrade\r\n\r\n", port), evil}, 0},
		{"tab after the method", []string{"GET\t/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"}, 0},
	}
	for _, tt := range tests {
		mu.Lock()
		hosts = nil
		mu.Unlock()
		c := h.dial()
		fmt.Fprintf(c, "CONNECT api.example.test:%d HTTP/1.1\r\nHost: api.example.test:%d\r\n\r\n", port, port)
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: CONNECT: %v %v", tt.name, resp, err)
		}
		for _, w := range tt.writes {
			c.Write([]byte(w))
			time.Sleep(50 * time.Millisecond)
		}
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		io.Copy(io.Discard, br)
		c.Close()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		got := slices.Clone(hosts)
		mu.Unlock()
		if slices.Contains(got, "evil.test") || len(got) != tt.goodOK {
			t.Errorf("%s: the server saw hosts %q, want %d request(s) for the tunnel's host only", tt.name, got, tt.goodOK)
		}
	}
}

// A request that names another host in a way some servers honour never
// reaches the tunnel's server: a request line after white space that the
// server skips (Python's http.server takes it), an absolute-form target
// with no Host header (RFC 9112 §3.2.2: the server takes the target's
// host), first on the stream or after a good request.
func TestTunnelOtherHostForms(t *testing.T) {
	var mu sync.Mutex
	var got bytes.Buffer
	port := rawServer(t, func(c net.Conn) {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 4096)
		for {
			n, err := c.Read(b)
			mu.Lock()
			got.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		}
	})
	h := newHarness(t, []string{"api.example.test", "127.0.0.1"}, nil)
	good := fmt.Sprintf("GET /good HTTP/1.1\r\nHost: api.example.test:%d\r\n\r\n", port)
	for _, evil := range []string{
		" GET /x HTTP/1.1\r\nHost: secret.example\r\n\r\n",
		"\x0bGET /x HTTP/1.1\r\nHost: secret.example\r\n\r\n",
		"\xa0GET /x HTTP/1.1\r\nHost: secret.example\r\n\r\n",
		"GET http://secret.example/x HTTP/1.0\r\n\r\n",
		"GET ftp://secret.example/x HTTP/1.1\r\n\r\n",
		good + "GET http://secret.example/x HTTP/1.1\r\n\r\n",
		good + " GET /x HTTP/1.1\r\nHost: secret.example\r\n\r\n",
		// Targets a URL parser resolves to another host.
		"GET //secret.example/a HTTP/1.0\r\n\r\n",
		"GET http:\\\\secret.example/a HTTP/1.0\r\n\r\n",
		"GET http:secret.example/a HTTP/1.0\r\n\r\n",
		// A request in a body, for a server that does not read bodies.
		fmt.Sprintf("GET /c1 HTTP/1.1\r\nHost: api.example.test:%d\r\nContent-Length: 46\r\n\r\nGET /x HTTP/1.1\r\nHost: secret.example\r\n\r\n", port),
		fmt.Sprintf("GET /c2 HTTP/1.1\r\nHost: api.example.test:%d\r\nContent-Length: 48\r\n\r\nGET  /x\tHTTP/1.1\r\nHost: secret.example\r\n\r\n", port),
	} {
		c := h.dial()
		fmt.Fprintf(c, "CONNECT api.example.test:%d HTTP/1.1\r\nHost: api.example.test:%d\r\n\r\n", port, port)
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		c.Write([]byte(evil))
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		io.Copy(io.Discard, br)
		c.Close()
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if bytes.Contains(got.Bytes(), []byte("secret.example")) {
		t.Errorf("the tunnel's server got a request for another host:\n%q", got.String())
	}
	if n := bytes.Count(got.Bytes(), []byte("/good")); n != 2 {
		t.Errorf("%d good requests arrived, want 2", n)
	}
}

// A closed plaintext tunnel leaves no checker goroutine behind.
func TestTunnelStreamStopsOnClose(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer be.Close()
	port := be.Listener.Addr().(*net.TCPAddr).Port
	h := newHarness(t, []string{"api.example.test", "127.0.0.1"}, nil)
	before := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		c := h.dial()
		fmt.Fprintf(c, "CONNECT api.example.test:%d HTTP/1.1\r\nHost: api.example.test:%d\r\n\r\n", port, port)
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: api.example.test:%d\r\n\r\n", port)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET: %v %v", resp, err)
		}
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+5 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+5 {
		t.Errorf("%d goroutines after 20 closed tunnels, %d before", n, before)
	}
}

func TestHTTPStart(t *testing.T) {
	for _, tc := range []struct {
		in        string
		yes, more bool
	}{
		{"GET / HTTP/1.1\r\n", true, false},
		{"\r\nPROPFIND /x http/1.1\n", true, false},
		{"GET http://other.example/\n", true, false}, // HTTP/0.9, absolute URI
		{"GET / HTTP/1.1", true, true},
		{"GET", false, true},
		{"EHLO client.example\r\n", false, false},
		{"ping 0\n", false, false},
		{"GET /\n", false, false},            // HTTP/0.9: no Host, the decided server
		{" GET / HTTP/1.1\r\n", true, false}, // a leading space: the head parser refuses it
		{"\x0bGET / HTTP/1.1\r\n", true, false},
		{"\xa0\x1cGET / HTTP/1.1\r\n", true, false},
		{" hello there\r\n", false, false},
		{"\x16\x03\x01", false, false},
		{"GET\t/ HTTP/1.1\r\n", true, false},
	} {
		yes, more := httpStart([]byte(tc.in))
		if yes != tc.yes || more != tc.more {
			t.Errorf("httpStart(%q) = %v, %v; want %v, %v", tc.in, yes, more, tc.yes, tc.more)
		}
	}
}

// A short first message and a half-close (ping, then shutdown(SHUT_WR)):
// the bytes held for the first-message check reach the server when the
// client ends its side, over CONNECT and SOCKS5 (they were dropped).
func TestTunnelHalfCloseFlushesHeldBytes(t *testing.T) {
	port := rawServer(t, func(c net.Conn) {
		b, _ := io.ReadAll(c) // until the client's half-close
		c.Write(append([]byte("echo:"), b...))
	})
	h := newHarness(t, []string{"127.0.0.1"}, nil)
	for _, proto := range []string{"connect", "socks5"} {
		var c net.Conn
		if proto == "connect" {
			c = h.dial()
			fmt.Fprintf(c, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port, port)
			br := bufio.NewReader(c)
			if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, "HTTP/1.1 200") {
				t.Fatalf("CONNECT reply %q", line)
			}
			for line, _ := br.ReadString('\n'); line != "\r\n" && line != ""; line, _ = br.ReadString('\n') {
			}
		} else {
			var code byte
			code, c = h.socks("127.0.0.1", port)
			if code != socksSucceeded {
				t.Fatalf("socks reply %d", code)
			}
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte("ping"))
		c.(interface{ CloseWrite() error }).CloseWrite()
		got, _ := io.ReadAll(c)
		if string(got) != "echo:ping" {
			t.Errorf("%s: %q, want echo:ping", proto, got)
		}
		c.Close()
	}
}
