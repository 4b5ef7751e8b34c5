package creds

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name, value string
		secret      bool
	}{
		{"GITHUB_TOKEN", "x", true}, {"GH_TOKEN", "x", true}, {"MY_API_KEY", "x", true}, {"DB_PASSWORD", "x", true},
		{"AWS_SECRET_ACCESS_KEY", "x", true}, {"AWS_SESSION_TOKEN", "x", true}, {"SERVICE_SECRET", "x", true},
		{"ANTHROPIC_API_KEY", "x", true}, {"NPM_TOKEN", "x", true}, {"SENTRY_DSN", "x", true},
		{"HOME", "/root", false}, {"PWD", "/x", false}, {"PATH", "/bin", false}, {"AWS_REGION", "eu-west-1", false},
		{"SSH_AUTH_SOCK", "/tmp/x", false}, {"KEY_PATH", "/k", false}, {"GPG_KEY_ID", "ABC", false},
		{"AWS_CA_BUNDLE", "/etc/ssl/ca.pem", false}, {"AWS_ENDPOINT_URL", "http://localhost:4566", false},
		{"EMPTY_TOKEN", "", false},
		{"GREETING", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", true},
		{"X", "AKIAABCDEFGHIJKLMNOP", true},
		{"X", "sk-ant-api03-abcdefghijklmnopqrstu", true},
		{"X", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig", true},
		{"X", "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----", true},
		{"X", "xoxb-1234567890-abcdef", true},
		{"X", "hello world", false},
		{"MYSQL_PWD", "x", true}, {"DB_PASS", "x", true}, {"APITOKEN", "x", true}, {"SLACK_WEBHOOK_URL", "https://h/x", true},
		{"STRIPE_API", "sk_live_abcdefghijklmnop", true}, {"OLDPWD", "/x", false}, {"BYPASS_CACHE", "1", false},
		{"PASSWORD_FILE", "/run/secrets/p", false}, {"TOKENIZER", "gpt2", false},
		// Forms a red team found in clear.
		{"AZURE_STORAGE_CONNECTION_STRING", "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=REALAZURE==;", true},
		{"GCP_SA", `{"private_key":"-----BEGIN PRIVATE KEY-----\nMIIREAL\n-----END PRIVATE KEY-----\n"}`, true},
		{"REDIS_URL", "redis://:REALPW@r:6379", true}, {"MONGO_URI", "mongodb+srv://u:REALPW@c/db", true},
		{"CONN", "Server=x;Password=REALPW;", true}, {"PYPI", "pypi-AgEIcHlwaS5vcmcCJGRlYWRiZWVm", true},
		{"GOOGLE_MAPS", "AIzaSyA1234567890abcdefghijklmnopqrstu", true},
		{"SENDGRID", "SG.aaaaaaaaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", true},
		{"SITE", "https://example.com/path", false}, {"REDIS_HOST_URL", "redis://r:6379", false},
		{"SETTINGS", "a=1;b=2", false},
	}
	for _, tt := range tests {
		if got := Classify(tt.name, tt.value, nil); got != tt.secret {
			t.Errorf("Classify(%s=%q) = %v, want %v", tt.name, tt.value, got, tt.secret)
		}
	}
}

// classifyByExpressions is Classify as it was before its fast paths:
// every name and value through the full expressions.
func classifyByExpressions(name, value string) bool {
	upper := strings.ToUpper(name)
	if slices.Contains(notSecrets, upper) || value == "" {
		return false
	}
	if slices.Contains(secretNames, upper) {
		return true
	}
	if (strings.HasPrefix(upper, "AWS_") || namePattern().MatchString(upper)) && !locationSuffix().MatchString(upper) {
		return true
	}
	for _, s := range shapes {
		if regexp.MustCompile(s.expr).MatchString(value) {
			return true
		}
	}
	return false
}

// FuzzClassifyAsTheExpressions checks that the fast paths (words and
// endings for ASCII names, each shape's cheap test) decide as the
// expressions do.
func FuzzClassifyAsTheExpressions(f *testing.F) {
	for _, seed := range [][2]string{{"MY_KEYS", "x"}, {"A__KEY", "x"}, {"KEY_", "x"}, {"XKEY", "x"},
		{"CREDENTIALSS", "x"}, {"MYSECRETS", "x"}, {"A_TOKEN_ENDPOINT_URL", "x"}, {"\u212aEY", "x"},
		{"PA\u017fS", "x"}, {"X", "Password =1"}, {"X", "a;pwd= x"}, {"X", "https://u:p@h"}, {"X", "sk_live_0123456789"},
		{"X", "pk_test_0123456789ab"}, {"X", "-----BEGIN RSA PRIVATE KEY-----"}, {"X", "ghs_" + strings.Repeat("a", 20)},
		{"X", "AccountKey\u212a=1"}} {
		f.Add(seed[0], seed[1])
	}
	for _, w := range append(secretWords, secretEnds...) {
		for _, n := range []string{w, "A_" + w, "A" + w, "A_" + w + "S_B", w + "S", w + "_ID", strings.ToLower(w) + "_x"} {
			f.Add(n, "x")
		}
	}
	for _, e := range locationEnds {
		f.Add("DB_TOKEN"+e, "x")
		f.Add("DB_TOKEN"+e[1:], "x")
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		if got, want := Classify(name, value, nil), classifyByExpressions(name, value); got != want {
			t.Fatalf("Classify(%q, %q) = %v, the expressions say %v", name, value, got, want)
		}
	})
}

