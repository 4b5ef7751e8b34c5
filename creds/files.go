package creds

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaskableFiles are the credential files, relative to the home directory,
// whose format sbx knows: the sandbox sees them with every secret replaced
// by a placeholder bound to the host the file names for it.
var MaskableFiles = []string{".npmrc", ".netrc", ".git-credentials", ".docker/config.json", ".pypirc",
	".config/git/credentials", ".config/containers/auth.json"}

// MaskedFile is a credential file as the sandbox sees it.
type MaskedFile struct {
	Path    string
	Content []byte
	// Secrets are the values replaced, each bound to the host named for it
	// in the file (none when the file names none).
	Secrets []*Secret
}

// maxCredentialFile bounds what is read of a credential file.
const maxCredentialFile = 1 << 20

// MaskFile masks a credential file of a known format (by its path relative
// to the home directory, rel). Settings are kept as they are, secrets
// become placeholders, and what cannot be read as the format (a stray
// token, a netrc macro) is left out. An error means the file cannot be
// read as its format at all: it stays hidden.
func MaskFile(rel, path string, data []byte) (*MaskedFile, error) {
	if len(data) > maxCredentialFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxCredentialFile)
	}
	m := &masker{name: "~/" + rel}
	var out []byte
	var err error
	switch filepath.ToSlash(rel) {
	case ".npmrc":
		m.registry = npmRegistry(data)
		out, err = m.linesCR(data, m.npmrcLine)
	case ".netrc":
		out, err = m.netrc(data)
	case ".git-credentials", ".config/git/credentials": // git's credential store, either place
		out, err = m.lines(data, m.gitCredentialsLine)
	case ".pypirc":
		out, err = m.pypirc(data)
	case ".docker/config.json", ".config/containers/auth.json": // podman's is docker's format
		out, err = m.dockerConfig(data)
	default:
		return nil, fmt.Errorf("%s: not a credential file sbx knows", path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &MaskedFile{Path: path, Content: out, Secrets: m.secrets}, nil
}

// envRef is a value that is only a reference to an environment variable.
var envRef = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`)

// hostPort is where a URL's credentials may go: its host and port (the
// scheme's default when it names none), so a token for an HTTPS registry
// never travels in clear to port 80 of the same host.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
		if strings.EqualFold(u.Scheme, "http") {
			port = "80"
		}
	}
	if u.Hostname() == "" {
		return ""
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// isComment reports whether an INI-style line is a comment: left out, as
// an old token may still be valid.
func isComment(t string) bool { return strings.HasPrefix(t, "#") || strings.HasPrefix(t, ";") }

// masker replaces secrets with placeholders and keeps them.
type masker struct {
	name    string
	secrets []*Secret
	// registry is the host of an .npmrc's registry= (unscoped credentials
	// go there); section is set once an ini section header was seen.
	registry string
	section  bool
}

// mask returns the placeholder for value, bound to host ("" for none).
func (m *masker) mask(what, value, host string) (string, error) {
	if value == "" || envRef.MatchString(value) {
		return value, nil // empty, or only an environment reference (masked there)
	}
	for _, s := range m.secrets {
		if s.value == value && slicesEqual(s.Hosts, hostList(host)) {
			return s.Placeholder, nil
		}
	}
	ph, err := Placeholder(value)
	if err != nil {
		return "", err
	}
	// A file that names the host but no port or scheme (netrc's machine)
	// does not say the value may travel in clear: TLS only.
	_, _, err = net.SplitHostPort(host)
	m.secrets = append(m.secrets, &Secret{Name: m.name + " " + what, value: value, Placeholder: ph, Hosts: hostList(host), Mode: Mask,
		TLSOnly: host != "" && err != nil})
	return ph, nil
}

func hostList(h string) []string {
	if h == "" {
		return nil
	}
	return []string{h}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

// lines rewrites data line by line with f, keeping line endings.
func (m *masker) lines(data []byte, f func(string) (string, error)) ([]byte, error) {
	return eachLine(bytes.SplitAfter(data, []byte("\n")), f)
}

// linesCR is lines for files whose reader also ends a line at a lone CR
// (npm's ini parser splits on [\r\n]+).
func (m *masker) linesCR(data []byte, f func(string) (string, error)) ([]byte, error) {
	return eachLine(splitAfterCRLF(data), f)
}

// eachLine rewrites each line (with its ending) with f, keeping endings.
func eachLine(lines [][]byte, f func(string) (string, error)) ([]byte, error) {
	var out bytes.Buffer
	for _, line := range lines {
		body := strings.TrimRight(string(line), "\r\n")
		masked, err := f(body)
		if err != nil {
			return nil, err
		}
		out.WriteString(masked)
		out.Write(line[len(body):])
	}
	return out.Bytes(), nil
}

// splitAfterCRLF cuts data after every CR and every LF.
func splitAfterCRLF(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			return append(out, data)
		}
		out, data = append(out, data[:i+1]), data[i+1:]
	}
	return out
}

// npmRegistry is the host (host:port) of the file's own top-level
// `registry=`, where npm sends unscoped credentials; "" when it has none
// (sbx does not guess the default registry). A key after an ini section
// header is that section's, not npm's registry.
func npmRegistry(data []byte) string {
	host := ""
	for _, b := range splitAfterCRLF(data) {
		line := strings.TrimRight(string(b), "\r\n")
		if isSection(iniTrim(line)) {
			break
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ToLower(npmKey(k)) != "registry" {
			continue
		}
		if u, err := url.Parse(strings.Trim(strings.TrimSpace(v), `"'`)); err == nil && u.Host != "" {
			host = hostPort(u) // the last one wins, as in npm
		}
	}
	return host
}

