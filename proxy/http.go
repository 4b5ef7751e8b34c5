package proxy

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/elazarl/goproxy"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/netrules"
)

type ctxKey struct{}

// reqState travels with a request from the decision to the dial and the
// audit event.
type reqState struct {
	t     *target
	proto string // "http" or "connect"
	up    atomic.Int64
	down  atomic.Int64
	// body is the response body as the transport made it, counted.
	body *countBody
	// back, when set, turns the real values of the credentials bound to
	// the host back into their placeholders in the response.
	back *creds.Redactor
	// cut, for a plain HTTP request, is set when the response body ends
	// in an error: see abortCutBodies.
	cut *atomic.Bool
	// restoreErr is why a bound host's response cannot be searched (its
	// encoding): onResponse answers with it instead.
	restoreErr error
}

type cutKey struct{}

// connKey holds, in a plain HTTP request's context, its client connection.
type connKey struct{}

// abortCutBodies serves plain HTTP proxy requests with h and, when the
// upstream's response body ended in an error (the connection cut before
// the announced length or the last chunk), drops the client's connection
// instead of ending the response: goproxy ends it normally, and a body it
// re-chunked (every body of unknown length, and every bound host's body,
// which is searched) would reach the client as a complete, shorter file.
func abortCutBodies(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			h.ServeHTTP(w, r)
			return
		}
		cut := new(atomic.Bool)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), cutKey{}, cut)))
		if cut.Load() {
			// A response with no length and no chunks (an HTTP/1.0
			// client's) ends where the connection does: it must end in
			// a reset, not a close that reads as the end of the body.
			if c, ok := r.Context().Value(connKey{}).(*frontConn); ok {
				c.reset()
			}
			panic(http.ErrAbortHandler) // the server closes the connection, unfinished
		}
	})
}

// newGoproxy configures goproxy explicitly: no proxy from the environment,
// TLS verification on, sbx's own dialer, and sbx's decisions.
func (s *Server) newGoproxy() *goproxy.ProxyHttpServer {
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = log.New(io.Discard, "", 0)
	gp.Verbose = os.Getenv("SBX_PROXY_DEBUG") != ""
	if gp.Verbose {
		gp.Logger = log.New(os.Stderr, "goproxy ", 0)
	}
	gp.Tr = &http.Transport{
		Proxy:                 nil,
		DialContext:           s.dialForRequest,
		TLSClientConfig:       s.tlsConfig(),
		ForceAttemptHTTP2:     false,
		MaxIdleConns:          64,
		IdleConnTimeout:       90e9,
		TLSHandshakeTimeout:   15e9,
		ExpectContinueTimeout: 1e9,
		DisableCompression:    true,
	}
	gp.ConnectDial = nil
	// The client's Accept-Encoding goes upstream as it is (the client
	// decodes what it asked for), except to hosts a credential is bound
	// to, which are asked for identity (onRequest).
	gp.KeepAcceptEncoding = true
	gp.ConnectDialWithReq = func(req *http.Request, network, addr string) (net.Conn, error) {
		return s.dialForRequest(req.Context(), network, addr)
	}
	gp.NonproxyHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Sbx-Error", "not a proxy request")
		http.Error(w, "sbx proxy: not a proxy request (send an absolute URI or CONNECT)", http.StatusBadRequest)
	})
	gp.CertStore = &certCache{}
	gp.OnRequest().DoFunc(s.onRequest)
	gp.OnRequest().HandleConnectFunc(s.onConnect)
	gp.OnResponse().DoFunc(s.onResponse)
	return gp
}

// dialForRequest dials the target decided for this request; a request
// without a decision is refused (it cannot happen, but fail closed).
func (s *Server) dialForRequest(ctx context.Context, network, addr string) (net.Conn, error) {
	st, _ := ctx.Value(ctxKey{}).(*reqState)
	if st == nil || st.t == nil {
		return nil, errors.New("sbx proxy: dial without a decision")
	}
	host, port, err := splitPort(addr, 80)
	h, herr := netrules.NormalizeHost(host)
	if err != nil || herr != nil || port != st.t.port || h != st.t.host {
		return nil, fmt.Errorf("sbx proxy: dial to %s does not match the decided %s:%d", addr, st.t.host, st.t.port)
	}
	c, err := s.dial(ctx, st.t)
	if err != nil || st.proto != "connect" {
		return c, err
	}
	rule, src := ruleInfo(st.t.rule)
	ev := Event{Proto: "connect", Host: st.t.host.String(), Port: st.t.port, Decision: "allow", Rule: rule, Source: src,
		Addr: c.RemoteAddr().String()}
	return s.upstream(c, st.t, ev), nil
}

func denyResponse(r *http.Request, status int, reason string) *http.Response {
	body := fmt.Sprintf("sbx: request to %s blocked: %s\n", r.URL.Host, reason)
	resp := goproxy.NewResponse(r, goproxy.ContentTypeText, status, body)
	resp.Header.Set("X-Sbx-Error", reason)
	resp.Header.Set("X-Proxy-Error", "blocked-by-sbx")
	return resp
}