func TestMaskEnv(t *testing.T) {
	env := []string{"HOME=/root", "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789", "DB_PASSWORD=hunter22", "KEEP_TOKEN=abc123", "OTHER=1"}
	res, err := MaskEnv(env, Config{Vars: map[string]VarConfig{"DB_PASSWORD": {Mode: Deny}, "KEEP_TOKEN": {Mode: Pass}, "OTHER": {Hosts: []string{"x.example"}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(res.Env, "\n")
	if strings.Contains(got, "abcdefghijklmnopqrstuvwxyz0123456789") || strings.Contains(got, "hunter22") {
		t.Errorf("a secret passed: %s", got)
	}
	for _, want := range []string{"HOME=/root", "KEEP_TOKEN=abc123", "GITHUB_TOKEN=ghp_"} {
		if !strings.Contains(got, want) {
			t.Errorf("env lacks %s: %s", want, got)
		}
	}
	if strings.Contains(got, "DB_PASSWORD") || strings.Contains(got, "OTHER=1") {
		t.Errorf("denied or configured variable passed in clear: %s", got)
	}
	names := map[string]*Secret{}
	for _, s := range res.Secrets {
		names[s.Name] = s
	}
	if s := names["GITHUB_TOKEN"]; s == nil || len(s.Hosts) == 0 || s.Placeholder == "" || len(s.Placeholder) != len(s.Value()) {
		t.Errorf("GITHUB_TOKEN: %+v", s)
	}
	if _, err := MaskEnv(env, Config{Patterns: []string{"("}}); err == nil {
		t.Error("bad pattern accepted")
	}
}

func TestPlaceholder(t *testing.T) {
	for _, v := range []string{"ghp_abcdefghijklmnopqrstuvwxyz0123456789", "sk-ant-api03-AbCdEfGh1234567890", "AKIAABCDEFGHIJKLMNOP",
		"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "hunter22"} {
		p, err := Placeholder(v)
		if err != nil || p == v || len(p) != len(v) {
			t.Errorf("Placeholder(%q) = %q, %v", v, p, err)
		}
		if strings.HasPrefix(v, "ghp_") != strings.HasPrefix(p, "gh") || strings.HasPrefix(v, "sk-ant-") != strings.HasPrefix(p, "sk-ant-") {
			t.Errorf("Placeholder(%q) = %q lost its kind", v, p)
		}
		if strings.Contains(v, "BEGIN") && !strings.HasPrefix(p, "-----BEGIN RSA PRIVATE KEY-----") {
			t.Errorf("PEM armour lost: %q", p)
		}
	}
}

func TestSecretNeverPrints(t *testing.T) {
	res, _ := MaskEnv([]string{"API_TOKEN=topsecretvalue"}, Config{})
	s := res.Secrets[0]
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%v %+v %#v %s ", s, s, s, s)
	j, _ := json.Marshal(s)
	buf.Write(j)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "secret", s)
	if strings.Contains(buf.String(), "topsecretvalue") {
		t.Errorf("value printed: %s", buf.String())
	}
}

func TestRedactor(t *testing.T) {
	res, _ := MaskEnv([]string{"API_TOKEN=s3cr3t/v@lue+x"}, Config{})
	r := NewRedactor(res.Secrets)
	v := "s3cr3t/v@lue+x"
	for _, enc := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)),
		url.QueryEscape(v), url.PathEscape(v), hex.EncodeToString([]byte(v)), strings.ToUpper(hex.EncodeToString([]byte(v)))} {
		out := r.Redact("before " + enc + " after")
		if strings.Contains(out, enc) || !strings.Contains(out, "[REDACTED:API_TOKEN]") {
			t.Errorf("%q not redacted: %q", enc, out)
		}
	}
	// Split across writes.
	var buf bytes.Buffer
	w := r.Writer(&buf)
	for _, part := range []string{"xx s3c", "r3t/v@l", "ue+x yy"} {
		w.Write([]byte(part))
	}
	w.Close()
	if buf.String() != "xx [REDACTED:API_TOKEN] yy" {
		t.Errorf("stream: %q", buf.String())
	}
	if got := (*Redactor)(nil).Redact("a"); got != "a" {
		t.Error("nil redactor")
	}
}

