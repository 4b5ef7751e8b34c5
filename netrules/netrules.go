// Package netrules is sbx's domain policy: allowed and denied hosts, with
// "*.example.com" wildcards (any-depth subdomains, not the apex), optional
// ":port", IP literals, case folding, trailing dots and IDNA. Denied beats
// allowed; with a strict allowlist anything unmatched is denied.
//
// It is pure: no DNS, no network. The proxy decides on the requested name
// here, then resolves it and checks the addresses with [AddrAllowed].
package netrules

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Decision is the outcome of [Set.Decide].
type Decision uint8

// The decisions.
const (
	// NoMatch: no rule names the host; strict mode denies it, otherwise the
	// user may be asked.
	NoMatch Decision = iota
	Allow
	Deny
)

func (d Decision) String() string {
	return [...]string{"no-match", "allow", "deny"}[d]
}

// Rule is one compiled allow or deny entry.
type Rule struct {
	Pattern string `json:"pattern"` // as written
	Origin  string `json:"origin"`  // where it came from (settings file:line, flag)
	// Exactly one of Host and IP is set. Host is normalised; it may hold
	// "*" wildcards ("*." at the front: any depth of subdomains; elsewhere:
	// within one label).
	Host string     `json:"host,omitempty"`
	IP   netip.Addr `json:"ip,omitempty"`
	Port int        `json:"port,omitempty"` // 0: any port
}

func (r *Rule) String() string { return r.Pattern }

// RuleError is returned for an entry that cannot be compiled.
type RuleError struct {
	Pattern, Origin, Msg string
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("%s: domain rule %q: %s", e.Origin, e.Pattern, e.Msg)
}

// Entry is a rule as it appears in settings or on the command line.
type Entry struct {
	Pattern string
	Origin  string
}

// Set is a compiled domain policy.
type Set struct {
	Allow []Rule `json:"allow"`
	Deny  []Rule `json:"deny"`
}

// Compile parses allow and deny entries. It refuses allow entries that are
// too broad ("*", "*.com") and a deny of "*" next to allowed entries, which
// would silently turn every allowed domain off.
func Compile(allow, deny []Entry) (*Set, error) {
	s := &Set{}
	for _, e := range allow {
		r, err := ParseRule(e.Pattern, e.Origin)
		if err != nil {
			return nil, err
		}
		if r.Host == "*" || (strings.HasPrefix(r.Host, "*.") && !strings.Contains(r.Host[2:], ".")) {
			return nil, &RuleError{e.Pattern, e.Origin, "too broad for an allow entry: name a domain (*.example.com)"}
		}
		s.Allow = append(s.Allow, *r)
	}
	for _, e := range deny {
		r, err := ParseRule(e.Pattern, e.Origin)
		if err != nil {
			return nil, err
		}
		if r.Host == "*" && len(s.Allow) > 0 {
			return nil, &RuleError{e.Pattern, e.Origin, fmt.Sprintf("denying * turns off every allowed domain (%s …): remove the allowed domains or this deny", s.Allow[0].Pattern)}
		}
		s.Deny = append(s.Deny, *r)
	}
	return s, nil
}

// ParseRule compiles one pattern: a host name (with wildcards), an IPv4 or
// bracketed IPv6 literal, each with an optional ":port".
func ParseRule(pattern, origin string) (*Rule, error) {
	fail := func(msg string) (*Rule, error) { return nil, &RuleError{pattern, origin, msg} }
	p := strings.TrimSpace(pattern)
	if p == "" {
		return fail("empty")
	}
	if strings.Contains(p, "://") || strings.ContainsAny(p, "/?#@ ") {
		return fail("a rule names a host, not a URL")
	}
	host, port, err := splitHostPort(p)
	if err != nil {
		return fail(err.Error())
	}
	r := &Rule{Pattern: pattern, Origin: origin, Port: port}
	if ip, ok := ParseIP(host); ok {
		r.IP = ip
		return r, nil
	}
	if host == "*" {
		r.Host = "*"
		return r, nil
	}
	// Normalise label by label, keeping wildcards.
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	for i, l := range labels {
		if l == "" {
			return fail("empty label")
		}
		if strings.Contains(l, "*") {
			if strings.ContainsAny(l, "[]?\\") {
				return fail("only * is a wildcard")
			}
			if _, err := path.Match(l, ""); err != nil {
				return fail("bad wildcard")
			}
			labels[i] = strings.ToLower(l)
			continue
		}
		n, err := normalizeLabel(l)
		if err != nil {
			return fail(err.Error())
		}
		labels[i] = n
	}
	r.Host = strings.Join(labels, ".")
	if ip, ok := ParseIP(r.Host); ok {
		r.Host, r.IP = "", ip
	}
	return r, nil
}

