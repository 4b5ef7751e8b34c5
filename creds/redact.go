package creds

import (
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// Redactor replaces real secret values, and their base64 (standard and URL,
// padded or not), URL-escaped and hex encodings, with [REDACTED:NAME].
type Redactor struct {
	r      *strings.Replacer
	maxLen int
}

// NewRedactor builds a redactor for secrets; nil secrets give one that
// changes nothing.
func NewRedactor(secrets []*Secret) *Redactor {
	var pairs []string
	type form struct{ s, name string }
	var forms []form
	for _, s := range secrets {
		v := s.value
		if len(v) < 4 {
			continue // too short to redact without mangling ordinary text
		}
		tag := "[REDACTED:" + s.Name + "]"
		for _, f := range []string{
			v,
			base64.StdEncoding.EncodeToString([]byte(v)), base64.RawStdEncoding.EncodeToString([]byte(v)),
			base64.URLEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)),
			url.QueryEscape(v), url.PathEscape(v),
			hex.EncodeToString([]byte(v)), strings.ToUpper(hex.EncodeToString([]byte(v))),
		} {
			forms = append(forms, form{f, tag})
		}
	}
	// Longest first, so an encoding is not half-replaced by a shorter form.
	sort.SliceStable(forms, func(i, j int) bool { return len(forms[i].s) > len(forms[j].s) })
	seen := map[string]bool{}
	maxLen := 0
	for _, f := range forms {
		if seen[f.s] {
			continue
		}
		seen[f.s] = true
		pairs = append(pairs, f.s, f.name)
		maxLen = max(maxLen, len(f.s))
	}
	if len(pairs) == 0 {
		return &Redactor{}
	}
	return &Redactor{r: strings.NewReplacer(pairs...), maxLen: maxLen}
}

// Redact returns s with every secret form replaced.
func (r *Redactor) Redact(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// Writer returns a writer that redacts what passes through it to w. A
// secret split across two writes is still caught: the last bytes of each
// write are held back until the next write or Close.
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
	rw.pending = append(rw.pending, p...)
	// Keep the tail that could be the start of a secret.
	keep := rw.r.maxLen - 1
	if len(rw.pending) <= keep {
		return len(p), nil
	}
	red := rw.r.Redact(string(rw.pending))
	// Hold back the last keep bytes of the redacted text, unless they are
	// part of a replacement already made.
	cut := len(red) - keep
	if cut < 0 {
		cut = 0
	}
	if _, err := io.WriteString(rw.w, red[:cut]); err != nil {
		return 0, err
	}
	rw.pending = append(rw.pending[:0], red[cut:]...)
	return len(p), nil
}

func (rw *redactWriter) Close() error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	_, err := io.WriteString(rw.w, rw.r.Redact(string(rw.pending)))
	rw.pending = nil
	return err
}