func FuzzRedactWriter(f *testing.F) {
	f.Add("hello s3cr3tvalue world", 3)
	f.Fuzz(func(t *testing.T, text string, chunk int) {
		res, _ := MaskEnv([]string{"API_TOKEN=s3cr3tvalue"}, Config{})
		r := NewRedactor(res.Secrets)
		if chunk <= 0 || chunk > 64 {
			chunk = 7
		}
		var buf bytes.Buffer
		w := r.Writer(&buf)
		for i := 0; i < len(text); i += chunk {
			w.Write([]byte(text[i:min(len(text), i+chunk)]))
		}
		w.Close()
		if buf.String() != r.Redact(text) {
			t.Fatalf("stream %q != whole %q", buf.String(), r.Redact(text))
		}
	})
}

// FuzzRedactReader: what the reader returns, whatever the sizes of the
// source's reads and of the caller's buffer (below and above what it reads
// into in place), is what Redact makes of the whole text, and what the
// writer makes of it.
func FuzzRedactReader(f *testing.F) {
	f.Add("s3cr3tvalue", "hello s3cr3tvalue world s3cr3", 3, 700, false)
	f.Add("s3cr3tvalue", "czNjcjN0dmFsdWU= s3cr3tvalue", 1, 1, true)
	f.Add("abcabcab", "xabcabcabcabcab abcabcabcabcabcabcab", 2, 1, true)
	f.Fuzz(func(t *testing.T, value, text string, chunk, size int, placeholder bool) {
		res, err := MaskEnv([]string{"API_TOKEN=" + value}, Config{})
		if err != nil || len(res.Secrets) == 0 {
			return
		}
		r := NewRedactor(res.Secrets)
		if placeholder {
			r = NewPlaceholderRedactor(res.Secrets)
		}
		if chunk <= 0 || chunk > 4096 {
			chunk = 7
		}
		if size <= 0 || size > 4096 {
			size = 600
		}
		got := readWith(t, r.Reader(io.NopCloser(&chunkReader{s: text, n: chunk})), size)
		var want bytes.Buffer
		w := r.Writer(&want)
		for i := 0; i < len(text); i += chunk {
			w.Write([]byte(text[i:min(len(text), i+chunk)]))
		}
		w.Close()
		if string(got) != r.Redact(text) || want.String() != r.Redact(text) {
			t.Fatalf("reader %q, writer %q, whole %q", got, want.String(), r.Redact(text))
		}
	})
}