func defaultPort(scheme string) int {
	if strings.EqualFold(scheme, "https") {
		return 443
	}
	return 80
}

// authorized checks the per-run token on a proxy request.
func (s *Server) authorized(r *http.Request) bool {
	if s.Token == "" {
		return true
	}
	_, pass, ok := parseProxyAuth(r.Header.Get("Proxy-Authorization"))
	return ok && subtle.ConstantTimeCompare([]byte(pass), []byte(s.Token)) == 1
}

func parseProxyAuth(v string) (user, pass string, ok bool) {
	dec, ok := basicDecode(v)
	if !ok {
		return "", "", false
	}
	return strings.Cut(dec, ":")
}

func authRequired(r *http.Request) *http.Response {
	resp := denyResponse(r, http.StatusProxyAuthRequired, "the proxy needs this run's token")
	resp.Header.Set("Proxy-Authenticate", `Basic realm="sbx"`)
	return resp
}

// onRequest decides a plain (absolute-URI) HTTP request.
func (s *Server) onRequest(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	// goproxy gives every plain request a fresh context; requests inside a
	// terminated tunnel share the CONNECT's, already marked as authorised.
	if ctx.UserData == nil && !s.authorized(r) {
		return r, authRequired(r)
	}
	if r.URL.Scheme != "http" && r.URL.Scheme != "https" {
		return r, denyResponse(r, http.StatusBadRequest, "only http and https URIs are proxied")
	}
	host, port, err := splitPort(r.URL.Host, defaultPort(r.URL.Scheme))
	if err != nil {
		return r, denyResponse(r, http.StatusBadRequest, err.Error())
	}
	t, d := s.authorize(r.Context(), host, port)
	if d != nil {
		s.deny("http", host, port, d)
		return r, denyResponse(r, http.StatusForbidden, d.reason)
	}
	if err := s.injectHTTP(r, t.host, t.port); err != nil {
		d := &denial{reason: err.Error(), rule: t.rule}
		s.deny("http", host, port, d)
		return r, denyResponse(r, http.StatusForbidden, err.Error())
	}
	st := &reqState{t: t, proto: "http"}
	st.cut, _ = r.Context().Value(cutKey{}).(*atomic.Bool)
	if bound := s.boundTo(t.host, t.port); len(bound) > 0 {
		// The host may send a real value back (an echo, a token
		// endpoint): the response is searched, so it must come as is.
		r.Header.Set("Accept-Encoding", "identity")
		st.back = creds.NewPlaceholderRedactor(bound)
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &countBody{ReadCloser: r.Body, n: &st.up, size: r.ContentLength}
	}
	ctx.UserData = st
	ctx.RoundTripper = st
	out := r.WithContext(context.WithValue(r.Context(), ctxKey{}, st))
	// "Connection: close" is hop-by-hop: the client's connection closes
	// after this answer (the server keeps r's flag), while the upstream
	// one may serve the next request to the same host, as it does for a
	// client that keeps its connection.
	out.Close = false
	return out, nil
}

// onResponse reports an HTTP request once its response body is done.
func (s *Server) onResponse(resp *http.Response, ctx *goproxy.ProxyCtx) *http.Response {
	st, _ := ctx.UserData.(*reqState)
	if st == nil {
		return resp // a response sbx made itself
	}
	rule, src := ruleInfo(st.t.rule)
	ev := Event{Proto: "http", Host: st.t.host.String(), Port: st.t.port, Decision: "allow", Rule: rule, Source: src}
	if resp == nil {
		// goproxy would answer with the transport's error, which quotes
		// what the upstream sent (a status line, a header): from a bound
		// host that may be a real value, so sbx answers itself.
		reason := "the upstream's response could not be read"
		if ctx.Error != nil {
			ev.Error = ctx.Error.Error()
			if st.back != nil {
				ev.Error = st.back.Redact(ev.Error)
			} else {
				reason += ": " + ev.Error
			}
		}
		ev.BytesUp = st.up.Load()
		s.audit(ev)
		return denyResponse(ctx.Req, http.StatusBadGateway, reason)
	}
	if st.back != nil && resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body.Close()
		ev.Error = "a WebSocket (or other switched protocol) to a host a credential is bound to: its frames cannot be searched for the real value"
		s.audit(ev)
		return denyResponse(resp.Request, http.StatusBadGateway, ev.Error)
	}
	if st.restoreErr != nil {
		resp.Body.Close()
		ev.Error = st.restoreErr.Error()
		s.audit(ev)
		return denyResponse(resp.Request, http.StatusBadGateway, ev.Error)
	}
	if st.body == nil {
		// A response the transport did not make (cannot happen): count
		// it here, at the cost of its Content-Length.
		resp.Body = &countBody{ReadCloser: resp.Body, n: &st.down, size: -1, cut: st.cut}
		st.body = resp.Body.(*countBody)
	}
	var once sync.Once
	st.body.onClose = func() {
		once.Do(func() {
			if st.cut != nil && st.cut.Load() {
				ev.Error = "the response body ended early (the upstream's connection was cut); the client's connection was dropped so it cannot pass for complete"
			}
			ev.BytesUp, ev.BytesDown = st.up.Load(), st.down.Load()
			s.audit(ev)
		})
	}
	return resp
}

