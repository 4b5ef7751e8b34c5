package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

// Limits of the HTTP front parser.
const (
	maxHeadBytes = 64 << 10
	maxHeadLines = 256
	maxChunkLine = 4 << 10
)

// HeadError is a request head the proxy refuses; Status is the HTTP status
// to answer with.
type HeadError struct {
	Status int
	Msg    string
}

func (e *HeadError) Error() string { return e.Msg }

func badHead(format string, args ...any) error {
	return &HeadError{Status: 400, Msg: fmt.Sprintf(format, args...)}
}

// Head is what the front parser learnt from one request head.
type Head struct {
	Method, Target string
	// ContentLength is the body length, -1 when the body is chunked.
	ContentLength int64
	// Tunnel is set for CONNECT and upgrade requests: after the head the
	// connection carries opaque bytes.
	Tunnel bool
	// Host is the Host header ("" when there is none).
	Host string
	// raw is the head as read, for the checks of a tunnel's stream.
	raw []byte
}

// ParseHead validates one HTTP/1.x proxy request head (request line and
// header lines, ending with an empty line). It refuses what a proxy and a
// server could read differently: a Host header that disagrees with the
// absolute-URI, several Host headers, Content-Length with
// Transfer-Encoding, conflicting or malformed Content-Length, a
// Transfer-Encoding other than chunked, obsolete line folding, and a CONNECT
// target that is not host:port.
func ParseHead(head []byte) (*Head, error) {
	lines := strings.Split(strings.TrimSuffix(strings.TrimSuffix(string(head), "\r\n\r\n"), "\n\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	if len(lines) == 0 {
		return nil, badHead("empty request")
	}
	parts := strings.Split(lines[0], " ")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return nil, badHead("malformed request line")
	}
	h := &Head{Method: parts[0], Target: parts[1], raw: head}
	if parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0" {
		return nil, &HeadError{Status: 505, Msg: "only HTTP/1.0 and HTTP/1.1 are proxied"}
	}
	var hosts, lengths, encodings []string
	upgrade := false
	for _, l := range lines[1:] {
		if l == "" {
			continue
		}
		if l[0] == ' ' || l[0] == '\t' {
			return nil, badHead("obsolete header line folding")
		}
		name, value, ok := strings.Cut(l, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, badHead("malformed header line")
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "host":
			hosts = append(hosts, value)
		case "content-length":
			lengths = append(lengths, value)
		case "transfer-encoding":
			encodings = append(encodings, value)
		case "upgrade":
			upgrade = true
		}
	}
	if len(hosts) == 1 {
		h.Host = strings.TrimSpace(hosts[0])
	}
	if len(hosts) > 1 {
		return nil, badHead("several Host headers")
	}
	if len(lengths) > 0 && len(encodings) > 0 {
		return nil, badHead("both Content-Length and Transfer-Encoding")
	}
	h.ContentLength = 0
	seen := false
	for _, v := range lengths {
		for _, one := range strings.Split(v, ",") {
			one = strings.TrimSpace(one)
			n, err := strconv.ParseInt(one, 10, 64)
			if err != nil || n < 0 || strings.HasPrefix(one, "+") {
				return nil, badHead("malformed Content-Length")
			}
			if seen && n != h.ContentLength {
				return nil, badHead("conflicting Content-Length headers")
			}
			h.ContentLength, seen = n, true
		}
	}
	if len(encodings) > 0 {
		if len(encodings) > 1 || !strings.EqualFold(encodings[0], "chunked") {
			return nil, &HeadError{Status: 501, Msg: "only Transfer-Encoding: chunked is proxied"}
		}
		h.ContentLength = -1
	}
	if h.Method == "CONNECT" {
		host, port, ok := strings.Cut(strings.TrimPrefix(h.Target, "["), "]:")
		if !strings.HasPrefix(h.Target, "[") {
			i := strings.LastIndexByte(h.Target, ':')
			host, port, ok = h.Target[:max(i, 0)], h.Target[i+1:], i > 0
		}
		if n, err := strconv.Atoi(port); !ok || host == "" || err != nil || n < 1 || n > 65535 {
			return nil, badHead("CONNECT target must be host:port")
		}
		h.Tunnel = true
		return h, nil
	}
	if scheme, rest, ok := strings.Cut(h.Target, "://"); ok && (strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https")) {
		authority := rest
		if i := strings.IndexAny(authority, "/?#"); i >= 0 {
			authority = authority[:i]
		}
		if strings.Contains(authority, "@") {
			return nil, badHead("credentials in the request URI")
		}
		if len(hosts) == 1 && !sameAuthority(hosts[0], authority, strings.ToLower(scheme)) {
			return nil, badHead("Host header %q does not match the request URI host %q", hosts[0], authority)
		}
	}
	h.Tunnel = upgrade
	return h, nil
}

// sameAuthority compares two host[:port] forms, case-insensitively and with
// the scheme's default port filled in.
func sameAuthority(a, b, scheme string) bool {
	def := "80"
	if scheme == "https" {
		def = "443"
	}
	norm := func(s string) string {
		s = strings.ToLower(s)
		if strings.HasSuffix(s, "]") || !strings.Contains(s, ":") {
			return s + ":" + def
		}
		return s
	}
	return norm(a) == norm(b)
}

// framer reads an HTTP/1.x request stream and checks every request head
// with [ParseHead] before passing it on, so that on a keep-alive connection
// each request is checked. It passes bytes through unchanged; on a bad head
// it fails with a *HeadError.
type framer struct {
	r       *bufio.Reader
	out     []byte // validated bytes not yet returned
	body    int64  // bytes of the current body still to pass
	chunked bool   // in a chunked body
	chunkSt int    // 0 size line, 1 data, 2 CRLF after data, 3 trailers
	tunnel  bool   // opaque bytes from here on
	buf     []byte
	err     error
	// check, when set, is asked about every head (in a tunnel: does it
	// name the tunnel's host?); bodies are then searched for a hidden
	// request (hiddenRequest), carry holding the end of the last piece.
	check func(*Head) error
	carry []byte
}

