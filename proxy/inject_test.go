package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/text/unicode/norm"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/netrules"
)

func TestInjectionForBoundHostOnly(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.URL.String()+"|"+r.Header.Get("Authorization")+"|"+r.Header.Get("X-Key")+"|"+string(body))
		mu.Unlock()
	}))
	defer be.Close()
	port := be.Listener.Addr().String()[strings.LastIndexByte(be.Listener.Addr().String(), ':')+1:]
	real := "realsecretvalue-0123456789"
	res, err := creds.MaskEnv([]string{"API_TOKEN=" + real}, creds.Config{Vars: map[string]creds.VarConfig{"API_TOKEN": {Hosts: []string{"api.example.test"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ph := res.Secrets[0].Placeholder
	h := newHarnessWith(t, []string{"api.example.test", "other.example.test", "127.0.0.1"}, nil, func(s *Server) { s.Secrets = res.Secrets })
	c := h.client()

	send := func(host string, basic bool) *http.Response {
		req, _ := http.NewRequest("POST", fmt.Sprintf("http://%s:%s/p?k=%s", host, port, ph), bytes.NewReader([]byte(`{"token":"`+ph+`"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Key", ph)
		if basic {
			req.SetBasicAuth("user", ph)
		} else {
			req.Header.Set("Authorization", "Bearer "+ph)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, basic := range []bool{false, true} {
		if resp := send("api.example.test", basic); resp.StatusCode != 200 {
			t.Fatalf("bound host: %d", resp.StatusCode)
		}
	}
	mu.Lock()
	if len(seen) != 2 {
		t.Fatalf("backend saw %d requests", len(seen))
	}
	for _, s := range seen {
		if strings.Contains(s, ph) || strings.Count(s, real) < 3 {
			t.Errorf("bound host did not get the real value everywhere: %q", s)
		}
	}
	if !strings.Contains(seen[1], "Basic ") {
		t.Errorf("basic auth lost: %q", seen[1])
	}
	mu.Unlock()

	// The placeholder sent to another allowed host: refused, audited by name.
	resp := send("other.example.test", false)
	if resp.StatusCode != 403 || !strings.Contains(resp.Header.Get("X-Sbx-Error"), "API_TOKEN") {
		t.Errorf("exfiltration: %d %q", resp.StatusCode, resp.Header.Get("X-Sbx-Error"))
	}
	mu.Lock()
	if len(seen) != 2 {
		t.Errorf("the unbound host was reached")
	}
	mu.Unlock()
	ev := h.eventsFor("other.example.test")
	if len(ev) != 1 || ev[0].Decision != "deny" || !strings.Contains(ev[0].Reason, "API_TOKEN") {
		t.Errorf("audit: %+v", ev)
	}
	h.mu.Lock()
	events := append([]Event(nil), h.events...)
	h.mu.Unlock()
	for _, e := range events {
		if strings.Contains(fmt.Sprint(e), real) {
			t.Errorf("audit event holds the real value: %+v", e)
		}
	}
}

func TestInjectionHTTPSTerminatesOnlyBoundHosts(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	be := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, "tls-ok "+r.Header.Get("Authorization")) // an echo
	}))
	defer be.Close()
	port := be.Listener.Addr().String()[strings.LastIndexByte(be.Listener.Addr().String(), ':')+1:]
	real := "realsecretvalue-https-42"
	res, _ := creds.MaskEnv([]string{"API_TOKEN=" + real}, creds.Config{Vars: map[string]creds.VarConfig{"API_TOKEN": {Hosts: []string{"example.com"}}}})
	ph := res.Secrets[0].Placeholder
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(be.Certificate())
	h := newHarnessWith(t, []string{"example.com", "other.example.test", "127.0.0.1"}, nil, func(s *Server) {
		s.Secrets, s.CA, s.UpstreamRoots = res.Secrets, ca, roots
		// httptest's certificate names example.com: the upstream check holds.
		s.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
	})

	c := h.client()
	tr := c.Transport.(*http.Transport)
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // to look at who answered
	var body []byte
	get := func(host string) *http.Response {
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://%s:%s/x", host, port), nil)
		req.Header.Set("Authorization", "Bearer "+ph)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := get("example.com")
	if string(body) != "tls-ok Bearer "+ph {
		t.Errorf("the terminated host's echo reached the client as %q", body)
	}
	if resp.StatusCode != 200 || resp.TLS.PeerCertificates[0].Issuer.CommonName != "sbx per-run CA" {
		t.Fatalf("bound host: %d, issuer %q", resp.StatusCode, resp.TLS.PeerCertificates[0].Issuer.CommonName)
	}
	mu.Lock()
	if len(auth) != 1 || auth[0] != "Bearer "+real {
		t.Errorf("bound host got %q", auth)
	}
	mu.Unlock()
	// Another host is tunnelled untouched: the client sees the real server.
	c.CloseIdleConnections()
	resp = get("other.example.test")
	if !resp.TLS.PeerCertificates[0].Equal(be.Certificate()) {
		t.Errorf("unbound host was terminated by sbx (issuer %q)", resp.TLS.PeerCertificates[0].Issuer.CommonName)
	}
	mu.Lock()
	if len(auth) != 2 || auth[1] != "Bearer "+ph {
		t.Errorf("unbound host: %q", auth)
	}
	mu.Unlock()
}

// TestBoundHostEchoGetsThePlaceholderBack: a bound host that sends the
// real value back (an echo, reflected in a header, split across writes,
// base64-encoded, gzip-compressed though identity was asked) reaches the
// client as the placeholder; a body sbx cannot search is refused.
func TestBoundHostEchoGetsThePlaceholderBack(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		w.Header().Set("X-Accept-Encoding", r.Header.Get("Accept-Encoding"))
		switch r.URL.Path {
		case "/split":
			for _, b := range body {
				w.Write([]byte{b})
				w.(http.Flusher).Flush()
			}
		case "/b64":
			io.WriteString(w, base64.StdEncoding.EncodeToString([]byte(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))))
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			zw.Write(body)
			zw.Close()
		case "/br":
			w.Header().Set("Content-Encoding", "br")
			w.Write(body)
		default:
			w.Write(body)
		}
	}))
	defer be.Close()
	port := be.Listener.Addr().String()[strings.LastIndexByte(be.Listener.Addr().String(), ':')+1:]
	real := "realsecretvalue-echo-0123456789"
	res, err := creds.MaskEnv([]string{"API_TOKEN=" + real}, creds.Config{Vars: map[string]creds.VarConfig{"API_TOKEN": {Hosts: []string{"api.example.test"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ph := res.Secrets[0].Placeholder
	h := newHarnessWith(t, []string{"api.example.test", "127.0.0.1"}, nil, func(s *Server) { s.Secrets = res.Secrets })
	c := h.client()
	post := func(path string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", fmt.Sprintf("http://api.example.test:%s%s", port, path),
			strings.NewReader(`{"text":"`+ph+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+ph)
		req.Header.Set("Accept-Encoding", "gzip, br")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	for _, tt := range []struct{ path, want string }{
		{"/", `{"text":"` + ph + `"}`},
		{"/split", `{"text":"` + ph + `"}`},
		{"/b64", base64.StdEncoding.EncodeToString([]byte(ph))},
		{"/gzip", `{"text":"` + ph + `"}`},
	} {
		resp, body := post(tt.path)
		if resp.StatusCode != 200 || body != tt.want {
			t.Errorf("%s: %d %q, want %q", tt.path, resp.StatusCode, body, tt.want)
		}
		if got := resp.Header.Get("X-Echo"); got != "Bearer "+ph {
			t.Errorf("%s: header %q", tt.path, got)
		}
		if resp.Header.Get("X-Accept-Encoding") != "identity" {
			t.Errorf("%s: the upstream was asked for %q", tt.path, resp.Header.Get("X-Accept-Encoding"))
		}
	}
	resp, body := post("/br")
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, real) {
		t.Errorf("br: %d %q", resp.StatusCode, body)
	}
}

// A binding that names a port holds for that port only; one without, for
// every port.
func TestBoundPort(t *testing.T) {
	res, err := creds.MaskEnv([]string{"A_TOKEN=value-one-0123456789", "B_TOKEN=value-two-0123456789"}, creds.Config{Vars: map[string]creds.VarConfig{
		"A_TOKEN": {Hosts: []string{"reg.example:8443"}}, "B_TOKEN": {Hosts: []string{"api.example"}}}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := res.Secrets[0], res.Secrets[1]
	for _, tc := range []struct {
		s    *creds.Secret
		host string
		port int
		want bool
	}{
		{a, "reg.example", 8443, true}, {a, "reg.example", 80, false}, {a, "reg.example", 443, false}, {a, "other.example", 8443, false},
		{b, "api.example", 80, true}, {b, "api.example", 443, true}, {b, "x.api.example", 443, false},
	} {
		h, _ := netrules.NormalizeHost(tc.host)
		if got := bound(tc.s, h, tc.port); got != tc.want {
			t.Errorf("%s bound to %s:%d = %v, want %v", tc.s.Name, tc.host, tc.port, got, tc.want)
		}
	}
}

// trailerBody sets the response's trailers when it ends, as net/http's
// chunked reader does.
type trailerBody struct {
	io.Reader
	resp *http.Response
	set  http.Header
}

func (b trailerBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF {
		for k, v := range b.set {
			b.resp.Trailer[k] = v
		}
	}
	return n, err
}

func (trailerBody) Close() error { return nil }

// Every place a bound host's response can carry the real value back gets
// the placeholder: the status line's reason, header names and values,
// trailers, a value cut off at the end of the body; a coding hidden
// behind an identity line is refused (found by the red team).
func TestRestoreResponseEverywhere(t *testing.T) {
	const real = "REALsecret0123456789abcdef"
	res, err := creds.MaskEnv([]string{"API_TOKEN=" + real}, creds.Config{Vars: map[string]creds.VarConfig{"API_TOKEN": {Hosts: []string{"api.example.test"}}}})
	if err != nil {
		t.Fatal(err)
	}
	red := creds.NewPlaceholderRedactor(res.Secrets)
	resp := &http.Response{Status: "200 " + real, Header: http.Header{"X-" + real: {"1"}, "X-Echo": {"v=" + real}}, Trailer: http.Header{}}
	resp.Body = trailerBody{strings.NewReader("cut " + real[:20]), resp, http.Header{"X-Trailer": {real}}}
	if err := restoreResponse(resp, red, nil); err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	var all strings.Builder
	fmt.Fprintf(&all, "%s %v %v %s", resp.Status, resp.Header, resp.Trailer, body)
	if strings.Contains(all.String(), real) || strings.Contains(all.String(), real[:20]) || resp.Trailer.Get("X-Trailer") == "" {
		t.Errorf("the real value came back: %s", all.String())
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("v=" + real))
	zw.Close()
	hidden := &http.Response{Header: http.Header{"Content-Encoding": {"identity", "gzip"}}, Body: io.NopCloser(&gz)}
	if err := restoreResponse(hidden, red, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(hidden.Body); strings.Contains(string(b), real) || !strings.HasPrefix(string(b), "v=") {
		t.Errorf("a gzip body behind an identity line: %q", b)
	}
	two := &http.Response{Header: http.Header{"Content-Encoding": {"gzip", "br"}}, Body: io.NopCloser(strings.NewReader("x"))}
	if err := restoreResponse(two, red, nil); err == nil {
		t.Error("two codings were passed unsearched")
	}
}

// A bound host whose response cannot be parsed, because it quotes the
// request back where a status line or a header belongs, gets a 502 from
// sbx: the transport's error, which quotes those bytes with the real value
// swapped in, never reaches the client.
func TestMalformedResponseKeepsTheSecret(t *testing.T) {
	port := rawServer(t, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		path := strings.Fields(line + " x x")[1]
		switch {
		case strings.HasPrefix(path, "/status/"):
			fmt.Fprintf(c, "HTTP/1.1 %s\r\n\r\n", path)
		default:
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nX-Echo %s\r\nContent-Length: 0\r\n\r\n", path)
		}
	})
	real := "realsecretvalue-malformed-0123456789"
	res, err := creds.MaskEnv([]string{"API_TOKEN=" + real}, creds.Config{Vars: map[string]creds.VarConfig{"API_TOKEN": {Hosts: []string{"api.example.test"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ph := res.Secrets[0].Placeholder
	h := newHarnessWith(t, []string{"api.example.test", "127.0.0.1"}, nil, func(s *Server) { s.Secrets = res.Secrets })
	for _, p := range []string{"/status/", "/header/"} {
		resp, err := h.client().Get(fmt.Sprintf("http://api.example.test:%d%s%s", port, p, ph))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		all := fmt.Sprint(resp.Header) + string(body)
		if resp.StatusCode != http.StatusBadGateway || strings.Contains(all, real) {
			t.Errorf("%s: %d %q", p, resp.StatusCode, all)
		}
	}
	for _, e := range h.eventsFor("api.example.test") {
		if strings.Contains(e.Error, real) {
			t.Errorf("the audit event holds the real value: %+v", e)
		}
	}
}

// An upstream that stops in the middle of a body (its connection cut
// before the length it announced, or before the last chunk) must not
// reach the client as a complete response: a proxy that re-chunks the
// body, or chunks it for a bound host's search, and then ends it normally
// turns a truncated download into one that looks whole.
func TestTruncatedBodyStaysTruncated(t *testing.T) {
	port := rawServer(t, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		path := strings.Fields(line + " x x")[1]
		switch path {
		case "/length":
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n%s", strings.Repeat("a", 5000))
		case "/chunked":
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1388\r\n%s\r\n", strings.Repeat("b", 5000))
		}
	})
	real := "realsecretvalue-truncated-0123456789"
	res, err := creds.MaskEnv([]string{"API_TOKEN=" + real}, creds.Config{Vars: map[string]creds.VarConfig{"API_TOKEN": {Hosts: []string{"api.example.test"}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, []string{"api.example.test", "plain.example.test", "127.0.0.1"}, nil, func(s *Server) { s.Secrets = res.Secrets })
	for _, host := range []string{"plain.example.test", "api.example.test"} {
		for _, p := range []string{"/length", "/chunked"} {
			resp, err := h.client().Get(fmt.Sprintf("http://%s:%d%s", host, port, p))
			if err != nil {
				t.Fatalf("%s%s: %v", host, p, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				t.Errorf("%s%s: %d, %d bytes read to a clean end (%q, %q): a cut body looks complete", host, p, resp.StatusCode, len(body), resp.TransferEncoding, resp.Header.Get("Content-Length"))
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(h.eventsFor(host)) < 2 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		for _, e := range h.eventsFor(host) {
			if !strings.Contains(e.Error, "ended early") {
				t.Errorf("%s: the audit event does not say the body was cut: %+v", host, e)
			}
		}
	}
}

// An HTTP/1.0 client reads a body of unknown length to the connection's
// end: a cut upstream body must end in a reset (the TCP socket the
// sandbox hands over), not a close that reads as a complete download.
func TestTruncatedBodyResetsHTTP10(t *testing.T) {
	port := rawServer(t, func(c net.Conn) {
		bufio.NewReader(c).ReadString('\n')
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1388\r\n%s\r\n", strings.Repeat("b", 5000))
	})
	h := newHarness(t, []string{"plain.example.test", "127.0.0.1"}, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go h.srv.Serve(ln)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET http://plain.example.test:%d/ HTTP/1.0\r\n\r\n", port)
	got, err := io.ReadAll(c)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("%d bytes read, then %v: want a reset (%q)", len(got), err, got[:min(len(got), 200)])
	}
}

// The same through TLS that sbx terminates for a bound host: the body it
// re-chunks for the search ends unfinished when the upstream's does.
func TestTruncatedBodyStaysTruncatedTerminated(t *testing.T) {
	be := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n%s", strings.Repeat("c", 5000))
		bw.Flush()
	}))
	defer be.Close()
	port := be.Listener.Addr().(*net.TCPAddr).Port
	res, _ := creds.MaskEnv([]string{"API_TOKEN=realsecretvalue-cut-tls-42"}, creds.Config{Vars: map[string]creds.VarConfig{"API_TOKEN": {Hosts: []string{"example.com"}}}})
	c := terminatingClient(t, res.Secrets, be.Certificate())
	resp, err := c.Get(fmt.Sprintf("https://example.com:%d/x", port))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Errorf("%d, %d bytes read to a clean end (%q): a cut body looks complete", resp.StatusCode, len(body), resp.TransferEncoding)
	}
	if resp.TLS == nil || resp.TLS.PeerCertificates[0].Issuer.CommonName != "sbx per-run CA" {
		t.Errorf("the bound host was not terminated by sbx")
	}
}

// A bound host's body of known length, searched by placeholders shaped
// like their values, keeps its length on the way to the client (plain and
// through terminated TLS): not re-chunked, the real values replaced
// (whole, encoded, cut off at the very end), and a Content-Length line
// whose digits a digits-only secret's redaction touched still true. A
// body sbx decodes goes out chunked.
func TestBoundHostBodyKeepsItsLength(t *testing.T) {
	const real, pin = "realsecretvalue-length-0123456789", "12345"
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := strings.Repeat("-", 4096) + "start " + real + " b64 " + base64.StdEncoding.EncodeToString([]byte(real)) + " end " + real[:20]
		switch r.URL.Path {
		case "/pin":
			body = strings.Repeat("x", 12345) // a Content-Length line holding the pin
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, body)
			zw.Close()
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		io.WriteString(w, body)
	})
	plain, tlsSrv := httptest.NewServer(h), httptest.NewTLSServer(h)
	defer plain.Close()
	defer tlsSrv.Close()
	res, err := creds.MaskEnv([]string{"API_TOKEN=" + real, "PIN_CODE=" + pin}, creds.Config{Vars: map[string]creds.VarConfig{
		"API_TOKEN": {Hosts: []string{"example.com"}}, "PIN_CODE": {Hosts: []string{"example.com"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ph := res.Secrets[0].Placeholder
	c := terminatingClient(t, res.Secrets, tlsSrv.Certificate())
	want := strings.Repeat("-", 4096) + "start " + ph + " b64 " + base64.StdEncoding.EncodeToString([]byte(ph)) + " end " + ph[:20]
	for _, base := range []string{"http://example.com:" + portOf(plain.URL), "https://example.com:" + portOf(tlsSrv.URL)} {
		for _, tt := range []struct {
			path   string
			length int64
			body   string
		}{
			{"/", int64(len(want)), want},
			{"/pin", 12345, strings.Repeat("x", 12345)},
			{"/gzip", -1, want},
		} {
			resp, err := c.Get(base + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != tt.body {
				t.Errorf("%s%s: %v, %d bytes %q…, want %d bytes %q…", base, tt.path, err, len(body), body[:min(len(body), 80)], len(tt.body), tt.body[:80])
			}
			if resp.ContentLength != tt.length || (tt.length >= 0) != (len(resp.TransferEncoding) == 0) {
				t.Errorf("%s%s: length %d (%q), want %d", base, tt.path, resp.ContentLength, resp.TransferEncoding, tt.length)
			}
			if strings.HasPrefix(base, "https") && resp.TLS.PeerCertificates[0].Issuer.CommonName != "sbx per-run CA" {
				t.Errorf("%s: not terminated by sbx", base)
			}
		}
		// HEAD: the length the GET would have, no body.
		resp, err := c.Head(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ContentLength != int64(len(want)) || len(body) != 0 {
			t.Errorf("HEAD %s: %d, length %d, %d bytes", base, resp.StatusCode, resp.ContentLength, len(body))
		}
	}
}

// portOf is a URL's port.
func portOf(u string) string { return u[strings.LastIndexByte(u, ':')+1:] }

// terminatingClient is a client of a proxy that allows example.com (and
// resolves it to 127.0.0.1), terminates TLS for the hosts secrets are
// bound to with a fresh CA, and trusts upstream as the server's
// certificate; the client itself trusts anyone, to look at who answered.
func terminatingClient(t *testing.T, secrets []*creds.Secret, upstream *x509.Certificate) *http.Client {
	t.Helper()
	c := terminatingHarness(t, secrets, upstream).client()
	c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	return c
}

// terminatingHarness is a proxy harness with secrets bound, a CA, and
// upstream's certificate trusted; every name resolves to 127.0.0.1.
func terminatingHarness(t *testing.T, secrets []*creds.Secret, upstream *x509.Certificate) *harness {
	t.Helper()
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(upstream)
	h := newHarnessWith(t, []string{"example.com", "127.0.0.1"}, nil, func(s *Server) {
		s.Secrets, s.CA, s.UpstreamRoots = secrets, ca, roots
		s.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
	})
	return h
}

// TestSOCKSToBoundHostIsTerminated: a SOCKS5 stream to a host a credential
// is bound to is served as the proxy's CONNECT is (TLS terminated, the
// placeholder swapped in, the answer searched), never tunnelled: a tunnel
// would hand the sandbox what the host sends back, real values included.
func TestSOCKSToBoundHostIsTerminated(t *testing.T) {
	const real = "realsecretvalue-socks-0123456789"
	var got atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("X-Token"))
		io.WriteString(w, "echo "+r.Header.Get("X-Token")+" stored "+real)
	})
	plain, tlsSrv, res := boundToExample(t, h, real)
	ph := res.Secrets[0].Placeholder
	hr := terminatingHarness(t, res.Secrets, tlsSrv.Certificate())
	for _, tt := range []struct {
		name string
		port string
		tls  bool
	}{{"plain", portOf(plain.URL), false}, {"tls", portOf(tlsSrv.URL), true}} {
		port, _ := strconv.Atoi(tt.port)
		code, c := hr.socks("example.com", port)
		if code != socksSucceeded {
			t.Fatalf("%s: SOCKS5 reply %d", tt.name, code)
		}
		conn := c
		if tt.tls {
			tc := tls.Client(c, &tls.Config{ServerName: "example.com", InsecureSkipVerify: true})
			if err := tc.Handshake(); err != nil {
				t.Fatalf("%s: handshake: %v", tt.name, err)
			}
			if cn := tc.ConnectionState().PeerCertificates[0].Issuer.CommonName; cn != "sbx per-run CA" {
				t.Errorf("%s: the certificate is %q's, not sbx's: tunnelled", tt.name, cn)
			}
			conn = tc
		}
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: example.com:%d\r\nX-Token: %s\r\nConnection: close\r\n\r\n", port, ph)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.Close()
		if g, _ := got.Load().(string); g != real {
			t.Errorf("%s: the host got %q, want the real value", tt.name, g)
		}
		if want := "echo " + ph + " stored " + ph; string(body) != want {
			t.Errorf("%s: the client got %q, want %q", tt.name, body, want)
		}
	}
}

// TestBoundHostHeaderNameHoldingAValue: a header name reaches the proxy
// case-folded, so a value inside it no longer matches its own case: such
// a header is dropped (a red-team pass read one back case-folded).
func TestBoundHostHeaderNameHoldingAValue(t *testing.T) {
	const real = "realSecretValue-Names-0123456789"
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["X-"+real] = []string{"v"}
		w.Header().Set("X-Kept", "k")
		io.WriteString(w, "ok")
	})
	plain, tlsSrv, res := boundToExample(t, h, real)
	c := terminatingClient(t, res.Secrets, tlsSrv.Certificate())
	resp, err := c.Get("http://example.com:" + portOf(plain.URL) + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for k := range resp.Header {
		if strings.Contains(strings.ToLower(k), strings.ToLower(real)) {
			t.Errorf("header %q reached the client", k)
		}
	}
	if resp.Header.Get("X-Kept") != "k" {
		t.Errorf("the other headers were dropped too: %v", resp.Header)
	}
}

// TestTunnelPlaceholderRefused: in a tunnel (CONNECT or SOCKS5) to a host
// no credential is bound to, a plaintext request head that carries a
// placeholder cuts the tunnel before it leaves, as the HTTP proxy refuses
// it (a red-team pass saw it pass through SOCKS5); a request without one
// goes through first.
func TestTunnelPlaceholderRefused(t *testing.T) {
	var hits, leaks atomic.Int32
	res, err := creds.MaskEnv([]string{"API_TOKEN=realsecretvalue-tunnel-0123456789"}, creds.Config{Vars: map[string]creds.VarConfig{
		"API_TOKEN": {Hosts: []string{"bound.test"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ph := res.Secrets[0].Placeholder
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if strings.Contains(r.URL.String(), ph) || strings.Contains(fmt.Sprint(r.Header), ph) || r.Header.Get("Authorization") != "" {
			leaks.Add(1)
		}
		io.WriteString(w, "ok")
	}))
	defer be.Close()
	port := be.Listener.Addr().(*net.TCPAddr).Port
	h := newHarnessWith(t, []string{"api.example.test", "127.0.0.1"}, nil, func(s *Server) { s.Secrets = res.Secrets })
	good := fmt.Sprintf("GET / HTTP/1.1\r\nHost: api.example.test:%d\r\n\r\n", port)
	basic := base64.StdEncoding.EncodeToString([]byte("user:" + ph))
	for _, leak := range []string{
		fmt.Sprintf("GET /?t=%s HTTP/1.1\r\nHost: api.example.test:%d\r\n\r\n", ph, port),
		fmt.Sprintf("GET / HTTP/1.1\r\nHost: api.example.test:%d\r\nX-Token: %s\r\n\r\n", port, ph),
		fmt.Sprintf("GET / HTTP/1.1\r\nHost: api.example.test:%d\r\nauthorization: Basic %s\r\n\r\n", port, basic),
	} {
		for _, via := range []string{"connect", "socks5"} {
			hits.Store(0)
			var c net.Conn
			var br *bufio.Reader
			if via == "connect" {
				c = h.dial()
				fmt.Fprintf(c, "CONNECT api.example.test:%d HTTP/1.1\r\nHost: api.example.test:%d\r\n\r\n", port, port)
				br = bufio.NewReader(c)
				if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
					t.Fatalf("CONNECT: %v %v", resp, err)
				}
			} else {
				code, sc := h.socks("api.example.test", port)
				if code != socksSucceeded {
					t.Fatalf("SOCKS5 reply %d", code)
				}
				c, br = sc, bufio.NewReader(sc)
			}
			c.Write([]byte(good))
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: the request without a placeholder: %v %v", via, resp, err)
			} else {
				io.Copy(io.Discard, resp.Body)
			}
			c.Write([]byte(leak))
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			io.Copy(io.Discard, br)
			c.Close()
			if hits.Load() != 1 {
				t.Errorf("%s %q: the server got %d requests, want only the first", via, leak, hits.Load())
			}
		}
	}
	if leaks.Load() != 0 {
		t.Errorf("%d placeholders reached the server", leaks.Load())
	}
	// A tunnel's event comes when it has closed.
	denied := 0
	for deadline := time.Now().Add(3 * time.Second); denied < 6 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		denied = 0
		for _, e := range h.eventsFor("api.example.test") {
			if e.Decision == "deny" && strings.Contains(e.Reason, "API_TOKEN") {
				denied++
			}
		}
	}
	if denied != 6 {
		t.Errorf("%d audited denials naming API_TOKEN, want 6: %+v", denied, h.eventsFor("api.example.test"))
	}
}

// boundToExample starts h as a plain and a TLS server (closed with the
// test) and masks API_TOKEN=real, bound to example.com.
func boundToExample(t *testing.T, h http.Handler, real string) (plain, tlsSrv *httptest.Server, res *creds.Result) {
	t.Helper()
	plain, tlsSrv = httptest.NewServer(h), httptest.NewTLSServer(h)
	t.Cleanup(plain.Close)
	t.Cleanup(tlsSrv.Close)
	res, err := creds.MaskEnv([]string{"API_TOKEN=" + real}, creds.Config{Vars: map[string]creds.VarConfig{
		"API_TOKEN": {Hosts: []string{"example.com"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return plain, tlsSrv, res
}

// A default binding (GITHUB_TOKEN to github.com) and a binding to port
// 443 hold for TLS only: a plain HTTP request carrying the placeholder is
// refused, and the real value never leaves; a binding that names another
// port, or none (chosen by the user), still takes plain HTTP.
func TestPlainHTTPOnlyWhereBoundForIt(t *testing.T) {
	const real = "ghp_REALREALREALREALREALREALREALREAL1234"
	for _, tc := range []struct {
		name  string
		cfg   creds.Config
		host  string
		port  int
		plain bool
	}{
		{"default binding", creds.Config{}, "github.com", 80, false},
		{"default binding on 443", creds.Config{}, "github.com", 443, false},
		{"default binding, any subdomain", creds.Config{}, "evil.github.com", 8003, false},
		{"bound to 443", creds.Config{Vars: map[string]creds.VarConfig{"GITHUB_TOKEN": {Hosts: []string{"git.example:443"}}}}, "git.example", 443, false},
		{"bound to a port", creds.Config{Vars: map[string]creds.VarConfig{"GITHUB_TOKEN": {Hosts: []string{"git.example:8080"}}}}, "git.example", 8080, true},
		{"bound without a port", creds.Config{Vars: map[string]creds.VarConfig{"GITHUB_TOKEN": {Hosts: []string{"git.example"}}}}, "git.example", 8080, true},
	} {
		res, err := creds.MaskEnv([]string{"GITHUB_TOKEN=" + real}, tc.cfg)
		if err != nil || len(res.Secrets) != 1 {
			t.Fatalf("%s: %v %v", tc.name, res, err)
		}
		sec := res.Secrets[0]
		s := &Server{Secrets: res.Secrets}
		r := httptest.NewRequest("GET", fmt.Sprintf("http://%s:%d/", tc.host, tc.port), nil)
		r.Header.Set("Authorization", "token "+sec.Placeholder)
		h, _ := netrules.NormalizeHost(tc.host)
		err = s.injectHTTP(r, h, tc.port)
		var ex *ExfiltrationError
		switch {
		case tc.plain && (err != nil || r.Header.Get("Authorization") != "token "+real):
			t.Errorf("%s: plain HTTP refused: %v", tc.name, err)
		case !tc.plain && (!errors.As(err, &ex) || !ex.Plain || strings.Contains(fmt.Sprint(r.Header), real)):
			t.Errorf("%s: the real value would go in clear: %v %v", tc.name, err, r.Header)
		}
		// Over TLS (a terminated tunnel's request) the value goes.
		r = httptest.NewRequest("GET", fmt.Sprintf("https://%s:%d/", tc.host, tc.port), nil)
		r.Header.Set("Authorization", "token "+sec.Placeholder)
		if err := s.injectHTTP(r, h, tc.port); err != nil || r.Header.Get("Authorization") != "token "+real {
			t.Errorf("%s: over TLS: %v", tc.name, err)
		}
	}
}

// A placeholder sent to a host it is not bound to is refused in the path
// percent-encoded whole and in a header's name too (a red team's forms).
func TestPlaceholderToUnboundHostOtherForms(t *testing.T) {
	res, err := creds.MaskEnv([]string{"RT_TOKEN=rtREALsecretVALUE0123456789abcdef"}, creds.Config{Vars: map[string]creds.VarConfig{"RT_TOKEN": {Hosts: []string{"bound.example"}}}})
	if err != nil || len(res.Secrets) != 1 {
		t.Fatal(res, err)
	}
	ph := res.Secrets[0].Placeholder
	var enc strings.Builder
	for i := 0; i < len(ph); i++ {
		fmt.Fprintf(&enc, "%%%02X", ph[i])
	}
	s := &Server{Secrets: res.Secrets}
	h, _ := netrules.NormalizeHost("other.example")
	for name, mk := range map[string]func() *http.Request{
		"percent-encoded path": func() *http.Request { return httptest.NewRequest("GET", "http://other.example/x/"+enc.String(), nil) },
		"header name": func() *http.Request {
			r := httptest.NewRequest("GET", "http://other.example/", nil)
			r.Header.Set("X-"+ph, "1")
			return r
		},
	} {
		var ex *ExfiltrationError
		if err := s.injectHTTP(mk(), h, 80); !errors.As(err, &ex) {
			t.Errorf("%s: not refused: %v", name, err)
		}
	}
}

// A netrc password is bound to its machine with no port: TLS only, as the
// file does not say it may travel in clear (a red team saw it sent on port
// 80 and in clear on 443).
func TestNetrcPasswordTLSOnly(t *testing.T) {
	m, err := creds.MaskFile(".netrc", "/h/.netrc", []byte("machine git.example login u password NETRCSECRET111111\n"))
	if err != nil || len(m.Secrets) != 1 {
		t.Fatal(m, err)
	}
	sec := m.Secrets[0]
	s := &Server{Secrets: m.Secrets}
	h, _ := netrules.NormalizeHost("git.example")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+sec.Placeholder))
	for _, port := range []int{80, 443} {
		r := httptest.NewRequest("GET", fmt.Sprintf("http://git.example:%d/", port), nil)
		r.Header.Set("Authorization", basic)
		var ex *ExfiltrationError
		if err := s.injectHTTP(r, h, port); !errors.As(err, &ex) || !ex.Plain {
			t.Errorf("plain HTTP to %d: %v %v", port, err, r.Header)
		}
	}
	r := httptest.NewRequest("GET", "https://git.example/", nil)
	r.Header.Set("Authorization", basic)
	if err := s.injectHTTP(r, h, 443); err != nil || !strings.Contains(r.Header.Get("Authorization"), base64.StdEncoding.EncodeToString([]byte("u:NETRCSECRET111111"))) {
		t.Errorf("over TLS: %v %v", err, r.Header)
	}
}

// A host name the sandboxed command chose is printed with its control
// characters and non-ASCII letters escaped in the blocked lines (they reach
// the terminal and the tool_result).
func TestBlockedLinesEscaped(t *testing.T) {
	var b Blocked
	b.Wrap(nil)(Event{Decision: "deny", Host: "\x1b[2K\rgithub.com", Port: 443, Reason: "r\x00"})
	b.Wrap(nil)(Event{Decision: "deny", Host: "g\u0456thub.com", Port: 443, Reason: "x"})
	got := strings.Join(b.Lines(), "\n")
	if strings.ContainsAny(got, "\x1b\r\x00\u0456") || !strings.Contains(got, `\x1b[2K\rgithub.com:443`) || !strings.Contains(got, `g\u0456thub.com`) {
		t.Errorf("%q", got)
	}
}

// A host name the command built from a secret's value (read from a file
// it may see) is written nowhere: the proxy lower-cases names, and its
// events reach sbx's stderr, the tool result and the audit file.
func TestEventsHoldNoSecretValue(t *testing.T) {
	real := "Zq7xK2mP9vR4tL8wN3bH6jF1"
	res, err := creds.MaskEnv([]string{"MY_API_TOKEN=" + real}, creds.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, []string{"allowed.test"}, nil, func(s *Server) { s.Secrets = res.Secrets })
	for _, host := range []string{real + ".example.test", strings.ToLower(real) + ".example.test",
		real[:8] + "." + real[8:] + ".example.test"} {
		resp, err := h.client().Get("http://" + host + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: %s", host, resp.Status)
		}
	}
	// Fullwidth letters (NFKC folds them back), in a raw CONNECT: a Go
	// client would send the ASCII form.
	fullwidth := strings.Map(func(r rune) rune { return r + 0xFEE0 }, real)
	c := h.dial()
	fmt.Fprintf(c, "CONNECT %s.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", fullwidth)
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.Contains(line, "403") {
		t.Errorf("fullwidth CONNECT: %q %v", line, err)
	}
	c.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) != 4 {
		t.Fatalf("events: %+v", h.events)
	}
	for _, e := range h.events {
		if s := strings.ReplaceAll(norm.NFKC.String(strings.ToLower(fmt.Sprint(e))), ".", ""); strings.Contains(s, strings.ToLower(real)) {
			t.Errorf("event holds the value: %+v", e)
		}
	}
}
