package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/sbx-sandbox/sbx/netrules"
)

// maxFirstBytes bounds what a tunnel buffers to read the client's first
// message (a TLS ClientHello or an HTTP request head).
const maxFirstBytes = 64 << 10

// errNeedMore means the first message is not complete yet.
var errNeedMore = errors.New("need more bytes")

// FrontingError is a tunnel closed because its first message names another
// host than the one the tunnel was opened (and decided) for.
type FrontingError struct {
	Decided, Named string
}

func (e *FrontingError) Error() string {
	return fmt.Sprintf("tunnel to %s carries a request for %s (domain fronting)", e.Decided, e.Named)
}

// CheckFirstBytes inspects the first bytes a client sends through a tunnel
// to host. A TLS ClientHello whose SNI names another host, or a plaintext
// HTTP request whose Host header names another host, is a *FrontingError.
// It returns errNeedMore while the message is incomplete; other protocols
// pass.
func CheckFirstBytes(first []byte, host netrules.Host) error {
	if len(first) == 0 {
		return errNeedMore
	}
	switch {
	case first[0] == 0x16: // TLS handshake record
		sni, err := clientHelloSNI(first)
		if err != nil {
			return err
		}
		return compareNamed(sni, host)
	case looksLikeHTTP(first):
		end := bytes.Index(first, []byte("\r\n\r\n"))
		if end < 0 {
			if len(first) >= maxFirstBytes {
				return &FrontingError{Decided: host.String(), Named: "(an oversized request head)"}
			}
			return errNeedMore
		}
		for _, line := range strings.Split(string(first[:end]), "\r\n")[1:] {
			name, value, ok := strings.Cut(line, ":")
			if ok && strings.EqualFold(strings.TrimSpace(name), "host") {
				h := strings.TrimSpace(value)
				if hh, _, err := net.SplitHostPort(h); err == nil {
					h = hh
				}
				return compareNamed(h, host)
			}
		}
	}
	return nil
}

// looksLikeHTTP reports whether b starts with an HTTP method and a space.
func looksLikeHTTP(b []byte) bool {
	for _, m := range []string{"GET ", "POST ", "PUT ", "DELETE ", "HEAD ", "OPTIONS ", "PATCH ", "TRACE ", "CONNECT "} {
		if bytes.HasPrefix(b, []byte(m)) {
			return true
		}
	}
	return false
}

// compareNamed checks a name found inside the tunnel against the decided
// host. An empty name (no SNI) passes: the tunnel goes where it was decided.
func compareNamed(named string, host netrules.Host) error {
	if named == "" {
		return nil
	}
	h, err := netrules.NormalizeHost(named)
	if err != nil || h != host {
		return &FrontingError{Decided: host.String(), Named: named}
	}
	return nil
}

// clientHelloSNI parses a ClientHello with crypto/tls and returns its
// server name.
func clientHelloSNI(b []byte) (string, error) {
	if len(b) < 5 {
		return "", errNeedMore
	}
	recLen := int(b[3])<<8 | int(b[4])
	if len(b) < 5+recLen {
		if len(b) >= maxFirstBytes {
			return "", errors.New("oversized TLS record")
		}
		return "", errNeedMore
	}
	var sni string
	got := errors.New("got the hello")
	conn := tls.Server(&replayConn{r: bytes.NewReader(b)}, &tls.Config{
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			sni = hello.ServerName
			return nil, got
		},
	})
	err := conn.Handshake()
	if errors.Is(err, got) {
		return sni, nil
	}
	if (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) && len(b) < maxFirstBytes {
		return "", errNeedMore // the hello continues in the next record
	}
	// A ClientHello spread over several records, or not a hello at all:
	// with the whole first record present and no hello, refuse to guess.
	return "", fmt.Errorf("unreadable TLS ClientHello: %w", err)
}

// replayConn feeds recorded bytes to crypto/tls and discards its writes.
type replayConn struct{ r io.Reader }