func newFramer(r io.Reader) *framer {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 16<<10)
	}
	return &framer{r: br}
}

func (f *framer) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		if err := f.step(); err != nil {
			// A deadline (the HTTP server interrupts its own background
			// reads that way) is not the end of the stream.
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && len(f.out) == 0 {
				return 0, err
			}
			f.err = err
		}
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// step produces the next validated piece into f.out.
func (f *framer) step() error {
	switch {
	case f.tunnel:
		return f.pass(1 << 20)
	case f.body > 0:
		return f.pass(f.body)
	case f.chunked:
		return f.chunk()
	}
	lead, head, err := f.readHead()
	if err != nil {
		return err
	}
	h, err := ParseHead(head)
	if err != nil {
		return err
	}
	if f.check != nil {
		if err := f.check(h); err != nil {
			return err
		}
	}
	f.out = append(lead, head...)
	f.carry = f.carry[:0] // a new body
	switch {
	case h.Tunnel:
		f.tunnel = true
	case h.ContentLength < 0:
		f.chunked, f.chunkSt = true, 0
	default:
		f.body = h.ContentLength
	}
	return nil
}

func (f *framer) pass(limit int64) error {
	if f.buf == nil {
		f.buf = make([]byte, 256<<10)
	}
	n, err := f.r.Read(f.buf[:min(limit, int64(len(f.buf)))])
	f.out = f.buf[:n]
	if f.body > 0 {
		f.body -= int64(n)
		if f.check != nil && !f.tunnel {
			if herr := f.hiddenRequest(f.out); herr != nil {
				f.out = nil // none of it goes on
				return herr
			}
		}
	}
	if n > 0 {
		return nil
	}
	return err
}

// hiddenRequest refuses a body that holds what a server could take for a
// request of its own: a version ("HTTP/" and a digit) after white space,
// as a request line ends (a server splitting the line on any white space,
// Python's, takes "GET  /x\tHTTP/1.1" too). A server that does not read
// bodies (Python's http.server for a GET, or for a method it does not
// handle) reads the next request from the body, whose Host no check has
// seen. carry holds the end of the last piece, for a line split across
// two reads.
func (f *framer) hiddenRequest(p []byte) error {
	buf := append(f.carry, p...)
	for i := 0; ; {
		j := bytes.Index(buf[i:], []byte("HTTP/"))
		if j < 0 {
			break
		}
		at := i + j
		if at > 0 && bytes.IndexByte([]byte(" \t\v\f"), buf[at-1]) >= 0 && at+5 < len(buf) && buf[at+5] >= '0' && buf[at+5] <= '9' {
			return &FrontingError{Decided: "(the tunnel's host)", Named: "(a request line inside a request body)"}
		}
		i = at + 1
	}
	f.carry = append(f.carry[:0], buf[max(0, len(buf)-maxHeadLineInBody):]...)
	return nil
}

// maxHeadLineInBody is how much of a body's end is kept to find a request
// line split across two reads.
const maxHeadLineInBody = 8 << 10

// readHead reads one request head; lead holds the empty lines before it,
// which are passed on unchanged (RFC 9112 lets a server skip them).
func (f *framer) readHead() (lead, head []byte, err error) {
	for lines := 0; ; lines++ {
		line, err := f.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, nil, &HeadError{Status: 431, Msg: "request header line too long"}
		}
		if err != nil {
			if len(head)+len(line) == 0 {
				return nil, nil, err // clean end of the connection
			}
			return nil, nil, badHead("truncated request head")
		}
		if len(head) == 0 && len(bytes.TrimRight(line, "\r\n")) == 0 {
			lead = append(lead, line...)
			if len(lead) > maxChunkLine {
				return nil, nil, badHead("too many empty lines")
			}
			continue
		}
		head = append(head, line...)
		if len(head) > maxHeadBytes || lines > maxHeadLines {
			return nil, nil, &HeadError{Status: 431, Msg: "request head too large"}
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return lead, head, nil
		}
	}
}

// chunk passes one piece of a chunked body.
func (f *framer) chunk() error {
	switch f.chunkSt {
	case 0, 3:
		line, err := f.r.ReadSlice('\n')
		if err != nil || len(line) > maxChunkLine {
			return badHead("malformed chunked body")
		}
		f.out = append([]byte(nil), line...)
		if f.chunkSt == 3 {
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				f.chunked = false // end of trailers: next request
			}
			return nil
		}
		size := string(bytes.TrimRight(line, "\r\n"))
		if i := strings.IndexByte(size, ';'); i >= 0 {
			size = size[:i]
		}
		n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
		if err != nil || n < 0 {
			return badHead("malformed chunk size")
		}
		if n == 0 {
			f.chunkSt = 3
			return nil
		}
		f.body, f.chunkSt = n, 1
		return nil
	case 1:
		if f.body == 0 {
			f.chunkSt = 2
			return nil
		}
		err := f.pass(f.body)
		if f.body == 0 {
			f.chunkSt = 2
		}
		return err
	default: // 2
		line, err := f.r.ReadSlice('\n')
		if err != nil || len(bytes.TrimRight(line, "\r\n")) != 0 {
			return badHead("malformed chunked body")
		}
		f.out = append([]byte(nil), line...)
		f.chunkSt = 0
		return nil
	}
}
