package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/netrules"
)

// backend is a local server that counts the requests it gets.
type backend struct {
	*httptest.Server
	hits atomic.Int32
	port int
}

func newBackend(t *testing.T, tlsToo bool) *backend {
	t.Helper()
	b := &backend{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "hello from %s", r.Host)
	})
	if tlsToo {
		b.Server = httptest.NewTLSServer(h)
	} else {
		b.Server = httptest.NewServer(h)
	}
	t.Cleanup(b.Close)
	b.port = b.Listener.Addr().(*net.TCPAddr).Port
	return b
}

type harness struct {
	t      *testing.T
	srv    *Server
	sock   string
	mu     sync.Mutex
	events []Event
}

// newHarness starts a proxy on a Unix socket. names maps test host names to
// 127.0.0.1 through the injected resolver.
func newHarness(t *testing.T, allow, deny []string) *harness {
	t.Helper()
	return newHarnessWith(t, allow, deny, nil)
}

// newHarnessWith lets a test set server fields before it serves.
func newHarnessWith(t *testing.T, allow, deny []string, configure func(*Server)) *harness {
	t.Helper()
	var a, d []netrules.Entry
	for _, p := range allow {
		a = append(a, netrules.Entry{Pattern: p, Origin: "test"})
	}
	for _, p := range deny {
		d = append(d, netrules.Entry{Pattern: p, Origin: "test"})
	}
	rules, err := netrules.Compile(a, d)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, sock: filepath.Join(t.TempDir(), "p.sock")}
	h.srv = &Server{
		Rules:  rules,
		Strict: true,
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if strings.HasSuffix(host, ".test") {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			if host == "localhost" {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, fmt.Errorf("no such host %s", host)
		},
		Audit: func(e Event) {
			h.mu.Lock()
			h.events = append(h.events, e)
			h.mu.Unlock()
		},
		OwnAddrs: []netip.Addr{},
	}
	if configure != nil {
		configure(h.srv)
	}
	ln, err := net.Listen("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	go h.srv.Serve(ln)
	t.Cleanup(func() { h.srv.Close() })
	return h
}

func (h *harness) dial() net.Conn {
	h.t.Helper()
	c, err := net.Dial("unix", h.sock)
	if err != nil {
		h.t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// client is an HTTP client whose proxy is the harness (absolute URIs for
// http, CONNECT for https).
func (h *harness) client() *http.Client {
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "sbx-proxy"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", h.sock)
		},
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the test's own TLS server
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// socks connects through SOCKS5 with a domain name and returns the reply
// code and the connection.
func (h *harness) socks(host string, port int) (byte, net.Conn) {
	h.t.Helper()
	c := h.dial()
	c.Write([]byte{5, 1, 0})
	var m [2]byte
	if _, err := io.ReadFull(c, m[:]); err != nil || m[1] != 0 {
		h.t.Fatalf("socks greeting: %v %v", m, err)
	}
	req := []byte{5, 1, 0, 3, byte(len(host))}
	req = append(req, host...)
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	c.Write(req)
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:4]); err != nil {
		h.t.Fatalf("socks reply: %v", err)
	}
	n := 6
	if rep[3] == 4 {
		n = 18
	}
	io.ReadFull(c, make([]byte, n))
	return rep[1], c
}

func (h *harness) eventsFor(host string) []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Event
	for _, e := range h.events {
		if e.Host == host {
			out = append(out, e)
		}
	}
	return out
}

func TestStrictEmptyAllowlistBlocksEverything(t *testing.T) {
	be := newBackend(t, false)
	tlsBe := newBackend(t, true)
	h := newHarness(t, nil, nil)
	c := h.client()

	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", be.port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("X-Sbx-Error") == "" || !strings.Contains(string(body), "127.0.0.1") {
		t.Errorf("HTTP: %d %q %q", resp.StatusCode, resp.Header.Get("X-Sbx-Error"), body)
	}
	_, err = c.Get(fmt.Sprintf("https://127.0.0.1:%d/", tlsBe.port))
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("CONNECT: err = %v, want 403", err)
	}
	code, sc := h.socks("example.test", be.port)
	sc.Close()
	if code != socksNotAllowed {
		t.Errorf("SOCKS5 reply %d, want %d", code, socksNotAllowed)
	}
	if n := be.hits.Load() + tlsBe.hits.Load(); n != 0 {
		t.Errorf("backends got %d hits, want 0", n)
	}
}

