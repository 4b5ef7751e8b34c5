package creds

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Redactor replaces real secret values, and their base64 (standard and URL,
// padded or not), URL-escaped and hex encodings, with [REDACTED:NAME], or,
// built by [NewPlaceholderRedactor], with the same encoding of the
// secret's placeholder.
type Redactor struct {
	r *strings.Replacer
	// forms are the strings replaced, for the streaming hold-back;
	// longest is the longest's length.
	forms   []string
	bforms  [][]byte // forms, as bytes
	lforms  []string // forms, lower-cased (ContainsFold)
	longest int
	// to are the forms' replacements, by form (for a cut-off form at the
	// end of a stream).
	to map[string]string
	// sameLength: every replacement is as long as its form.
	sameLength bool
}

// encodings are the forms of a value a redactor looks for.
var encodings = []func(string) string{
	func(v string) string { return v },
	func(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) },
	func(v string) string { return base64.RawStdEncoding.EncodeToString([]byte(v)) },
	func(v string) string { return base64.URLEncoding.EncodeToString([]byte(v)) },
	func(v string) string { return base64.RawURLEncoding.EncodeToString([]byte(v)) },
	url.QueryEscape, url.PathEscape,
	// JavaScript's encodeURIComponent and Python's urllib.parse.quote.
	func(v string) string { return percentExcept(v, "-_.!~*'()") },
	func(v string) string { return percentExcept(v, "-_.~/") },
	func(v string) string { return hex.EncodeToString([]byte(v)) },
	func(v string) string { return strings.ToUpper(hex.EncodeToString([]byte(v))) },
	// Every byte percent-encoded (a valid URL encoding too), either case.
	func(v string) string { return percentAll(v, false) },
	func(v string) string { return percentAll(v, true) },
	// Inside a JSON string, as an echo service returns it: the escapes of
	// JavaScript, Python (non-ASCII as \u), Go (<, >, & as \u) and PHP
	// (non-ASCII as \u, and \/).
	func(v string) string { return jsonEscape(v, jsonPlain) },
	func(v string) string { return jsonEscape(v, jsonASCII) },
	func(v string) string { return jsonEscape(v, jsonHTML) },
	func(v string) string { return jsonEscape(v, jsonASCII|jsonSlash) },
	// Every character as a JSON \u escape, either case (an encoder
	// that escapes everything; JSON parsers decode it like the rest).
	func(v string) string { return jsonEscape(v, jsonAll) },
	func(v string) string { return strings.ReplaceAll(strings.ToUpper(jsonEscape(v, jsonAll)), `\U`, `\u`) },
}

// What jsonEscape escapes besides quotes, backslashes and control
// characters.
const (
	jsonPlain = 0
	jsonASCII = 1 << iota // every non-ASCII character, as \uXXXX (UTF-16)
	jsonHTML              // <, > and &, and U+2028 and U+2029 (Go's)
	jsonSlash             // / as \/
	jsonAll               // every character as \uXXXX (UTF-16)
)