func TestPlaceholderRedactor(t *testing.T) {
	v := "s3cr3t/v@lue+x"
	res, _ := MaskEnv([]string{"API_TOKEN=" + v}, Config{})
	ph := res.Secrets[0].Placeholder
	r := NewPlaceholderRedactor(res.Secrets)
	for _, enc := range encodings {
		if got := r.Redact("a " + enc(v) + " b"); got != "a "+enc(ph)+" b" {
			t.Errorf("%q became %q, want the placeholder's %q", enc(v), got, enc(ph))
		}
	}
	// Streaming, a byte at a time, through Reader.
	src := io.NopCloser(iotest.OneByteReader(strings.NewReader("x " + v + " y " + v)))
	got, err := io.ReadAll(r.Reader(src))
	if err != nil || string(got) != "x "+ph+" y "+ph {
		t.Errorf("reader: %q %v", got, err)
	}
}

// TestWriterHoldsBackOnlyAPossibleSecret: text that cannot begin a secret
// passes at once (no line waits for the next write); a possible start is
// held until it is decided.
func TestWriterHoldsBackOnlyAPossibleSecret(t *testing.T) {
	res, _ := MaskEnv([]string{"API_TOKEN=s3cr3tvalue"}, Config{})
	var buf bytes.Buffer
	w := NewRedactor(res.Secrets).Writer(&buf)
	w.Write([]byte("line one\n"))
	if buf.String() != "line one\n" {
		t.Errorf("held back %q", "line one\n"[len(buf.String()):])
	}
	w.Write([]byte("then s3cr"))
	if buf.String() != "line one\nthen " {
		t.Errorf("after a possible start: %q", buf.String())
	}
	w.Write([]byte("et... no"))
	w.Close()
	if buf.String() != "line one\nthen s3cret... no" {
		t.Errorf("got %q", buf.String())
	}
}

// BenchmarkRedactReaderClean streams 8 MiB with no secret in it through
// the response redactor (the TLS-terminated proxy's body path).
func BenchmarkRedactReaderClean(b *testing.B) {
	res, _ := MaskEnv([]string{"API_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789"}, Config{})
	r := NewPlaceholderRedactor(res.Secrets)
	data := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n"), 8<<20/63)
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		rd := r.Reader(io.NopCloser(bytes.NewReader(data)))
		if _, err := io.Copy(io.Discard, rd); err != nil {
			b.Fatal(err)
		}
	}
}

// A value inside longer base64 (Basic credentials "user:value" echoed
// back, for users of every length, so the value starts at every offset of
// a 3-byte group, and followed by more bytes) comes back as the
// placeholder but for the bits its first and last bytes share with their
// neighbours: the real value cannot be decoded from it.
func TestRedactorBase64InsideLongerText(t *testing.T) {
	v := "REALPASS2zz-secret"
	res, _ := MaskEnv([]string{"API_TOKEN=" + v}, Config{})
	ph := res.Secrets[0].Placeholder
	for _, r := range []*Redactor{NewPlaceholderRedactor(res.Secrets), NewRedactor(res.Secrets)} {
		for _, user := range []string{"", "b", "bo", "bob", "abcd", "x"} {
			for _, after := range []string{"", "!", "!?", "!?#"} {
				for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
					in := enc.EncodeToString([]byte(user + ":" + v + after))
					got := r.Redact("Authorization: Basic " + in)
					b64 := strings.TrimPrefix(got, "Authorization: Basic ")
					if strings.Contains(got, in) {
						t.Fatalf("%q:%q%q unchanged", user, v, after)
					}
					dec, err := enc.DecodeString(b64)
					if err != nil {
						continue // [REDACTED:…] is not base64: nothing to decode
					}
					if strings.Contains(string(dec), v[2:len(v)-2]) {
						t.Errorf("%q:%q%q decodes to %q", user, v, after, dec)
					}
					if r.to != nil && strings.HasPrefix(r.to[enc.EncodeToString([]byte(v))], enc.EncodeToString([]byte(ph))[:4]) &&
						!strings.Contains(string(dec), ph[2:len(ph)-2]) {
						t.Errorf("%q:%q%q decodes to %q, not the placeholder %q", user, v, after, dec, ph)
					}
				}
			}
		}
	}
}