func TestAllowedHostOverEveryProtocol(t *testing.T) {
	be := newBackend(t, false)
	tlsBe := newBackend(t, true)
	// example.test resolves to 127.0.0.1, which only an IP rule opens.
	h := newHarness(t, []string{"example.test", "127.0.0.1"}, nil)
	c := h.client()
	resp, err := c.Get(fmt.Sprintf("http://example.test:%d/x", be.port))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HTTP: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp, err = c.Get(fmt.Sprintf("https://example.test:%d/x", tlsBe.port))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.CloseIdleConnections()
	code, sc := h.socks("example.test", be.port)
	if code != socksSucceeded {
		t.Fatalf("SOCKS5 reply %d", code)
	}
	fmt.Fprintf(sc, "GET / HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n")
	out, _ := io.ReadAll(sc)
	sc.Close()
	if !bytes.Contains(out, []byte("hello from")) {
		t.Errorf("SOCKS5 response %q", out)
	}
	if be.hits.Load() != 2 || tlsBe.hits.Load() != 1 {
		t.Errorf("hits: plain %d (want 2), tls %d (want 1)", be.hits.Load(), tlsBe.hits.Load())
	}
	time.Sleep(100 * time.Millisecond) // tunnels report on close
	evs := h.eventsFor("example.test")
	protos := map[string]bool{}
	for _, e := range evs {
		if e.Decision != "allow" || e.Rule != "example.test" {
			t.Errorf("event %+v", e)
		}
		if e.BytesDown == 0 {
			t.Errorf("event without bytes: %+v", e)
		}
		protos[e.Proto] = true
	}
	if !protos["http"] || !protos["connect"] || !protos["socks5"] {
		t.Errorf("events %+v", evs)
	}
}