// RoundTrip sends the request upstream and counts the response body where
// the transport made it, and for a bound host searches it there too:
// goproxy keeps the upstream Content-Length only for the body it got from
// here, so a body merely counted, or searched by a redactor that keeps
// lengths, is passed on with its length known to the client (not
// re-chunked: one write per read instead of three through terminated TLS).
func (st *reqState) RoundTrip(req *http.Request, ctx *goproxy.ProxyCtx) (*http.Response, error) {
	resp, err := ctx.Proxy.Tr.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	st.body = &countBody{ReadCloser: resp.Body, n: &st.down, size: resp.ContentLength, cut: st.cut}
	resp.Body = st.body
	switch {
	case resp.StatusCode == http.StatusSwitchingProtocols:
		if rw, ok := st.body.ReadCloser.(io.Writer); ok && st.back == nil {
			// A WebSocket: goproxy relays it only through a body it can
			// write to; what the client sends is counted as sent up. (To
			// a bound host onResponse refuses it.)
			resp.Body = &countRW{st.body, rw, &st.up}
		}
	case st.back != nil:
		st.restoreErr = restoreResponse(resp, st.back, st.cut)
	}
	return resp, nil
}

// countRW is a switched protocol's body (a WebSocket), counted both ways.
type countRW struct {
	*countBody
	w  io.Writer
	up *atomic.Int64
}

// Write counts p before it is sent: the answer to it may come back, and
// the exchange end (and be audited), before a count made after the send
// returned would run. A short write takes back what was not sent.
func (c *countRW) Write(p []byte) (int, error) {
	c.up.Add(int64(len(p)))
	n, err := c.w.Write(p)
	if n < len(p) {
		c.up.Add(int64(n - len(p)))
	}
	return n, err
}

// onConnect decides a CONNECT tunnel.
func (s *Server) onConnect(hostport string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	if !s.authorized(ctx.Req) {
		ctx.Resp = authRequired(ctx.Req)
		return goproxy.RejectConnect, hostport
	}
	ctx.UserData = tunnelMark{}
	host, port, err := splitPort(hostport, 0)
	if err != nil || port == 0 {
		ctx.Resp = denyResponse(ctx.Req, http.StatusBadRequest, "CONNECT target must be host:port")
		return goproxy.RejectConnect, hostport
	}
	t, d := s.authorize(ctx.Req.Context(), host, port)
	if d != nil {
		s.deny("connect", host, port, d)
		ctx.Resp = denyResponse(ctx.Req, http.StatusForbidden, d.reason)
		return goproxy.RejectConnect, hostport
	}
	if s.terminates(t.host, t.port) {
		// A bound credential: terminate TLS so the placeholder can be
		// swapped in; each request inside is decided and audited again.
		return s.mitmAction(), hostport
	}
	// The tunnel's bytes are counted on the upstream side (dialForRequest)
	// and reported when it closes.
	st := &reqState{t: t, proto: "connect"}
	ctx.Req = ctx.Req.WithContext(context.WithValue(ctx.Req.Context(), ctxKey{}, st))
	return goproxy.OkConnect, hostport
}

// tunnelMark marks a goproxy context that passed CONNECT's checks.
type tunnelMark struct{}

type countBody struct {
	io.ReadCloser
	n       *atomic.Int64
	onClose func()
	// size is the body's length when known, else -1.
	size int64
	// cut, when set, records a read that ended in an error other than EOF.
	cut *atomic.Bool
}

func (b *countBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	if err != nil && err != io.EOF && b.cut != nil {
		b.cut.Store(true)
	}
	return n, err
}

// copyBufSize is the buffer a response body is copied through: large
// reads and writes go straight to the sockets, past the transport's and
// the server's small buffers.
const copyBufSize = 256 << 10

// WriteTo copies the body to w through one large buffer (io.Copy would
// use 32 KiB, and the server's chunk writer smaller writes still).
func (b *countBody) WriteTo(w io.Writer) (int64, error) {
	size := copyBufSize
	if b.size >= 0 && b.size < copyBufSize {
		size = max(int(b.size)+1, 512) // room to see the end in one read
	}
	buf := make([]byte, size)
	var total int64
	for {
		n, err := b.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
			if m < n {
				return total, io.ErrShortWrite
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

func (b *countBody) Close() error {
	err := b.ReadCloser.Close()
	if b.onClose != nil {
		b.onClose()
	}
	return err
}

// chanListener hands connections accepted elsewhere to an http.Server.
type chanListener struct {
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) deliver(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.UnixAddr{Name: "sbx-proxy", Net: "unix"} }