// KeepsLength holds exactly when a redactor's output is as long as its
// input: a placeholder shaped like its value (letters for letters, digits
// for digits, punctuation kept) keeps every encoding's length, a
// [REDACTED:NAME] does not.
func TestRedactorKeepsLength(t *testing.T) {
	shaped, _ := MaskEnv([]string{"API_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789", "B_TOKEN=s3cr3t/v@lue+x"}, Config{})
	noPlaceholder := []*Secret{{Name: "X", value: "a-secret-without-placeholder"}}
	for _, tt := range []struct {
		name string
		r    *Redactor
		want bool
	}{
		{"nil", nil, true},
		{"no secrets", NewPlaceholderRedactor(nil), true},
		{"placeholders", NewPlaceholderRedactor(shaped.Secrets), true},
		{"[REDACTED:NAME]", NewRedactor(shaped.Secrets), false},
		{"a secret without a placeholder", NewPlaceholderRedactor(append(slices.Clone(shaped.Secrets), noPlaceholder...)), false},
	} {
		if got := tt.r.KeepsLength(); got != tt.want {
			t.Errorf("%s: KeepsLength %v, want %v", tt.name, got, tt.want)
		}
	}
}

// FuzzPlaceholderRedactorKeepsLength: a redactor that says it keeps
// lengths does, whole and streamed (a value cut off at the end included):
// the proxy keeps a searched body's Content-Length on its word.
func FuzzPlaceholderRedactorKeepsLength(f *testing.F) {
	f.Add("s3cr3t/v@lue+x", "a s3cr3t/v@lue+x b czNjcjN0L3ZAbHVlK3g= s3cr", 5)
	f.Add("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789 6768705f", 1)
	f.Fuzz(func(t *testing.T, value, text string, chunk int) {
		res, err := MaskEnv([]string{"API_TOKEN=" + value}, Config{})
		if err != nil || len(res.Secrets) == 0 {
			return
		}
		r := NewPlaceholderRedactor(res.Secrets)
		if !r.KeepsLength() {
			return
		}
		for _, enc := range encodings {
			text += " " + enc(value)
		}
		if got := r.Redact(text); len(got) != len(text) {
			t.Fatalf("Redact: %d bytes from %d", len(got), len(text))
		}
		if chunk <= 0 || chunk > 64 {
			chunk = 7
		}
		got, err := io.ReadAll(r.Reader(io.NopCloser(&chunkReader{s: text, n: chunk})))
		if err != nil || len(got) != len(text) {
			t.Fatalf("Reader: %d bytes from %d (%v)", len(got), len(text), err)
		}
	})
}

// readWith reads rd to its end through a buffer of size bytes; an error
// other than EOF fails the test.
func readWith(t *testing.T, rd io.Reader, size int) []byte {
	t.Helper()
	var got []byte
	p := make([]byte, size)
	for {
		n, err := rd.Read(p)
		got = append(got, p[:n]...)
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("%v after %d bytes", err, len(got))
		}
	}
}

// chunkReader returns s n bytes at a time and, like a TLS connection,
// answers a read into an empty buffer with (0, nil), counting them.
type chunkReader struct {
	s       string
	n       int
	empties int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	if len(p) == 0 {
		if c.empties++; c.empties > 1000 {
			return 0, errors.New("1000 reads into an empty buffer")
		}
		return 0, nil
	}
	k := copy(p[:min(len(p), c.n)], c.s)
	c.s = c.s[k:]
	return k, nil
}