// isSection reports whether a trimmed line is an ini section header
// ([name]).
func isSection(t string) bool {
	return len(t) >= 2 && t[0] == '[' && t[len(t)-1] == ']' && !strings.Contains(t[1:len(t)-1], "]")
}

// iniTrim trims as JavaScript's trim(), which npm's ini parser uses: Go's
// white space and the byte-order mark.
func iniTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' })
}

// npmKey is a key as npm's ini parser reads it: trimmed, unquoted (a
// double-quoted key is JSON, escapes and all), and without the [] that
// marks an array.
func npmKey(key string) string {
	k := iniTrim(key)
	if len(k) >= 2 && (k[0] == '"' || k[0] == '\'') && k[len(k)-1] == k[0] {
		inner := k[1 : len(k)-1]
		var s string
		if err := json.Unmarshal([]byte(`"`+inner+`"`), &s); err == nil && k[0] == '"' {
			inner = s
		} else if err := json.Unmarshal([]byte(inner), &s); err == nil && k[0] == '\'' {
			inner = s // ini parses what the single quotes hold as JSON too
		}
		k = iniTrim(inner)
	}
	return strings.TrimSuffix(k, "[]")
}

// npmrcLine masks `//host/path/:_authToken=…` (and _auth, _password,
// password, certfile's key), bound to that host, and unscoped ones, bound
// to the file's `registry=` host (to none without it); keys are read as
// npm reads them (quoted, arrays). `_password` (the password in base64)
// and `_auth` (user:password in base64) are decoded and written back as
// the base64 of the placeholder, so that the Basic credentials npm builds
// from them carry the placeholder the proxy swaps. A password in any URL
// value (registry=https://user:pw@host/) is masked too. Section headers
// are kept: they change what the keys after them mean.
func (m *masker) npmrcLine(line string) (string, error) {
	t := iniTrim(line)
	switch {
	case t == "":
		return line, nil
	case isComment(t):
		return "", nil
	case isSection(t):
		m.section = true
		return line, nil
	}
	key, value, ok := strings.Cut(line, "=")
	if !ok {
		return "", nil // not a setting: left out
	}
	k := npmKey(key)
	field, host := k, ""
	if strings.HasPrefix(k, "//") {
		i := strings.LastIndex(k, ":")
		if i < 0 {
			return line, nil
		}
		field = k[i+1:]
		if u, err := url.Parse("https:" + k[:i]); err == nil {
			host = hostPort(u)
		}
	} else if !m.section {
		host = m.registry
	}
	f := strings.ToLower(field)
	switch f {
	case "_authtoken", "_auth", "_password", "password", "key", "keyfile", "cert", "certfile", "token":
	default:
		return m.urlPassword(k, key, value)
	}
	v := strings.TrimSpace(value)
	unq := strings.Trim(v, `"'`)
	if f == "_password" || f == "_auth" {
		if enc, ok, err := m.maskBase64(k, unq, host, f == "_auth"); ok || err != nil {
			return key + "=" + strings.Replace(value, unq, enc, 1), err
		}
	}
	ph, err := m.mask(k, unq, host)
	if err != nil {
		return "", err
	}
	return key + "=" + strings.Replace(value, unq, ph, 1), nil
}