func TestRebindingToLoopbackRefused(t *testing.T) {
	be := newBackend(t, false)
	h := newHarness(t, []string{"example.test"}, nil) // no IP rule for 127.0.0.1
	resp, err := h.client().Get(fmt.Sprintf("http://example.test:%d/", be.port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(body), "loopback") {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
	code, sc := h.socks("example.test", be.port)
	sc.Close()
	if code != socksNotAllowed || be.hits.Load() != 0 {
		t.Errorf("socks %d, hits %d", code, be.hits.Load())
	}
}

func TestLocalhostByName(t *testing.T) {
	be := newBackend(t, false)
	h := newHarness(t, []string{"localhost"}, nil)
	resp, err := h.client().Get(fmt.Sprintf("http://localhost:%d/", be.port))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	// The rule names localhost, not the address.
	resp, err = h.client().Get(fmt.Sprintf("http://127.0.0.1:%d/", be.port))
	if err != nil || resp.StatusCode != 403 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	if be.hits.Load() != 1 {
		t.Errorf("hits %d", be.hits.Load())
	}
}

func TestDeniedBeatsAllowed(t *testing.T) {
	be := newBackend(t, false)
	h := newHarness(t, []string{"*.example.test", "127.0.0.1"}, []string{"bad.example.test"})
	c := h.client()
	for host, want := range map[string]int{"ok.example.test": 200, "bad.example.test": 403, "example.test": 403, "x.bad.example.test": 200} {
		resp, err := c.Get(fmt.Sprintf("http://%s:%d/", host, be.port))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", host, resp.StatusCode, want)
		}
	}
	if ev := h.eventsFor("bad.example.test"); len(ev) != 1 || ev[0].Rule != "bad.example.test" || ev[0].Decision != "deny" {
		t.Errorf("deny event %+v", ev)
	}
}

// raw sends bytes on a fresh proxy connection and returns all it reads
// until the proxy closes or 2 s pass.
func (h *harness) raw(req string) string {
	c := h.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	c.Write([]byte(req))
	out, _ := io.ReadAll(c)
	return string(out)
}

func TestRequestHygiene(t *testing.T) {
	be := newBackend(t, false)
	h := newHarness(t, []string{"127.0.0.1", "ok.test"}, nil)
	u := fmt.Sprintf("http://127.0.0.1:%d/", be.port)
	tests := []struct{ name, req, want string }{
		{"host mismatch", "GET " + u + " HTTP/1.1\r\nHost: evil.test\r\n\r\n", "400"},
		{"two hosts", "GET " + u + " HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.test\r\n\r\n", "400"},
		{"CL and TE", "POST " + u + " HTTP/1.1\r\nHost: " + strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/") + "\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "400"},
		{"conflicting CL", "POST " + u + " HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde", "400"},
		{"bad TE", "POST " + u + " HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "501"},
		{"folding", "GET " + u + " HTTP/1.1\r\nX-A: a\r\n b\r\n\r\n", "400"},
		{"CONNECT without port", "CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n", "400"},
		{"userinfo", "GET http://a@127.0.0.1:1/ HTTP/1.1\r\n\r\n", "400"},
		{"huge head", "GET " + u + " HTTP/1.1\r\nX: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", "431"},
	}
	for _, tt := range tests {
		out := h.raw(tt.req)
		if !strings.HasPrefix(out, "HTTP/1.1 "+tt.want) {
			t.Errorf("%s: got %q, want %s", tt.name, firstLine(out), tt.want)
		}
	}
	if n := be.hits.Load(); n != 0 {
		t.Errorf("backend got %d hits from malformed requests", n)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func TestKeepAliveSecondHostDecidedAgain(t *testing.T) {
	be := newBackend(t, false)
	h := newHarness(t, []string{"127.0.0.1"}, nil)
	ok := fmt.Sprintf("127.0.0.1:%d", be.port)
	out := h.raw("GET http://" + ok + "/ HTTP/1.1\r\nHost: " + ok + "\r\n\r\n" +
		"GET http://blocked.test:" + fmt.Sprint(be.port) + "/ HTTP/1.1\r\nHost: blocked.test:" + fmt.Sprint(be.port) + "\r\n\r\n")
	if !strings.Contains(out, "200 OK") || !strings.Contains(out, "403 Forbidden") {
		t.Errorf("responses %q", out)
	}
	if be.hits.Load() != 1 {
		t.Errorf("hits %d, want 1", be.hits.Load())
	}
}

func TestChunkedRequestPassesFramer(t *testing.T) {
	be := newBackend(t, false)
	h := newHarness(t, []string{"127.0.0.1"}, nil)
	a := fmt.Sprintf("127.0.0.1:%d", be.port)
	out := h.raw("POST http://" + a + "/ HTTP/1.1\r\nHost: " + a + "\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n" +
		"GET http://" + a + "/ HTTP/1.1\r\nHost: " + a + "\r\nConnection: close\r\n\r\n")
	if strings.Count(out, "200 OK") != 2 || be.hits.Load() != 2 {
		t.Errorf("hits %d, out %q", be.hits.Load(), out)
	}
}

func TestCloseCutsTheNetwork(t *testing.T) {
	be := newBackend(t, false)
	h := newHarness(t, []string{"127.0.0.1"}, nil)
	code, sc := h.socks("127.0.0.1", be.port)
	if code != socksSucceeded {
		t.Fatal(code)
	}
	h.srv.Close()
	sc.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := sc.Read(make([]byte, 1)); err == nil {
		t.Error("tunnel still open after Close")
	}
	if c, err := net.Dial("unix", h.sock); err == nil {
		c.Close()
		t.Error("proxy still accepts after Close")
	}
}

func TestSOCKSCommands(t *testing.T) {
	h := newHarness(t, []string{"127.0.0.1"}, nil)
	c := h.dial()
	defer c.Close()
	c.Write([]byte{5, 1, 0, 5, 2, 0, 1, 127, 0, 0, 1, 0, 80}) // BIND
	out := make([]byte, 4)
	io.ReadFull(c, out[:2])
	io.ReadFull(c, out[:4])
	if out[1] != socksCommandUnsupported {
		t.Errorf("BIND reply %v", out)
	}
	c2 := h.dial()
	defer c2.Close()
	c2.Write([]byte{5, 1, 2}) // only user/pass offered
	io.ReadFull(c2, out[:2])
	if out[1] != 0xff {
		t.Errorf("no acceptable method reply %v", out[:2])
	}
}

func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"CONNECT a.test:443 HTTP/1.1\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"CONNECT [::1]:80 HTTP/1.1\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		h, err := ParseHead(head)
		if err != nil {
			return
		}
		if h.Method == "CONNECT" && !h.Tunnel {
			t.Fatal("CONNECT not a tunnel")
		}
		if h.ContentLength < -1 {
			t.Fatalf("length %d", h.ContentLength)
		}
	})
}

// FuzzFramer checks that the framer passes bytes through unchanged: what it
// returns is always a prefix of what it was given.
func FuzzFramer(f *testing.F) {
	f.Add([]byte("GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\nGET http://b/ HTTP/1.1\r\nHost: b\r\n\r\n"))
	f.Add([]byte("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX: y\r\n\r\nGET http://a/ HTTP/1.1\r\n\r\n"))
	f.Add([]byte("CONNECT a:1 HTTP/1.1\r\n\r\n\x16\x03\x01anything"))
	f.Fuzz(func(t *testing.T, in []byte) {
		fr := newFramer(bytes.NewReader(in))
		out, _ := io.ReadAll(fr)
		if !bytes.HasPrefix(in, out) {
			t.Fatalf("framer altered the stream:\n in %q\nout %q", in, out)
		}
	})
}

func FuzzSOCKSRequest(f *testing.F) {
	f.Add([]byte{5, 1, 0, 3, 4, 'a', '.', 't', 'e', 0, 80})
	f.Add([]byte{5, 1, 0, 1, 127, 0, 0, 1, 0, 80})
	f.Add([]byte{5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 187})
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := ReadSOCKSRequest(bufio.NewReader(bytes.NewReader(in)))
		if err == nil && (req.Cmd != 1 || req.Host == "" || req.Port < 0 || req.Port > 65535) {
			t.Fatalf("accepted %+v", req)
		}
	})
}