// splitHostPort splits "host", "host:port", "[v6]" and "[v6]:port".
func splitHostPort(s string) (string, int, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, errors.New("unclosed [")
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, 0, nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", 0, errors.New("junk after ]")
		}
		port, err := parsePort(rest[1:])
		return host, port, err
	}
	if strings.Count(s, ":") > 1 {
		return s, 0, nil // a bare IPv6 literal
	}
	host, portStr, ok := strings.Cut(s, ":")
	if !ok {
		return s, 0, nil
	}
	port, err := parsePort(portStr)
	return host, port, err
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return n, nil
}

var idnaProfile = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.StrictDomainName(false), idna.VerifyDNSLength(false))

// normalizeLabel lowercases a label and turns Unicode into punycode.
func normalizeLabel(l string) (string, error) {
	if l == "" {
		return "", errors.New("empty label")
	}
	if !utf8.ValidString(l) {
		return "", errors.New("not valid UTF-8")
	}
	for _, c := range l {
		if c < 0x21 || c == 0x7f || c == utf8.RuneError {
			return "", errors.New("control character, space or invalid character")
		}
	}
	a, err := idnaProfile.ToASCII(l)
	if err != nil {
		return "", fmt.Errorf("not a valid host name: %v", err)
	}
	// A punycode label must decode: the same host must normalise the same
	// way every time.
	if strings.HasPrefix(strings.ToLower(a), "xn--") {
		if _, err := idnaProfile.ToUnicode(a); err != nil {
			return "", fmt.Errorf("not a valid host name: %v", err)
		}
	}
	a = strings.ToLower(a)
	if a == "" || a == "xn--" {
		return "", errors.New("empty label")
	}
	for _, c := range a {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "", fmt.Errorf("character %q not allowed in a host name", c)
		}
	}
	return a, nil
}

// Host is a normalised request target.
type Host struct {
	Name string     // normalised name; empty for an IP literal
	IP   netip.Addr // set for an IP literal
}

func (h Host) String() string {
	if h.IP.IsValid() {
		return h.IP.String()
	}
	return h.Name
}

// NormalizeHost turns a requested host (as in a URL, CONNECT line or SOCKS
// request; brackets allowed) into its canonical form: lower case, no
// trailing dot, punycode, and IP literals in any spelling (127.1, 2130706433,
// 0x7f.0.0.1, ::ffff:127.0.0.1) as one address.
func NormalizeHost(h string) (Host, error) {
	h = strings.TrimPrefix(strings.TrimSuffix(h, "]"), "[")
	if ip, ok := ParseIP(h); ok {
		return Host{IP: ip}, nil
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return Host{}, errors.New("empty host")
	}
	if len(h) > 253 {
		return Host{}, errors.New("host name too long")
	}
	labels := strings.Split(h, ".")
	for i, l := range labels {
		n, err := normalizeLabel(l)
		if err != nil {
			return Host{}, fmt.Errorf("host %q: %w", h, err)
		}
		labels[i] = n
	}
	name := strings.Join(labels, ".")
	// IDNA mapping can turn a name into an address ("127\u00ad.0.0.1").
	if ip, ok := ParseIP(name); ok {
		return Host{IP: ip}, nil
	}
	return Host{Name: name}, nil
}

