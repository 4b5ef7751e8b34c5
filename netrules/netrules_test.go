package netrules

import (
	"net/netip"
	"strings"
	"testing"
)

func mustSet(t *testing.T, allow, deny []string) *Set {
	t.Helper()
	var a, d []Entry
	for _, p := range allow {
		a = append(a, Entry{p, "test"})
	}
	for _, p := range deny {
		d = append(d, Entry{p, "test"})
	}
	s, err := Compile(a, d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func decide(t *testing.T, s *Set, host string, port int) Decision {
	t.Helper()
	h, err := NormalizeHost(host)
	if err != nil {
		t.Fatalf("NormalizeHost(%q): %v", host, err)
	}
	return s.Decide(h, port).Decision
}

func TestDecide(t *testing.T) {
	s := mustSet(t,
		[]string{"example.com", "*.github.com", "api.openai.com:443", "127.0.0.1", "[::1]:8080", "Bücher.example", "registry.*.io"},
		[]string{"evil.github.com", "*.corp.github.com"})
	tests := []struct {
		host string
		port int
		want Decision
	}{
		{"example.com", 443, Allow},
		{"EXAMPLE.COM.", 80, Allow},
		{"www.example.com", 443, NoMatch},      // no wildcard: only the name itself
		{"evil-example.com", 443, NoMatch},     // suffix confusion
		{"example.com.evil.net", 443, NoMatch}, // suffix confusion
		{"github.com", 443, NoMatch},           // *. does not match the apex
		{"api.github.com", 443, Allow},
		{"a.b.c.github.com", 443, Allow}, // any depth
		{"evil.github.com", 443, Deny},   // denied beats allowed
		{"x.corp.github.com", 443, Deny}, // denied wildcard
		{"api.openai.com", 443, Allow},
		{"api.openai.com", 80, NoMatch}, // port-restricted
		{"127.0.0.1", 80, Allow},
		{"127.1", 80, Allow}, // same address, other spelling
		{"2130706433", 80, Allow},
		{"0x7f.0.0.1", 80, Allow},
		{"0177.0.0.1", 80, Allow},
		{"::ffff:127.0.0.1", 80, Allow}, // IPv4-mapped IPv6
		{"[::1]", 8080, Allow},
		{"::1", 80, NoMatch},
		{"localhost", 80, NoMatch},            // an IP rule does not match a name
		{"bücher.example", 443, Allow},        // IDNA: Unicode
		{"xn--bcher-kva.example", 443, Allow}, // IDNA: punycode
		{"registry.npm.io", 443, Allow},       // * within one label
		{"registry.a.b.io", 443, NoMatch},
	}
	for _, tt := range tests {
		if got := decide(t, s, tt.host, tt.port); got != tt.want {
			t.Errorf("%s:%d = %v, want %v", tt.host, tt.port, got, tt.want)
		}
	}
}

func TestNameRuleNeverMatchesIP(t *testing.T) {
	s := mustSet(t, []string{"*.0.0.1"}, nil)
	if got := decide(t, s, "127.0.0.1", 80); got != NoMatch {
		t.Errorf("127.0.0.1 = %v, want no-match", got)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		allow, deny []string
		want        string
	}{
		{allow: []string{"*"}, want: "too broad"},
		{allow: []string{"*.com"}, want: "too broad"},
		{allow: []string{"example.com"}, deny: []string{"*"}, want: "turns off every allowed domain"},
		{allow: []string{"https://example.com"}, want: "not a URL"},
		{allow: []string{"example.com:99999"}, want: "bad port"},
		{allow: []string{"exa mple.com"}, want: "not a URL"},
		{allow: []string{"a..b"}, want: "empty label"},
		{allow: []string{"[::1"}, want: "unclosed"},
		{allow: []string{"ex[a]mple.com"}, want: "not allowed"},
		{allow: []string{""}, want: "empty"},
	}
	for _, tt := range tests {
		var a, d []Entry
		for _, p := range tt.allow {
			a = append(a, Entry{p, "f.json:1:2"})
		}
		for _, p := range tt.deny {
			d = append(d, Entry{p, "f.json:1:2"})
		}
		_, err := Compile(a, d)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "f.json:1:2") {
			t.Errorf("Compile(%q, %q) = %v, want %q with origin", tt.allow, tt.deny, err, tt.want)
		}
	}
	// Deny * alone is fine: it just states strictness.
	if _, err := Compile(nil, []Entry{{"*", "x"}}); err != nil {
		t.Errorf("deny * alone: %v", err)
	}
}

func TestParseIP(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"127.0.0.1", "127.0.0.1"}, {"127.1", "127.0.0.1"}, {"127.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"}, {"0x7f000001", "127.0.0.1"}, {"017700000001", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"}, {"0177.0.0.01", "127.0.0.1"}, {"10.0.0.1.", "10.0.0.1"},
		{"::ffff:169.254.169.254", "169.254.169.254"}, {"[::1]", "::1"}, {"fe80::1%eth0", "fe80::1"},
		{"256.0.0.1", ""}, {"1.2.3.4.5", ""}, {"08.0.0.1", ""}, {"example.com", ""}, {"1.2.3.256", ""},
		{"4294967296", ""}, {"", ""}, {"1..2", ""},
	}
	for _, tt := range tests {
		a, ok := ParseIP(tt.in)
		got := ""
		if ok {
			got = a.String()
		}
		if got != tt.want {
			t.Errorf("ParseIP(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSpecial(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
		"224.0.0.1", "0.0.0.0", "::1", "fe80::1", "fc00::1", "fd00:ec2::254", "::ffff:10.0.0.1", "255.255.255.255"} {
		if Special(netip.MustParseAddr(a)) == "" {
			t.Errorf("%s counted public", a)
		}
	}
	for _, a := range []string{"93.184.216.34", "2606:4700::1111", "1.1.1.1"} {
		if why := Special(netip.MustParseAddr(a)); why != "" {
			t.Errorf("%s counted %s", a, why)
		}
	}
}

func TestAllowsAddressAndNamesHost(t *testing.T) {
	s := mustSet(t, []string{"127.0.0.1:8080", "localhost", "*.example.com"}, []string{"10.0.0.1"})
	if s.AllowsAddress(netip.MustParseAddr("127.0.0.1"), 8080) == nil {
		t.Error("127.0.0.1:8080 not allowed")
	}
	if s.AllowsAddress(netip.MustParseAddr("127.0.0.1"), 9090) != nil {
		t.Error("port restriction ignored")
	}
	if !s.NamesHost("localhost", 1) || s.NamesHost("x.example.com", 1) {
		t.Error("NamesHost wrong")
	}
}

func FuzzNormalizeHost(f *testing.F) {
	for _, s := range []string{"example.com", "EXAMPLE.com.", "bücher.example", "127.1", "0x7f.1", "[::1]", "a..b", "\x00", "xn--bcher-kva.example"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		h, err := NormalizeHost(in)
		if err != nil {
			return
		}
		// Normalising is idempotent, and the result never holds what could
		// change a URL's or a request line's structure.
		h2, err := NormalizeHost(h.String())
		if err != nil || h2 != h {
			t.Fatalf("NormalizeHost(%q) = %v, again %v, %v", in, h, h2, err)
		}
		if strings.ContainsAny(h.Name, "/:@?# \r\n\x00*") || strings.ToLower(h.Name) != h.Name {
			t.Fatalf("NormalizeHost(%q) = %q", in, h.Name)
		}
	})
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com:443", "[::1]:80", "127.0.0.1", "*", "a*b.c", "x:0"} {
		f.Add(s, "h.example.com", uint16(443))
	}
	f.Fuzz(func(t *testing.T, pattern, host string, port uint16) {
		r, err := ParseRule(pattern, "fuzz")
		if err != nil {
			return
		}
		if r.Host != "" && r.IP.IsValid() || r.Host == "" && !r.IP.IsValid() {
			t.Fatalf("rule %q: host %q ip %v", pattern, r.Host, r.IP)
		}
		h, err := NormalizeHost(host)
		if err != nil {
			return
		}
		s := &Set{Allow: []Rule{*r}}
		v := s.Decide(h, int(port))
		// A name never matches an IP rule and an IP never a name rule.
		if v.Decision == Allow && (r.IP.IsValid() != h.IP.IsValid()) {
			t.Fatalf("rule %q matched host %q across kinds", pattern, host)
		}
		// A wildcard rule never matches its own apex.
		if suffix, ok := strings.CutPrefix(r.Host, "*."); ok && h.Name == suffix && v.Decision == Allow {
			t.Fatalf("rule %q matched its apex %q", pattern, host)
		}
	})
}