// urlPassword masks the password of a URL value, bound to its host.
func (m *masker) urlPassword(k, key, value string) (string, error) {
	v := strings.Trim(strings.TrimSpace(value), `"'`)
	u, err := url.Parse(v)
	if !strings.Contains(v, "://") || err != nil || u.User == nil {
		return key + "=" + value, nil
	}
	pass, ok := u.User.Password()
	if !ok {
		// A token as the user name (https://TOKEN@host).
		ph, err := m.mask(k+" URL user", u.User.Username(), hostPort(u))
		if err != nil {
			return "", err
		}
		u.User = url.User(ph)
		return key + "=" + strings.Replace(value, v, u.String(), 1), nil
	}
	ph, err := m.mask(k+" URL password", pass, hostPort(u))
	if err != nil {
		return "", err
	}
	u.User = url.UserPassword(u.User.Username(), ph)
	return key + "=" + strings.Replace(value, v, u.String(), 1), nil
}

// maskBase64 masks a base64 credential: the password it holds (after
// "user:" when userPass) becomes a placeholder, encoded again. ok is false
// when v is not such a value (it is then masked as it is).
func (m *masker) maskBase64(what, v, host string, userPass bool) (string, bool, error) {
	dec, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(dec) == 0 || !utf8.Valid(dec) {
		return "", false, nil
	}
	user, pass := "", string(dec)
	if userPass {
		var ok bool
		if user, pass, ok = strings.Cut(string(dec), ":"); !ok {
			return "", false, nil
		}
		user += ":"
	}
	ph, err := m.mask(what, pass, host)
	if err != nil {
		return "", false, err
	}
	return base64.StdEncoding.EncodeToString([]byte(user + ph)), true, nil
}

// gitCredentialsLine masks the password of `https://user:pass@host/…`.
func (m *masker) gitCredentialsLine(line string) (string, error) {
	if strings.TrimSpace(line) == "" {
		return line, nil
	}
	u, err := url.Parse(strings.TrimSpace(line))
	if err != nil || u.User == nil || u.Host == "" {
		return "", nil // not a credential URL: left out
	}
	pass, ok := u.User.Password()
	if !ok {
		// A token as the user name (https://TOKEN@host).
		ph, err := m.mask("user for "+u.Host, u.User.Username(), hostPort(u))
		if err != nil {
			return "", err
		}
		u.User = url.User(ph)
		return u.String(), nil
	}
	ph, err := m.mask("password for "+u.Host, pass, hostPort(u))
	if err != nil {
		return "", err
	}
	u.User = url.UserPassword(u.User.Username(), ph)
	return u.String(), nil
}

// netrc masks every password and account, bound to its machine (none for
// default), and writes the file again one entry per line; macro
// definitions and tokens that are not netrc's are left out.
func (m *masker) netrc(data []byte) ([]byte, error) {
	var out bytes.Buffer
	toks := strings.Fields(string(data))
	machine := ""
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		next := ""
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		switch tok {
		case "machine":
			machine = next
			fmt.Fprintf(&out, "\nmachine %s", next)
			i++
		case "default":
			machine = ""
			out.WriteString("\ndefault")
		case "login":
			fmt.Fprintf(&out, " login %s", next)
			i++
		case "password", "account":
			ph, err := m.mask(tok+" for "+machine, next, machine)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&out, " %s %s", tok, ph)
			i++
		case "macdef":
			i = skipMacro(toks, i)
		}
	}
	return append(bytes.TrimPrefix(out.Bytes(), []byte("\n")), '\n'), nil
}

// skipMacro returns the index of the last token of a macro definition
// starting at i (its body runs to the next netrc keyword, as far as the
// tokens tell).
func skipMacro(toks []string, i int) int {
	for i+1 < len(toks) && toks[i+1] != "machine" && toks[i+1] != "default" {
		i++
	}
	return i
}

// pypirc masks `password` in every section (keys in any case, `=` or `:`
// as configparser reads them), bound to that section's repository host
// and port (none when it names none); comments are left out.
func (m *masker) pypirc(data []byte) ([]byte, error) {
	hosts := map[string]string{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]") {
			section = t
			continue
		}
		if k, v, ok := iniCut(t); ok && k == "repository" {
			if u, err := url.Parse(v); err == nil {
				hosts[section] = hostPort(u)
			}
		}
	}
	section, last := "", ""
	return m.lines(data, func(line string) (string, error) {
		t := strings.TrimSpace(line)
		switch {
		case t == "":
			return line, nil
		case isComment(t):
			return "", nil
		case strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]"):
			section, last = t, ""
			return line, nil
		case line[0] == ' ' || line[0] == '\t':
			if last == "password" {
				return "", nil // a continued password: left out
			}
			return line, nil // a continued list (index-servers)
		}
		k, v, ok := iniCut(line)
		if !ok {
			return "", nil // not a setting: left out
		}
		if last = k; k != "password" {
			return line, nil
		}
		ph, err := m.mask("password in "+section, v, hosts[section])
		if err != nil {
			return "", err
		}
		return "password = " + ph, nil
	})
}

