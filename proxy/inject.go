package proxy

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/netrules"
)

// maxInjectBody is the largest form or JSON body searched for placeholders.
const maxInjectBody = 1 << 20

// bound reports whether a secret may be sent to host on port: a binding
// that names a port (host:443) holds for that port only, one without for
// every port.
func bound(s *creds.Secret, h netrules.Host, port int) bool {
	return boundWhere(s, h, port, func(*netrules.Rule) bool { return true })
}

// boundWhere is bound through the bindings keep accepts.
func boundWhere(s *creds.Secret, h netrules.Host, port int, keep func(*netrules.Rule) bool) bool {
	for _, p := range s.Hosts {
		r, err := netrules.ParseRule(p, "sandbox.credentials")
		if err != nil || (r.Port != 0 && r.Port != port) || !keep(r) {
			continue
		}
		set := &netrules.Set{Allow: []netrules.Rule{*r}}
		if set.Decide(h, port).Decision == netrules.Allow {
			return true
		}
	}
	return false
}

// boundTo returns the masked secrets that may be sent to h on port.
func (s *Server) boundTo(h netrules.Host, port int) []*creds.Secret {
	var out []*creds.Secret
	for _, sec := range s.Secrets {
		if sec.Placeholder != "" && bound(sec, h, port) {
			out = append(out, sec)
		}
	}
	return out
}

// restoreResponse makes a response of a host that credentials are bound
// to carry their placeholders where it carries their real values: in the
// headers, and in the body as it streams (decompressed from gzip or
// deflate if the host compressed it anyway). A body in another encoding
// cannot be searched: an error, and the response is not passed on.
// A body that ends in an error (a corrupt gzip stream as well as a cut
// connection) is recorded in cut, when set.
func restoreResponse(resp *http.Response, red *creds.Redactor, cut *atomic.Bool) error {
	resp.Status = red.Redact(resp.Status)
	_, announced := resp.Header["Content-Length"]
	redactHeader(resp.Header, red)
	body := resp.Body
	enc := contentEncoding(resp.Header)
	switch enc {
	case "":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return fmt.Errorf("the response's gzip body: %w", err)
		}
		body = readCloser{zr, body}
	case "deflate":
		zr, err := zlib.NewReader(body)
		if err != nil {
			return fmt.Errorf("the response's deflate body: %w", err)
		}
		body = readCloser{zr, body}
	default:
		return fmt.Errorf("the response is encoded as %q, which sbx cannot search for the real value of a bound credential", enc)
	}
	if enc != "" || !red.KeepsLength() || resp.ContentLength < 0 {
		// Decoded, or searched by a redactor that may change lengths:
		// the length is unknown until the body ends.
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	} else if announced {
		// As the transport read it, whatever the redaction did to the
		// line's text (a digits-only value): the body's true length,
		// which the client can count anyway.
		resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	resp.Header.Del("Content-Encoding")
	resp.Body = trailerRedactor{red.Reader(body), resp, red, cut}
	return nil
}

// redactHeader replaces the real values in h's names and values. A name
// that holds a value in another case (names arrive case-folded, so the
// value's own case cannot be restored) is dropped with its values.
func redactHeader(h http.Header, red *creds.Redactor) {
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = red.Redact(v)
		}
		if red.ContainsFold(red.Redact(k)) {
			delete(h, k)
			continue
		}
		if nk := red.Redact(k); nk != k {
			delete(h, k)
			h[nk] = append(h[nk], vs...)
		}
	}
}

// contentEncoding is the response's one content coding ("" for none or
// identity), from every Content-Encoding line; more than one coding is
// returned as they are, which no case of restoreResponse accepts.
func contentEncoding(h http.Header) string {
	var codings []string
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	return strings.Join(codings, ", ")
}

// trailerRedactor redacts the response's trailers when its body ends:
// they arrive after the body, and are passed on after it.
type trailerRedactor struct {
	io.ReadCloser
	resp *http.Response
	red  *creds.Redactor
	cut  *atomic.Bool
}

func (t trailerRedactor) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if err != nil {
		redactHeader(t.resp.Trailer, t.red)
		if err != io.EOF && t.cut != nil {
			t.cut.Store(true)
		}
	}
	return n, err
}

// readCloser reads from a decoder and closes the body under it.
type readCloser struct {
	io.Reader
	body io.Closer
}

func (r readCloser) Close() error { return r.body.Close() }

// ExfiltrationError is a request carrying a credential's placeholder to a
// host the credential is not bound to. It names the variable, never a value.
type ExfiltrationError struct {
	Var, Host string
	// Plain is set when the host is bound for TLS only and the request
	// would go in clear.
	Plain bool
}

func (e *ExfiltrationError) Error() string {
	if e.Plain {
		return fmt.Sprintf("the request carries the placeholder of %s, which is sent to %s over TLS only; this request would go in clear (bind host:PORT with the port to allow plain HTTP there)", e.Var, e.Host)
	}
	return fmt.Sprintf("the request carries the placeholder of %s, which may not be sent to %s", e.Var, e.Host)
}