func (c *replayConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *replayConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *replayConn) Close() error                     { return nil }
func (c *replayConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *replayConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *replayConn) SetDeadline(time.Time) error      { return nil }
func (c *replayConn) SetReadDeadline(time.Time) error  { return nil }
func (c *replayConn) SetWriteDeadline(time.Time) error { return nil }

// firstCheck holds a tunnel's first bytes until CheckFirstBytes decides.
// A plaintext HTTP stream is then checked request by request (http set).
type firstCheck struct {
	host netrules.Host
	// leak, when set, refuses a plaintext request head in the tunnel
	// that carries the placeholder of a credential not bound there.
	leak    func(head []byte) error
	pending []byte
	done    bool
	http    bool
	err     error
}

// httpStart reports whether b starts (after empty lines) with an HTTP
// request line: a method token, a space, and a line that names an HTTP
// version or an absolute URI (HTTP/0.9 has no Host header, so a bare path
// can only reach the decided host). more is set while the first line is
// incomplete. A line protocol (SMTP's "EHLO x", "ping 1") passes as
// opaque instead of waiting for a head that never comes.
func httpStart(b []byte) (yes, more bool) {
	b = bytes.TrimLeft(b, "\r\n")
	// Bytes some servers skip before a request line (Python's reads the
	// line with str.split(), which takes any white space): what follows
	// them is judged, and the head parser then refuses such a line.
	if t := bytes.TrimLeft(b, skippedBeforeRequest); len(t) < len(b) {
		return httpStart(t)
	}
	for i, c := range b {
		switch {
		case c == ' ' || c == '\t':
			// A tab: servers may take it for the space (RFC 9112);
			// the head parser then refuses it.
			if i == 0 {
				return false, false
			}
			line, _, complete := bytes.Cut(b, []byte("\n"))
			if !complete {
				return true, true
			}
			return bytes.Contains(bytes.ToUpper(line), []byte("HTTP/")) || bytes.Contains(line, []byte("://")), false
		case c > ' ' && c < 0x7f && !strings.ContainsRune("\"(),/:;<=>?@[\\]{}", rune(c)):
		default:
			return false, false
		}
	}
	return false, len(b) < 32
}

// skippedBeforeRequest is white space other than CR and LF that a server
// may skip before a request line.
const skippedBeforeRequest = " \t\v\f\x1c\x1d\x1e\x1f\x85\xa0"

// feed adds client bytes; it returns what may now go upstream, or the
// refusal.
func (f *firstCheck) feed(p []byte) ([]byte, error) {
	if f.done {
		return p, f.err
	}
	f.pending = append(f.pending, p...)
	if f.pending[0] != 0x16 {
		yes, more := httpStart(f.pending)
		if more && len(f.pending) < maxFirstBytes {
			return nil, nil
		}
		if yes {
			// Every request head on the stream is checked from here on.
			f.done, f.http = true, true
			out := f.pending
			f.pending = nil
			return out, nil
		}
	}
	err := CheckFirstBytes(f.pending, f.host)
	if errors.Is(err, errNeedMore) && len(f.pending) < maxFirstBytes {
		return nil, nil
	}
	f.done = true
	if errors.Is(err, errNeedMore) {
		err = nil // big and still incomplete: not TLS or HTTP we can read
	}
	f.err = err
	out := f.pending
	f.pending = nil
	if err != nil {
		return nil, err
	}
	return out, nil
}

// finish decides on what is held when the client's side has ended: a
// complete first message is checked as usual; an incomplete one that
// starts like HTTP is refused (its Host could not be read), anything else
// passes.
func (f *firstCheck) finish() ([]byte, error) {
	f.done = true
	err := CheckFirstBytes(f.pending, f.host)
	if errors.Is(err, errNeedMore) {
		err = nil
		if yes, _ := httpStart(f.pending); yes && f.pending[0] != 0x16 {
			err = &FrontingError{Decided: f.host.String(), Named: "(an HTTP request cut off by the end of the stream)"}
		}
	}
	f.err = err
	out := f.pending
	f.pending = nil
	if err != nil {
		return nil, err
	}
	return out, nil
}

