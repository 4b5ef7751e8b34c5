// Package creds keeps secrets out of the sandbox: it finds them in the
// environment (by name and by the shape of the value), replaces each with a
// worthless placeholder of the same kind (or removes it), knows which hosts
// each may be sent to (the proxy swaps the real value in only for those),
// and redacts real values from everything sbx hands back.
package creds

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Mode is what happens to a secret variable.
type Mode string

// The modes.
const (
	// Mask replaces the value with a per-run placeholder (the default).
	Mask Mode = "mask"
	// Deny removes the variable.
	Deny Mode = "deny"
	// Pass passes the real value (explicit opt-out).
	Pass Mode = "pass"
)

// Secret is one secret variable. Its real value is reachable only through
// [Secret.Value]; every way of printing it redacts.
type Secret struct {
	Name        string
	value       string
	Placeholder string   // what the sandbox sees ("" when removed)
	Hosts       []string // host patterns it may be sent to (netrules syntax)
	Mode        Mode
	// TLSOnly: the value goes to Hosts over TLS only (set when they are
	// sbx's defaults for the name, or a credential file's host with no
	// port: neither says plain HTTP is meant).
	TLSOnly bool
}

// Value returns the real value, for the proxy's injection only.
func (s *Secret) Value() string { return s.value }

// String implements fmt.Stringer without the value.
func (s *Secret) String() string { return "[redacted:" + s.Name + "]" }

// GoString implements fmt.GoStringer without the value.
func (s *Secret) GoString() string { return s.String() }

// MarshalJSON implements json.Marshaler without the value.
func (s *Secret) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"name": s.Name, "mode": s.Mode, "hosts": s.Hosts})
}

// LogValue implements slog.LogValuer without the value.
func (s *Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// VarConfig is the setting for one variable.
type VarConfig struct {
	Mode  Mode
	Hosts []string
}

// Config is sandbox.credentials.
type Config struct {
	Vars map[string]VarConfig
	// Patterns are extra name patterns (regular expressions, matched
	// case-insensitively against the whole name) that mark secrets.
	Patterns []string
}

// namePattern marks secret-looking variable names.
// (a word of its own, or a name ending in TOKEN, SECRET or PASSWORD:
// APITOKEN). secretName is its fast form for ASCII names.
var namePattern = lazyRegexp(`(?i)(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PASS|PWD|KEY|APIKEY|PRIVATE|CREDENTIALS?|AUTH|DSN|WEBHOOK)(S)?($|_)|(TOKEN|SECRET|PASSWORD|PASSWD)S?$`)

// secretWords are namePattern's words; secretEnds its name endings.
var (
	secretWords = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "PASS", "PWD", "KEY", "APIKEY",
		"PRIVATE", "CREDENTIAL", "CREDENTIALS", "AUTH", "DSN", "WEBHOOK"}
	secretEnds = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD"}
)

// locationSuffix marks names that hold where a secret is, not the secret.
// locationName is its fast form for ASCII names.
var locationSuffix = lazyRegexp(`(?i)_(PATH|FILE|DIR|SOCK|HOME|ID|BUNDLE|REGION|ENDPOINT|ENDPOINT_URL|PROFILE)$`)

// locationEnds are locationSuffix's endings.
var locationEnds = []string{"_PATH", "_FILE", "_DIR", "_SOCK", "_HOME", "_ID", "_BUNDLE", "_REGION", "_ENDPOINT",
	"_ENDPOINT_URL", "_PROFILE"}

// secretName is namePattern.MatchString(upper) for an upper-cased name,
// without compiling the expression for an ASCII one (most names: the
// compile and its first match cost ~1 ms of a cold sbx run). A name
// with other bytes goes to the expression, whose case folding (K and
// KELVIN SIGN, S and LONG S) a plain comparison would not follow.
func secretName(upper string) bool {
	if !isASCII(upper) {
		return namePattern().MatchString(upper)
	}
	for w := range strings.SplitSeq(upper, "_") {
		if slices.Contains(secretWords, w) || strings.HasSuffix(w, "S") && slices.Contains(secretWords, w[:len(w)-1]) {
			return true
		}
	}
	for _, e := range secretEnds {
		if strings.HasSuffix(upper, e) || strings.HasSuffix(upper, e+"S") {
			return true
		}
	}
	return false
}