// boundPlain reports whether a secret may go to host:port in clear (plain
// HTTP, not TLS): not a secret bound by sbx's defaults (GITHUB_TOKEN to
// github.com: http://github.com/ would carry the real value readable on
// the way), and not through a binding that names port 443 (a credential
// file's https:// registry).
func boundPlain(s *creds.Secret, h netrules.Host, port int) bool {
	return !s.TLSOnly && boundWhere(s, h, port, func(r *netrules.Rule) bool { return r.Port != 443 })
}

// tunnelLeak is the check of a plaintext request head inside a tunnel to
// h:port, which is not terminated (no credential is bound there): a head
// carrying the placeholder of a masked credential (as it is, or inside
// Basic credentials) is an *ExfiltrationError, as through the HTTP proxy.
// Nil when no credential has a placeholder. Bodies are not searched.
func (s *Server) tunnelLeak(h netrules.Host, port int) func([]byte) error {
	var active []*creds.Secret
	for _, sec := range s.Secrets {
		if sec.Placeholder != "" && !bound(sec, h, port) {
			active = append(active, sec)
		}
	}
	if len(active) == 0 {
		return nil
	}
	return func(head []byte) error {
		var basic []string
		for _, line := range strings.Split(string(head), "\n") {
			name, v, ok := strings.Cut(line, ":")
			name = strings.TrimSpace(name)
			if ok && (strings.EqualFold(name, "Authorization") || strings.EqualFold(name, "Proxy-Authorization")) {
				if dec, ok := basicDecode(strings.TrimSpace(v)); ok {
					basic = append(basic, dec)
				}
			}
		}
		for _, sec := range active {
			in := bytes.Contains(head, []byte(sec.Placeholder))
			for _, d := range basic {
				in = in || strings.Contains(d, sec.Placeholder)
			}
			if in {
				return &ExfiltrationError{Var: sec.Name, Host: h.String()}
			}
		}
		return nil
	}
}

// injectHTTP swaps placeholders for real values in a plain HTTP request to
// host: request line, headers (Basic auth included, where the placeholder
// sits inside base64) and form or JSON bodies up to 1 MiB. A placeholder of
// a secret not bound to host is an *ExfiltrationError.
func (s *Server) injectHTTP(r *http.Request, h netrules.Host, port int) error {
	var active []*creds.Secret
	for _, sec := range s.Secrets {
		if sec.Placeholder != "" {
			active = append(active, sec)
		}
	}
	if len(active) == 0 {
		return nil
	}
	var body []byte
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	if r.Body != nil && r.Body != http.NoBody && (strings.Contains(ct, "json") || strings.Contains(ct, "x-www-form-urlencoded")) {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, maxInjectBody+1))
		r.Body.Close()
		if err != nil {
			return err
		}
		if len(body) > maxInjectBody {
			// Too big to search: forward as read, untouched.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
			body = nil
		}
	}
	for _, sec := range active {
		ph, real := sec.Placeholder, sec.Value()
		basicPH := false
		for _, v := range r.Header.Values("Authorization") {
			if dec, ok := basicDecode(v); ok && strings.Contains(dec, ph) {
				basicPH = true
			}
		}
		// The path decoded too (a placeholder percent-encoded whole), and
		// header names as well as values.
		present := strings.Contains(r.URL.String(), ph) || strings.Contains(r.URL.Path, ph) || basicPH || bytes.Contains(body, []byte(ph))
		for k, vs := range r.Header {
			present = present || strings.Contains(strings.ToLower(k), strings.ToLower(ph))
			for _, v := range vs {
				present = present || strings.Contains(v, ph)
			}
		}
		if !present {
			continue
		}
		if !bound(sec, h, port) {
			return &ExfiltrationError{Var: sec.Name, Host: h.String()}
		}
		if !strings.EqualFold(r.URL.Scheme, "https") && !boundPlain(sec, h, port) {
			return &ExfiltrationError{Var: sec.Name, Host: h.String(), Plain: true}
		}
		r.URL.Path = strings.ReplaceAll(r.URL.Path, ph, real)
		r.URL.RawPath = strings.ReplaceAll(r.URL.RawPath, ph, real)
		r.URL.RawQuery = strings.ReplaceAll(r.URL.RawQuery, ph, real)
		for k, vs := range r.Header {
			for i, v := range vs {
				if dec, ok := basicDecode(v); ok && strings.Contains(dec, ph) {
					vs[i] = "Basic " + base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(dec, ph, real)))
					continue
				}
				vs[i] = strings.ReplaceAll(v, ph, real)
			}
			r.Header[k] = vs
		}
		body = bytes.ReplaceAll(body, []byte(ph), []byte(real))
	}
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Del("Transfer-Encoding")
	}
	return nil
}

func basicDecode(v string) (string, bool) {
	rest, ok := strings.CutPrefix(v, "Basic ")
	if !ok {
		return "", false
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	return string(dec), err == nil
}