// tunnelStream checks a plaintext HTTP stream inside a tunnel request by
// request: every head (keep-alive, pipelined, any method, after empty
// lines) must name the tunnel's host, or the tunnel is cut.
type tunnelStream struct {
	pw   *io.PipeWriter
	done chan struct{}
}

// newTunnelStream starts passing what is written to it, checked, to up;
// refused is told why the tunnel was cut.
func newTunnelStream(up net.Conn, check *firstCheck, count func(int), refused func(error)) *tunnelStream {
	host := check.host
	pr, pw := io.Pipe()
	ts := &tunnelStream{pw: pw, done: make(chan struct{})}
	f := newFramer(pr)
	f.check = func(h *Head) error {
		if h.Tunnel {
			// Whether the server took the upgrade is in its answer, which
			// is not read here: what follows cannot be told apart.
			return &FrontingError{Decided: host.String(), Named: "(an Upgrade or CONNECT inside a tunnel)"}
		}
		if !plainTarget(h.Target) {
			return &FrontingError{Decided: host.String(), Named: fmt.Sprintf("(a request target a server may read as another host: %q)", h.Target)}
		}
		for _, name := range namedHosts(h) {
			if hh, _, err := net.SplitHostPort(name); err == nil {
				name = hh
			}
			if err := compareNamed(strings.Trim(name, "[]"), host); err != nil {
				return err
			}
		}
		if check.leak != nil {
			return check.leak(h.raw)
		}
		return nil
	}
	go func() {
		defer close(ts.done)
		buf := make([]byte, 32<<10)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				w, werr := up.Write(buf[:n])
				count(w)
				if werr != nil {
					pr.CloseWithError(werr)
					return
				}
			}
			if errors.Is(err, io.EOF) {
				if cw, ok := up.(interface{ CloseWrite() error }); ok {
					cw.CloseWrite()
				}
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return // the tunnel was closed
			}
			if err != nil {
				refused(err)
				up.Close()
				pr.CloseWithError(err)
				return
			}
		}
	}()
	return ts
}

// plainTarget reports whether a request target in a tunnel is one whose
// host no server reads differently: a path ("/…", not "//…"), "*", or an
// absolute URI "scheme://…" (whose host namedHosts compares). A
// network-path reference (//evil/x) and a URI without "//" (http:evil,
// http:\\evil) are hosts to a URL parser that resolves them against the
// server's own address (Node's new URL(target, base)).
func plainTarget(t string) bool {
	switch {
	case t == "*":
		return true
	case strings.HasPrefix(t, "/"):
		return !strings.HasPrefix(t, "//") && !strings.HasPrefix(t, "/\\")
	}
	scheme, _, ok := strings.Cut(t, "://")
	return ok && scheme != "" && strings.Trim(strings.ToLower(scheme), "abcdefghijklmnopqrstuvwxyz0123456789+.-") == ""
}

// namedHosts are the hosts a request head names: its Host header and the
// authority of an absolute-form target, of any scheme (a server takes the
// target's host over a missing or different Host: RFC 9112 §3.2.2).
func namedHosts(h *Head) []string {
	names := []string{h.Host}
	if _, rest, ok := strings.Cut(h.Target, "://"); ok {
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			rest = rest[:i]
		}
		if i := strings.LastIndexByte(rest, '@'); i >= 0 {
			rest = rest[i+1:]
		}
		names = append(names, rest)
	}
	return names
}

func (ts *tunnelStream) Write(p []byte) (int, error) { return ts.pw.Write(p) }

// CloseWrite ends the client's side: the checker passes what is left and
// half-closes upstream.
func (ts *tunnelStream) CloseWrite() error { return ts.pw.Close() }

// Close stops the checker (the tunnel is gone).
func (ts *tunnelStream) Close() { ts.pw.CloseWithError(net.ErrClosed) }