// TestRedactorEchoShapes: what an echo service makes of a value it was
// sent, a red-team pass's cases: escaped inside a JSON string (by Go,
// Python, JavaScript, PHP) and trimmed of the white space, line end or
// quotes around it. Each comes back as the same shape of the placeholder.
func TestRedactorEchoShapes(t *testing.T) {
	for _, tt := range []struct {
		value string
		echo  func(string) string
	}{
		{`Tr0ub4dor"&3\zz`, func(v string) string { b, _ := json.Marshal(map[string]string{"pw": v}); return string(b) }},
		{`Tr0ub4dor"&3\zz`, func(v string) string { return `{"pw": "` + jsonEscape(v, jsonPlain) + `"}` }},
		{"ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5\r", func(v string) string { b, _ := json.Marshal(v); return string(b) }},
		{"ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5\r", func(v string) string { return "token=" + strings.TrimSpace(v) + "\n" }},
		{" 'quoted-secret-value' ", func(v string) string { return "<" + strings.Trim(v, " '") + ">" }},
		{"pässwört/ü-0123", func(v string) string { return `{"a":"` + jsonEscape(v, jsonASCII) + `"}` }},
		{"pässwört/ü-0123", func(v string) string { return `{"a":"` + jsonEscape(v, jsonASCII|jsonSlash) + `"}` }},
		{"a<b>&c-secretvalue", func(v string) string { b, _ := json.Marshal(v); return string(b) }},
		{"lïne\u2028sep-secretvalue", func(v string) string { b, _ := json.Marshal(v); return string(b) }},
		// Every character \u-escaped (a red team's echo server), either case.
		{"rtREALsecretVALUE0123456789abcdef", func(v string) string { return `{"t":"` + jsonEscape(v, jsonAll) + `"}` }},
		{"rtREALsecretVALUE0123456789abcdef", func(v string) string {
			return `{"t":"` + strings.ReplaceAll(strings.ToUpper(jsonEscape(v, jsonAll)), `\U`, `\u`) + `"}`
		}},
	} {
		res, err := MaskEnv([]string{"DB_PASSWORD=" + tt.value}, Config{})
		if err != nil || len(res.Secrets) != 1 {
			t.Fatalf("%q: not masked: %v", tt.value, err)
		}
		ph := res.Secrets[0].Placeholder
		r := NewPlaceholderRedactor(res.Secrets)
		echoed := tt.echo(tt.value)
		if got, want := r.Redact(echoed), tt.echo(ph); got != want {
			t.Errorf("%q: %q became %q, want %q", tt.value, echoed, got, want)
		}
		if got := NewRedactor(res.Secrets).Redact(echoed); strings.Contains(got, core(tt.value)) {
			t.Errorf("%q: the output redactor left %q", tt.value, got)
		}
	}
}

// A value percent-encoded as JavaScript's encodeURIComponent and Python's
// quote write it (a red-team pass: neither was a form) is redacted.
func TestRedactorURIComponents(t *testing.T) {
	res, _ := MaskEnv([]string{"DB_PASSWORD=p@ss w0rd!(x)/y"}, Config{})
	for _, echo := range []string{
		"q=p%40ss%20w0rd!(x)%2Fy&z",     // encodeURIComponent
		"q=p%40ss%20w0rd%21%28x%29/y&z", // urllib.parse.quote
	} {
		for _, r := range []*Redactor{NewRedactor(res.Secrets), NewPlaceholderRedactor(res.Secrets)} {
			if got := r.Redact(echo); strings.Contains(got, "w0rd") {
				t.Errorf("%q became %q", echo, got)
			}
		}
	}
}