func TestToken(t *testing.T) {
	be := newBackend(t, false)
	h := newHarnessWith(t, []string{"127.0.0.1"}, nil, func(s *Server) { s.Token = "run-token" })
	u := fmt.Sprintf("http://127.0.0.1:%d/", be.port)
	if out := h.raw("GET " + u + " HTTP/1.1\r\nHost: " + strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/") + "\r\n\r\n"); !strings.HasPrefix(out, "HTTP/1.1 407") {
		t.Errorf("no token: %q", firstLine(out))
	}
	auth := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("sbx:run-token")) + "\r\n"
	if out := h.raw("GET " + u + " HTTP/1.1\r\nHost: " + strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/") + "\r\n" + auth + "Connection: close\r\n\r\n"); !strings.HasPrefix(out, "HTTP/1.1 200") {
		t.Errorf("with token: %q", firstLine(out))
	}
	if out := h.raw(fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", be.port)); !strings.HasPrefix(out, "HTTP/1.1 407") {
		t.Errorf("CONNECT without token: %q", firstLine(out))
	}
	// SOCKS5: only user/password with the token.
	c := h.dial()
	c.Write([]byte{5, 1, 0})
	rep := make([]byte, 2)
	io.ReadFull(c, rep)
	c.Close()
	if rep[1] != 0xff {
		t.Errorf("SOCKS without auth accepted: %v", rep)
	}
	c = h.dial()
	defer c.Close()
	c.Write([]byte{5, 1, 2})
	io.ReadFull(c, rep)
	c.Write(append(append([]byte{1, 3}, "sbx"...), append([]byte{5}, "wrong"...)...))
	io.ReadFull(c, rep)
	if rep[1] == 0 {
		t.Errorf("wrong SOCKS password accepted")
	}
	if be.hits.Load() != 1 {
		t.Errorf("hits %d, want 1", be.hits.Load())
	}
}