// jsonEscape is v as it stands inside a JSON string written with the
// escapes of how.
func jsonEscape(v string, how int) string {
	var b strings.Builder
	for i := 0; i < len(v); {
		c, size := utf8.DecodeRuneInString(v[i:])
		raw := v[i : i+size]
		i += size
		switch {
		case how&jsonAll != 0 && c != utf8.RuneError:
			for _, u := range utf16.Encode([]rune{c}) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		case c == '"' || c == '\\':
			b.WriteString(`\` + raw)
		case c == '/' && how&jsonSlash != 0:
			b.WriteString(`\/`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c < 0x20, how&jsonHTML != 0 && (c == '<' || c == '>' || c == '&' || c == 0x2028 || c == 0x2029):
			fmt.Fprintf(&b, `\u%04x`, c)
		case c > 0x7f && how&jsonASCII != 0 && size > 1:
			for _, u := range utf16.Encode([]rune{c}) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		default:
			b.WriteString(raw) // an invalid byte as it is
		}
	}
	return b.String()
}

// percentExcept percent-encodes (in upper case) every byte of v but ASCII
// letters, digits and those in keep.
func percentExcept(v, keep string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// percentAll percent-encodes every byte of v.
func percentAll(v string, lower bool) string {
	h := hex.EncodeToString([]byte(v))
	if !lower {
		h = strings.ToUpper(h)
	}
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		b.WriteString("%" + h[i:i+2])
	}
	return b.String()
}

// shiftedBase64 are the base64 forms of a value inside longer base64
// text (Basic credentials "user:value", a value in a JSON blob): where the
// value starts 0, 1 or 2 bytes into a 3-byte group, the characters that
// depend on its bytes alone. The one or two characters at either end that
// mix its bits with its neighbours' are not part of the form (so a few
// bits of its first and last byte may remain).
var shiftedBase64 = func() []func(string) string {
	var out []func(string) string
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for shift := range 3 {
			out = append(out, func(v string) string { return stableBase64(enc, shift, v) })
		}
	}
	return out
}()

// stableBase64 is the part of the base64 of v, preceded by shift unknown
// bytes and followed by more, that depends on v alone; "" when it is
// shorter than 8 characters (too easily found in other base64).
func stableBase64(enc *base64.Encoding, shift int, v string) string {
	b := append(make([]byte, shift), v...)
	s := enc.EncodeToString(b)
	start := []int{0, 2, 3}[shift]
	end := len(b)/3*4 + len(b)%3
	if end-start < 8 {
		return ""
	}
	return s[start:end]
}

// NewRedactor builds a redactor for secrets; nil secrets give one that
// changes nothing.
func NewRedactor(secrets []*Secret) *Redactor {
	return newRedactor(secrets, func(s *Secret, _ func(string) string) string { return "[REDACTED:" + s.Name + "]" })
}

// NewPlaceholderRedactor builds a redactor that turns each masked secret's
// real value, in every encoding it knows, into the same encoding of the
// secret's placeholder: what a host the proxy sent the real value to
// sends back reaches the sandbox as the placeholder the sandbox sent.
// Secrets without a placeholder are redacted as by [NewRedactor].
func NewPlaceholderRedactor(secrets []*Secret) *Redactor {
	return newRedactor(secrets, func(s *Secret, enc func(string) string) string {
		if s.Placeholder == "" {
			return "[REDACTED:" + s.Name + "]"
		}
		return enc(s.Placeholder)
	})
}

func newRedactor(secrets []*Secret, replacement func(*Secret, func(string) string) string) *Redactor {
	type form struct{ s, to string }
	var forms []form
	for _, s := range secrets {
		for _, trim := range []bool{false, true} {
			v := s.value
			if trim {
				if v = core(v); v == s.value {
					continue
				}
			}
			if len(v) < 4 {
				continue // too short to redact without mangling ordinary text
			}
			for _, enc := range append(slices.Clone(encodings), shiftedBase64...) {
				if f := enc(v); len(f) >= 4 {
					to := enc
					if trim {
						to = func(p string) string { return enc(core(p)) }
					}
					forms = append(forms, form{f, replacement(s, to)})
				}
			}
		}
	}
	// Longest first, so an encoding is not half-replaced by a shorter form.
	sort.SliceStable(forms, func(i, j int) bool { return len(forms[i].s) > len(forms[j].s) })
	to := map[string]string{}
	var pairs, found []string
	for _, f := range forms {
		if _, seen := to[f.s]; seen {
			continue
		}
		to[f.s] = f.to
		pairs = append(pairs, f.s, f.to)
		found = append(found, f.s)
	}
	if len(pairs) == 0 {
		return &Redactor{sameLength: true}
	}
	same := true
	for f, t := range to {
		same = same && len(f) == len(t)
	}
	bforms := make([][]byte, len(found))
	lforms := make([]string, len(found))
	for i, f := range found {
		bforms[i], lforms[i] = []byte(f), strings.ToLower(f)
	}
	return &Redactor{r: strings.NewReplacer(pairs...), forms: found, bforms: bforms, lforms: lforms,
		longest: len(found[0]), to: to, sameLength: same}
}

// core is v without the white space, line ends and quotes around it,
// which an echo may drop (a value read from a file with a CRLF line end,
// a quoted one).
func core(v string) string { return strings.Trim(v, " \t\r\n\"'") }

// ContainsFold reports whether s holds a form of a value in any case: a
// header name reaches the proxy with its case changed.
func (r *Redactor) ContainsFold(s string) bool {
	if r == nil {
		return false
	}
	ls := strings.ToLower(s)
	for _, f := range r.lforms {
		if strings.Contains(ls, f) {
			return true
		}
	}
	return false
}

// KeepsLength reports whether what the redactor returns is always exactly
// as long as what it was given (every replacement as long as the form it
// replaces, as a placeholder shaped like its value makes it), so that a
// body streamed through it keeps its announced length. A nil redactor
// changes nothing.
func (r *Redactor) KeepsLength() bool {
	return r == nil || r.r == nil || r.sameLength
}

// heldTail returns how many bytes at the end of s could begin a secret
// form: the longest suffix of s that is a proper prefix of a form. A
// stream holds back only those, so text that cannot be a secret passes at
// once.
func (r *Redactor) heldTail(s string) int {
	if s == "" {
		return 0
	}
	last, keep := s[len(s)-1], 0
	for _, f := range r.forms {
		// Only a prefix ending in s's last byte can be its suffix: try
		// those, longest first.
		for k := min(len(f)-1, len(s)); k > keep; k-- {
			j := strings.LastIndexByte(f[:k], last)
			if j < 0 || j+1 <= keep {
				break
			}
			k = j + 1
			if strings.HasSuffix(s, f[:k]) {
				keep = k
				break
			}
		}
	}
	return keep
}

// Redact returns s with every secret form replaced, and a beginning of
// one at its very end (a value cut off) too.
func (r *Redactor) Redact(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	if !r.anyForm(s) {
		return r.redactCut(s)
	}
	// As a stream ends: what lies before the cut is final, the held
	// tail is redacted as a text of its own (so a stream, whose last
	// held tail this is, ends the same).
	out, held := r.streamCut(s)
	if out == "" && held == s {
		return r.redactCut(r.replace(s))
	}
	return out + r.Redact(held)
}

// replace returns s with every whole secret form replaced.
func (r *Redactor) replace(s string) string {
	if !r.anyForm(s) {
		return s
	}
	return r.r.Replace(s)
}

// anyFormIn is anyForm for bytes.
func (r *Redactor) anyFormIn(b []byte) bool {
	for _, f := range r.bforms {
		if bytes.Contains(b, f) {
			return true
		}
	}
	return false
}

// anyForm reports whether s holds a secret form. A few vectorised
// searches cost far less than the replacer's walk over text that holds
// none (a response body, almost always).
func (r *Redactor) anyForm(s string) bool {
	for _, f := range r.forms {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

// Writer returns a writer that redacts what passes through it to w. A
// secret split across two writes is still caught: the last bytes of a
// write that could begin a secret are held back until the next write or
// Close; the rest passes at once.
func (r *Redactor) Writer(w io.Writer) io.WriteCloser {
	if r == nil || r.r == nil {
		return nopCloser{w}
	}
	return &redactWriter{r: r, w: w}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

type redactWriter struct {
	mu      sync.Mutex
	r       *Redactor
	w       io.Writer
	pending []byte
}

func (rw *redactWriter) Write(p []byte) (int, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	buf := p
	if len(rw.pending) > 0 {
		rw.pending = append(rw.pending, p...)
		buf = rw.pending
	}
	if !rw.r.anyFormIn(buf) {
		// Nothing to replace (almost always): pass the bytes on as they
		// are, but for a tail that could begin a secret.
		tail := buf[len(buf)-min(len(buf), rw.r.longest-1):]
		cut := len(buf) - rw.r.heldTail(string(tail))
		if _, err := rw.w.Write(buf[:cut]); err != nil {
			return 0, err
		}
		rw.pending = append(rw.pending[:0], buf[cut:]...)
		return len(p), nil
	}
	if len(rw.pending) == 0 {
		rw.pending = append(rw.pending, p...)
	}
	out, held := rw.r.streamCut(string(rw.pending))
	if _, err := io.WriteString(rw.w, out); err != nil {
		return 0, err
	}
	rw.pending = append(rw.pending[:0], held...)
	return len(p), nil
}

// streamCut splits text that holds a form, in a stream: out is its
// redaction up to a cut, held the raw text after it, to be read again with
// what follows, so that the stream is redacted exactly as the whole text
// is. The cut is where the longest tail that could begin a form starts (a
// form found there may begin a longer one: a base64 value's offset form
// before its last characters), or earlier, at the start of the match
// Replace takes that runs past it. Matches are found as the replacer
// takes them: leftmost, and of the forms there the first listed (the
// longest).
func (r *Redactor) streamCut(text string) (out, held string) {
	tail := len(text) - r.heldTail(text)
	cut := tail
	next := make([]int, len(r.forms)) // each form's next start, -1: none
	for k := range next {
		next[k] = -2 // not searched yet
	}
	for i := 0; i < tail; {
		start, end := -1, 0
		for k, f := range r.forms {
			if next[k] == -2 || next[k] >= 0 && next[k] < i {
				next[k] = -1
				if x := strings.Index(text[i:], f); x >= 0 {
					next[k] = i + x
				}
			}
			if next[k] >= 0 && (start < 0 || next[k] < start) {
				start, end = next[k], next[k]+len(f)
			}
		}
		if start < 0 || start >= tail {
			break
		}
		if end > tail {
			cut = start
			break
		}
		i = end
	}
	return r.replace(text[:cut]), text[cut:]
}

func (rw *redactWriter) Close() error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	_, err := io.WriteString(rw.w, rw.r.Redact(string(rw.pending)))
	rw.pending = nil
	return err
}

// minCut is the shortest beginning of a secret's form replaced at the end
// of a stream: shorter ones are too often ordinary text (or a token kind's
// public prefix).
const minCut = 6

// redactCut replaces a beginning of a secret's form that ends s (a value
// cut off at the end of a stream: a truncated echo, a range) with the
// same beginning of its replacement, or the whole replacement when the
// two differ in length.
func (r *Redactor) redactCut(s string) string {
	k := r.heldTail(s)
	if k < minCut {
		return s
	}
	tail := s[len(s)-k:]
	for _, f := range r.forms {
		if strings.HasPrefix(f, tail) {
			to := r.to[f]
			if len(to) == len(f) {
				return s[:len(s)-k] + to[:k]
			}
			return s[:len(s)-k] + to
		}
	}
	return s
}

// Reader returns a reader of src's bytes, redacted as they stream; a
// secret split across reads is caught as by [Redactor.Writer]. Closing it
// closes src.
func (r *Redactor) Reader(src io.ReadCloser) io.ReadCloser {
	if r == nil || r.r == nil {
		return src
	}
	return &redactReader{r: r, src: src}
}

// redactReader reads into the caller's buffer and hands back in place what
// holds no secret form (a body, almost always): no copy of its own. Only
// text with a form in it, and the end of the stream, go through out.
type redactReader struct {
	r   *Redactor
	src io.ReadCloser
	// pending is a raw tail held back: it could begin a form, or holds
	// one whose match runs into such a tail (see streamCut).
	pending []byte
	out     bytes.Buffer // redacted bytes not yet returned
	buf     []byte       // for a caller's buffer too small to read into
	done    bool
	err     error
}

// minDirect is the least room past the held tail for a read into the
// caller's buffer.
const minDirect = 512

func (rr *redactReader) Read(p []byte) (int, error) {
	for rr.out.Len() == 0 && !rr.done {
		dst, direct := p, true
		if len(p) < len(rr.pending)+minDirect {
			// Room for the held tail (up to two forms: a long value's
			// encodings can pass 32 KiB) and a read after it.
			if len(rr.buf) < len(rr.pending)+32<<10 {
				rr.buf = make([]byte, len(rr.pending)+32<<10)
			}
			dst, direct = rr.buf, false
		}
		k := copy(dst, rr.pending)
		n, err := rr.src.Read(dst[k:])
		pass := 0
		if n > 0 {
			pass = rr.scan(dst[:k+n])
			if !direct {
				rr.out.Write(dst[:pass])
			}
		}
		if err != nil {
			rr.finish(err)
		}
		if direct && pass > 0 {
			return pass, nil
		}
	}
	if rr.out.Len() > 0 {
		return rr.out.Read(p)
	}
	if rr.err != nil {
		return 0, rr.err
	}
	return 0, io.EOF
}

// scan takes b, the held tail and what was just read after it: it returns
// how many bytes at b's start pass as they are, keeping the rest as the
// held tail; when b holds a form, its redaction goes to out and none pass.
func (rr *redactReader) scan(b []byte) int {
	r := rr.r
	if !r.anyFormIn(b) {
		tail := b[len(b)-min(len(b), r.longest-1):]
		cut := len(b) - r.heldTail(string(tail))
		rr.pending = append(rr.pending[:0], b[cut:]...)
		return cut
	}
	out, held := r.streamCut(string(b))
	rr.out.WriteString(out)
	rr.pending = append(rr.pending[:0], held...)
	return 0
}

// finish ends the stream at src's error: the held tail goes out redacted
// (a value cut off at the end included).
func (rr *redactReader) finish(err error) {
	rr.out.WriteString(rr.r.Redact(string(rr.pending)))
	rr.pending, rr.done = nil, true
	if err != io.EOF {
		rr.err = err
	}
}

func (rr *redactReader) Close() error { return rr.src.Close() }