// locationName is locationSuffix.MatchString(upper), as secretName is
// namePattern's.
func locationName(upper string) bool {
	if !isASCII(upper) {
		return locationSuffix().MatchString(upper)
	}
	for _, e := range locationEnds {
		if strings.HasSuffix(upper, e) {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// secretNames are well-known secret variables.
var secretNames = []string{"GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "ANTHROPIC_API_KEY", "OPENAI_API_KEY",
	"NPM_TOKEN", "NODE_AUTH_TOKEN", "PYPI_TOKEN", "TWINE_PASSWORD", "CARGO_REGISTRY_TOKEN", "DOCKER_PASSWORD",
	"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "SLACK_TOKEN", "DATABASE_URL", "SENTRY_DSN", "VAULT_TOKEN",
	"GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_SECRET", "CLAUDE_CODE_OAUTH_TOKEN"}

// notSecrets are names the patterns would catch that hold no secret.
var notSecrets = []string{"PWD", "OLDPWD", "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "AWS_REGION", "AWS_DEFAULT_REGION",
	"AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "KEYTIMEOUT", "XAUTHORITY", "SBX_VICTIM"}

// shapes are values that are secrets whatever their name, with how many
// leading characters (the kind's prefix) a placeholder keeps. Each is
// compiled on first need: every process of sbx (the sandbox's init too)
// starts with this package, most never look at a value, and a value that
// fails a shape's cheap test (its literal prefix, a substring every match
// holds) never needs the expression.
var shapes = []shape{
	// Anywhere in the value: a service account's JSON holds one with its
	// line ends escaped.
	newShape(`-----BEGIN [A-Z ]*PRIVATE KEY-----`, 0, holds("-----BEGIN ")),
	// A URL with a password (redis://:pw@h, mongodb+srv://u:pw@h), and a
	// connection string's key or password (Azure's AccountKey=, ADO.NET's
	// Password=).
	newShape(`^[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@`, 0, holds("://", "@")),
	newShape(`(?i)(^|;)\s*(AccountKey|SharedAccessKey|Password|Pwd)\s*=\s*[^;\s]`, 0, holds("=")),
	newShape(`^pypi-AgE[A-Za-z0-9_-]{8,}$`, 8, startsWith("pypi-AgE")),
	newShape(`^AIza[0-9A-Za-z_-]{30,40}$`, 4, startsWith("AIza")),
	newShape(`^SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}$`, 3, startsWith("SG.")),
	newShape(`^eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*$`, 3, startsWith("eyJ")),
	newShape(`^(AKIA|ASIA)[0-9A-Z]{16}$`, 4, startsWith("AKIA", "ASIA")),
	newShape(`^github_pat_[A-Za-z0-9_]{20,}$`, 11, startsWith("github_pat_")),
	newShape(`^gh[pousr]_[A-Za-z0-9]{20,}$`, 4, startsWith("gh")),
	newShape(`^sk-ant-[A-Za-z0-9_-]{16,}$`, 7, startsWith("sk-ant-")),
	newShape(`^sk-[A-Za-z0-9_-]{16,}$`, 3, startsWith("sk-")),
	newShape(`^xox[abposr]-[A-Za-z0-9-]{10,}$`, 5, startsWith("xox")),
	newShape(`^glpat-[A-Za-z0-9_-]{20,}$`, 6, startsWith("glpat-")),
	newShape(`^npm_[A-Za-z0-9]{36}$`, 4, startsWith("npm_")),
	newShape(`^hf_[A-Za-z0-9]{30,}$`, 3, startsWith("hf_")),
	newShape(`^[rsp]k_(live|test)_[A-Za-z0-9]{10,}$`, 8, startsWith("rk_", "sk_", "pk_")),
}

type shape struct {
	expr string
	re   func() *regexp.Regexp
	keep int
	// may is true for every value re matches (and for others): re runs
	// only on values that pass it.
	may func(v string) bool
}

func newShape(expr string, keep int, may func(string) bool) shape {
	return shape{expr: expr, re: lazyRegexp(expr), keep: keep, may: may}
}

// match reports whether v has the shape.
func (s shape) match(v string) bool { return s.may(v) && s.re().MatchString(v) }

// holds is a shape's test that v holds every one of subs.
func holds(subs ...string) func(string) bool {
	return func(v string) bool {
		for _, sub := range subs {
			if !strings.Contains(v, sub) {
				return false
			}
		}
		return true
	}
}

// startsWith is a shape's test that v starts with one of prefixes.
func startsWith(prefixes ...string) func(string) bool {
	return func(v string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(v, p) {
				return true
			}
		}
		return false
	}
}

// lazyRegexp compiles expr on first use.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// defaultHosts binds well-known tokens to the hosts they are for.
var defaultHosts = map[string][]string{
	"GITHUB_TOKEN":      {"github.com", "*.github.com"},
	"GH_TOKEN":          {"github.com", "*.github.com"},
	"ANTHROPIC_API_KEY": {"api.anthropic.com"},
	"OPENAI_API_KEY":    {"api.openai.com"},
}

// Classify reports whether a variable holds a secret, by its name or by the
// shape of its value.
func Classify(name, value string, extra []*regexp.Regexp) bool {
	upper := strings.ToUpper(name)
	if slices.Contains(notSecrets, upper) || value == "" {
		return false
	}
	if slices.Contains(secretNames, upper) {
		return true
	}
	if (strings.HasPrefix(upper, "AWS_") || secretName(upper)) && !locationName(upper) {
		return true
	}
	for _, re := range extra {
		if re.MatchString(name) {
			return true
		}
	}
	for _, s := range shapes {
		if s.match(value) {
			return true
		}
	}
	return false
}

// Result is the masked environment.
type Result struct {
	Env     []string
	Secrets []*Secret // every secret found, removed or masked
}

// MaskEnv classifies every variable of env and applies the configuration:
// secrets are masked (default), removed or passed; everything else passes.
// Configured variables are treated as secrets whatever their name.
func MaskEnv(env []string, cfg Config) (*Result, error) {
	var extra []*regexp.Regexp
	for _, p := range cfg.Patterns {
		re, err := regexp.Compile("(?i)^(?:" + p + ")$")
		if err != nil {
			return nil, fmt.Errorf("sandbox.credentials.patterns: %q: %w", p, err)
		}
		extra = append(extra, re)
	}
	res := &Result{}
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		vc, configured := cfg.Vars[name]
		if !configured && !Classify(name, value, extra) {
			res.Env = append(res.Env, kv)
			continue
		}
		mode := vc.Mode
		if mode == "" {
			mode = Mask
		}
		s := &Secret{Name: name, value: value, Mode: mode, Hosts: vc.Hosts}
		if s.Hosts == nil {
			s.Hosts = defaultHosts[strings.ToUpper(name)]
			s.TLSOnly = s.Hosts != nil
		}
		switch mode {
		case Pass:
			res.Env = append(res.Env, kv)
		case Deny:
		case Mask:
			ph, err := Placeholder(value)
			if err != nil {
				return nil, err
			}
			s.Placeholder = ph
			res.Env = append(res.Env, name+"="+ph)
		default:
			return nil, fmt.Errorf("sandbox.credentials.%s.mode: %q is not mask, deny or pass", name, mode)
		}
		res.Secrets = append(res.Secrets, s)
	}
	sort.Slice(res.Secrets, func(i, j int) bool { return res.Secrets[i].Name < res.Secrets[j].Name })
	return res, nil
}

const (
	lower  = "abcdefghijklmnopqrstuvwxyz"
	upper_ = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	digits = "0123456789"
)

func randFrom(set string) (byte, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(int64(len(set))))
	if err != nil {
		return 0, err
	}
	return set[n.Int64()], nil
}

// Placeholder returns a worthless value shaped like v: a known prefix is
// kept, every other letter and digit is replaced by a random one of the same
// class, punctuation is kept. It never equals v.
func Placeholder(v string) (string, error) {
	prefix := ""
	for _, s := range shapes {
		if s.match(v) {
			prefix = v[:s.keep]
			break
		}
	}
	// PEM: keep the armour lines.
	lines := strings.Split(v, "\n")
	for attempt := 0; attempt < 4; attempt++ {
		var b strings.Builder
		for li, line := range lines {
			if li > 0 {
				b.WriteByte('\n')
			}
			if strings.HasPrefix(line, "-----") {
				b.WriteString(line)
				continue
			}
			start := 0
			if li == 0 {
				b.WriteString(prefix)
				start = len(prefix)
			}
			for _, c := range []byte(line[start:]) {
				var set string
				switch {
				case c >= 'a' && c <= 'z':
					set = lower
				case c >= 'A' && c <= 'Z':
					set = upper_
				case c >= '0' && c <= '9':
					set = digits
				default:
					b.WriteByte(c)
					continue
				}
				r, err := randFrom(set)
				if err != nil {
					return "", err
				}
				b.WriteByte(r)
			}
		}
		if p := b.String(); p != v {
			return p, nil
		}
	}
	return "sbx-masked", nil
}