// A plain HTTP response the proxy only counts reaches the client as the
// server sent it: its Content-Length kept (a download's size known), not
// re-chunked, every byte there and counted in the audit event.
func TestPlainResponseKeepsItsLength(t *testing.T) {
	const size = 3<<20 + 17
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		io.Copy(w, io.LimitReader(neverEnding('z'), size))
	}))
	defer be.Close()
	h := newHarness(t, []string{"example.test", "127.0.0.1"}, nil)
	port := be.Listener.Addr().(*net.TCPAddr).Port
	resp, err := h.client().Get(fmt.Sprintf("http://example.test:%d/big", port))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != size {
		t.Fatalf("read %d bytes (%v), want %d", n, err, size)
	}
	if resp.ContentLength != size || len(resp.TransferEncoding) != 0 {
		t.Errorf("Content-Length %d, Transfer-Encoding %q: want %d and none", resp.ContentLength, resp.TransferEncoding, size)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(h.eventsFor("example.test")) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	evs := h.eventsFor("example.test")
	if len(evs) != 1 || evs[0].BytesDown != size {
		t.Errorf("events %+v, want one with %d bytes down", evs, size)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// rawServer serves TCP on 127.0.0.1 until the test ends, handing each
// connection to handle (and closing it after); it returns the port.
func rawServer(t *testing.T, handle func(net.Conn)) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// A WebSocket through the HTTP proxy (an absolute-URI GET with Upgrade, as
// a client without CONNECT sends it) passes frames both ways once the 101
// is in, and its bytes are counted; to a host a credential is bound to it
// is refused, since frames cannot be searched for real values.
func TestWebSocketThroughHTTPProxy(t *testing.T) {
	port := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		buf := make([]byte, 5)
		if _, err := io.ReadFull(br, buf); err == nil {
			c.Write(bytes.ToUpper(buf))
		}
	})
	res, _ := creds.MaskEnv([]string{"API_TOKEN=realsecretvalue-ws-0123456789"}, creds.Config{Vars: map[string]creds.VarConfig{"API_TOKEN": {Hosts: []string{"bound.example.test"}}}})
	h := newHarnessWith(t, []string{"ws.example.test", "bound.example.test", "127.0.0.1"}, nil, func(s *Server) { s.Secrets = res.Secrets })
	upgrade := func(host string) (string, net.Conn, *bufio.Reader) {
		c := h.dial()
		fmt.Fprintf(c, "GET http://%s:%d/chat HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", host, port, host, port)
		br := bufio.NewReader(c)
		status, _ := br.ReadString('\n')
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		return status, c, br
	}
	status, c, br := upgrade("ws.example.test")
	defer c.Close()
	if !strings.Contains(status, " 101 ") {
		t.Fatalf("status %q, want 101", status)
	}
	io.WriteString(c, "hello")
	got := make([]byte, 5)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "HELLO" {
		t.Fatalf("echo %q (%v), want HELLO", got, err)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(h.eventsFor("ws.example.test")) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if evs := h.eventsFor("ws.example.test"); len(evs) != 1 || evs[0].BytesUp < 5 || evs[0].BytesDown < 5 {
		t.Errorf("events %+v, want one with the frames counted", evs)
	}
	status, c2, _ := upgrade("bound.example.test")
	c2.Close()
	if !strings.Contains(status, " 502 ") {
		t.Errorf("bound host: status %q, want 502", status)
	}
}

// TestConnectionCloseIsHopByHop: a client's "Connection: close" closes its
// own connection after the answer, not the proxy's upstream one, which the
// next request to the host reuses.
func TestConnectionCloseIsHopByHop(t *testing.T) {
	var conns, hits atomic.Int32
	var closeSeen atomic.Bool
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Close {
			closeSeen.Store(true)
		}
		io.WriteString(w, "ok")
	}))
	be.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	be.Start()
	t.Cleanup(be.Close)
	h := newHarness(t, []string{"127.0.0.1"}, nil)
	hostport := be.Listener.Addr().String()
	const n = 5
	for i := 0; i < n; i++ {
		c := h.dial()
		fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hostport, hostport)
		out, err := io.ReadAll(c) // ends only when the proxy closes
		c.Close()
		if err != nil || !strings.HasPrefix(string(out), "HTTP/1.1 200") {
			t.Fatalf("request %d: %v %q", i, err, firstLine(string(out)))
		}
	}
	if hits.Load() != n {
		t.Errorf("backend hits %d, want %d", hits.Load(), n)
	}
	if got := conns.Load(); got > 2 {
		t.Errorf("backend saw %d connections for %d requests: the upstream one was not reused", got, n)
	}
	if closeSeen.Load() {
		t.Error("the client's Connection: close went upstream")
	}
}