// iniCut splits a configparser line at its first = or :, the key
// lower-cased, both trimmed.
func iniCut(line string) (key, value string, ok bool) {
	i := strings.IndexAny(line, "=:")
	if i < 0 {
		return "", "", false
	}
	return strings.ToLower(strings.TrimSpace(line[:i])), strings.TrimSpace(line[i+1:]), true
}

// dockerConfig masks every secret of auths entries (the password inside
// `auth`, tokens; bound to the registry's host and port), HttpHeaders
// values and passwords in proxies URLs, with keys matched in any case as
// Docker reads them. The file is rewritten as JSON with the same keys.
func (m *masker) dockerConfig(data []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	for key, raw := range doc {
		var masked any
		var err error
		switch strings.ToLower(key) {
		case "auths":
			masked, err = m.dockerAuths(raw)
		case "httpheaders":
			masked, err = m.maskStrings(raw, "header", "")
		case "proxies":
			masked, err = m.maskURLPasswords(raw)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		doc[key], _ = json.Marshal(masked)
	}
	return json.MarshalIndent(doc, "", "\t")
}

func (m *masker) dockerAuths(raw json.RawMessage) (any, error) {
	var auths map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &auths); err != nil {
		return nil, err
	}
	for reg, entry := range auths {
		r := reg
		if !strings.Contains(r, "://") {
			r = "https://" + r
		}
		host := ""
		if u, err := url.Parse(r); err == nil {
			host = hostPort(u)
		}
		for field, fraw := range entry {
			var v string
			if json.Unmarshal(fraw, &v) != nil || v == "" {
				continue
			}
			masked, err := m.dockerField(reg, host, strings.ToLower(field), v)
			if err != nil {
				return nil, err
			}
			entry[field], _ = json.Marshal(masked)
		}
	}
	return auths, nil
}

// maskStrings masks every string in a JSON value, bound to host.
func (m *masker) maskStrings(raw json.RawMessage, what, host string) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return walkStrings(v, func(s string) (string, error) { return m.mask(what, s, host) })
}

// maskURLPasswords masks the password of every URL string in a JSON value.
func (m *masker) maskURLPasswords(raw json.RawMessage) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return walkStrings(v, func(s string) (string, error) {
		u, err := url.Parse(s)
		if err != nil || u.User == nil {
			return s, nil
		}
		pass, ok := u.User.Password()
		if !ok {
			return s, nil
		}
		ph, err := m.mask("proxy password", pass, "")
		if err != nil {
			return "", err
		}
		u.User = url.UserPassword(u.User.Username(), ph)
		return u.String(), nil
	})
}

// walkStrings replaces every string in a decoded JSON value with f's.
func walkStrings(v any, f func(string) (string, error)) (any, error) {
	switch t := v.(type) {
	case string:
		return f(t)
	case map[string]any:
		for k, e := range t {
			r, err := walkStrings(e, f)
			if err != nil {
				return nil, err
			}
			t[k] = r
		}
	case []any:
		for i, e := range t {
			r, err := walkStrings(e, f)
			if err != nil {
				return nil, err
			}
			t[i] = r
		}
	}
	return v, nil
}

// dockerField masks one field of an auths entry: everything but the user
// name, e-mail and server address is a secret.
func (m *masker) dockerField(reg, host, field, v string) (string, error) {
	switch field {
	case "username", "email", "serveraddress":
		return v, nil
	case "auth":
		dec, err := base64.StdEncoding.DecodeString(v)
		user, pass, ok := strings.Cut(string(dec), ":")
		if err != nil || !ok {
			return m.mask("auth for "+reg, v, host)
		}
		ph, err := m.mask("password for "+reg, pass, host)
		if err != nil {
			return "", err
		}
		return base64.StdEncoding.EncodeToString([]byte(user + ":" + ph)), nil
	default:
		return m.mask(field+" for "+reg, v, host)
	}
}