// A stream cut right after a form that begins a longer one (a base64
// value's offset form, its last characters still to come) waits for the
// rest: the value's last byte does not pass in its last characters, as it
// did when the shorter form was replaced at once.
func TestStreamWaitsForTheLongerForm(t *testing.T) {
	res, _ := MaskEnv([]string{"API_TOKEN=s3cr3tvalue"}, Config{})
	r := NewPlaceholderRedactor(res.Secrets)
	enc := base64.StdEncoding.EncodeToString([]byte("s3cr3tvalue")) // czNjcjN0dmFsdWU=
	text := "x " + enc + " y"
	for cut := 1; cut < len(text); cut++ {
		var w bytes.Buffer
		wc := r.Writer(&w)
		wc.Write([]byte(text[:cut]))
		wc.Write([]byte(text[cut:]))
		wc.Close()
		got, err := io.ReadAll(r.Reader(io.NopCloser(&chunkReader{s: text, n: cut})))
		if err != nil || string(got) != r.Redact(text) || w.String() != r.Redact(text) {
			t.Errorf("cut at %d: reader %q, writer %q, whole %q", cut, got, w.String(), r.Redact(text))
		}
	}
}

// FuzzHeldTail: the hold-back finds the longest suffix that begins a form,
// as trying every length does.
func FuzzHeldTail(f *testing.F) {
	f.Add("s3cr3t/v@lue+x", "abc s3cr3t/v@l")
	f.Add("aabaab", "xaabaa")
	f.Fuzz(func(t *testing.T, value, s string) {
		res, err := MaskEnv([]string{"API_TOKEN=" + value}, Config{})
		if err != nil || len(res.Secrets) == 0 {
			return
		}
		r := NewPlaceholderRedactor(res.Secrets)
		want := 0
		for _, form := range r.forms {
			for k := min(len(form)-1, len(s)); k > want; k-- {
				if strings.HasSuffix(s, form[:k]) {
					want = k
					break
				}
			}
		}
		if got := r.heldTail(s); got != want {
			t.Fatalf("heldTail(%q) = %d, want %d (forms %q)", s, got, want, r.forms)
		}
	})
}

// A value whose form is longer than the reader's own buffer (an 11 KB
// value percent-encoded is 33 KB): the held tail outgrew the buffer and the
// reader asked its source for nothing, forever (a red-team pass).
func TestReaderHoldsAFormLongerThanItsBuffer(t *testing.T) {
	v := strings.Repeat("k3y9", 11000/4)
	res, _ := MaskEnv([]string{"API_TOKEN=" + v}, Config{})
	r := NewPlaceholderRedactor(res.Secrets)
	text := "hello " + percentAll(v, false) + " bye"
	src := &chunkReader{s: text, n: 16 << 10}
	got := readWith(t, r.Reader(io.NopCloser(src)), 32<<10)
	if string(got) != r.Redact(text) || src.empties > 0 {
		t.Errorf("%d bytes, %d empty reads", len(got), src.empties)
	}
}

// The end of a stream is redacted as the end of the whole text, where a
// cut-off form would begin inside a replacement (a red-team pass: a
// placeholder ending with its value's first bytes, then the value's next
// bytes).
func TestStreamEndsAsTheWholeText(t *testing.T) {
	s := &Secret{Name: "API_TOKEN", value: "abcdefgh", Placeholder: "qrstuvab", Mode: Mask}
	two, _ := MaskEnv([]string{"A_TOKEN=aaaaaaaa", "B_TOKEN=EN]qwerty"}, Config{})
	for _, tt := range []struct {
		r    *Redactor
		text string
	}{
		{NewPlaceholderRedactor([]*Secret{s}), "abcdefghcdef"},
		{NewRedactor(two.Secrets), "aaaaaaaaqwer"},
	} {
		got, err := io.ReadAll(tt.r.Reader(io.NopCloser(strings.NewReader(tt.text))))
		if err != nil || string(got) != tt.r.Redact(tt.text) {
			t.Errorf("%q: stream %q, whole %q", tt.text, got, tt.r.Redact(tt.text))
		}
	}
}