// ParseIP parses an IP literal the way the C library does for IPv4
// (inet_aton: one to four parts, each decimal, octal with a leading 0 or hex
// with 0x), plus IPv6 (with an optional zone dropped); IPv4-mapped IPv6 is
// returned as IPv4.
func ParseIP(s string) (netip.Addr, bool) {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if strings.Contains(s, ":") {
		if i := strings.IndexByte(s, '%'); i >= 0 {
			s = s[:i]
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}, false
		}
		return a.Unmap(), true
	}
	s = strings.TrimSuffix(s, ".")
	parts := strings.Split(s, ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, p := range parts {
		v, ok := parseInetPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals = append(vals, v)
	}
	var n uint64
	last := len(vals) - 1
	for i, v := range vals[:last] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	if vals[last] >= 1<<(8*(4-last)) {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

func parseInetPart(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := 10
	switch {
	case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true
		}
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	v, err := strconv.ParseUint(p, base, 32)
	return v, err == nil
}

// Verdict is a decision with the rule that made it.
type Verdict struct {
	Decision Decision
	Rule     *Rule // nil for NoMatch
}

// Decide matches a host and port against the rules: deny first, then allow.
// An IP literal matches only IP rules; a name matches only name rules.
func (s *Set) Decide(h Host, port int) Verdict {
	for i := range s.Deny {
		if s.Deny[i].matches(h, port) {
			return Verdict{Decision: Deny, Rule: &s.Deny[i]}
		}
	}
	for i := range s.Allow {
		if s.Allow[i].matches(h, port) {
			return Verdict{Decision: Allow, Rule: &s.Allow[i]}
		}
	}
	return Verdict{Decision: NoMatch}
}

func (r *Rule) matches(h Host, port int) bool {
	if r.Port != 0 && r.Port != port {
		return false
	}
	if r.IP.IsValid() || h.IP.IsValid() {
		return r.IP.IsValid() && h.IP.IsValid() && r.IP == h.IP
	}
	return MatchHost(r.Host, h.Name)
}

// MatchHost matches a normalised host against a normalised pattern: "*"
// matches everything; a leading "*." matches any depth of subdomains but not
// the apex; another "*" matches within one label.
func MatchHost(pattern, host string) bool {
	if pattern == "*" {
		return true
	}
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		if !strings.HasSuffix(host, "."+suffix) {
			return false
		}
		// The rest may be any number of labels, each non-empty.
		rest := strings.TrimSuffix(host, "."+suffix)
		return rest != "" && !strings.Contains(rest, "..") && !strings.HasPrefix(rest, ".")
	}
	pl, hl := strings.Split(pattern, "."), strings.Split(host, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		ok, err := path.Match(pl[i], hl[i])
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// AllowsAddress reports whether an allow rule names this address itself,
// which lets a name that resolves to a non-public address reach it.
func (s *Set) AllowsAddress(a netip.Addr, port int) *Rule {
	h := Host{IP: a.Unmap()}
	for i := range s.Deny {
		if s.Deny[i].matches(h, port) {
			return nil
		}
	}
	for i := range s.Allow {
		if s.Allow[i].matches(h, port) {
			return &s.Allow[i]
		}
	}
	return nil
}

// NamesHost reports whether an allow rule names host literally (no
// wildcard). Only "localhost" uses it: a literal allow of localhost may reach
// the host's loopback.
func (s *Set) NamesHost(host string, port int) bool {
	for _, r := range s.Allow {
		if r.Host == host && (r.Port == 0 || r.Port == port) {
			return true
		}
	}
	return false
}

// Special reports why an address may not be reached through a name: it is
// loopback, private, link-local (cloud metadata included), CGNAT,
// multicast, unspecified or otherwise not globally routable. The empty
// string means a public address.
func Special(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "link-local (cloud metadata)"
	case a.IsMulticast() || a.IsInterfaceLocalMulticast():
		return "multicast"
	case a.IsPrivate():
		return "private"
	}
	for _, p := range specialPrefixes {
		if p.prefix.Contains(a) {
			return p.why
		}
	}
	return ""
}

var specialPrefixes = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "CGNAT"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
}
