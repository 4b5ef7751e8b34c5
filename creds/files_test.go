package creds

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
)

func TestMaskFile(t *testing.T) {
	docker := `{"auths": {"https://registry.example/v1/": {"auth": "` + base64.StdEncoding.EncodeToString([]byte("me:s3cretpass")) + `"}, "r2.example": {"identitytoken": "idtok123456", "username": "me"}}, "credsStore": "desktop", "HttpHeaders": {"X-Token": "hdrsecret99"}}`
	for _, tc := range []struct {
		rel, in string
		secrets map[string]string // real value -> host
		keep    []string          // lines kept as they are
	}{
		// Unscoped credentials go to the file's registry=; _password and
		// _auth are base64 of the password, of user:password.
		{".npmrc", "registry=https://npm.example/\n//npm.example/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789\n_authToken = \"plain-token-1\"\ncafile=/etc/ca.pem\n//x.example/path/:_password=bnBtLXBhc3Mtc2VjcmV0LTk=\nt=${NPM_TOKEN}\n//y.example/:_auth=bWU6bnBtLWF1dGgtc2VjcmV0LTg=\n",
			map[string]string{"npm_abcdefghijklmnopqrstuvwxyz0123456789": "npm.example:443", "plain-token-1": "npm.example:443", "npm-pass-secret-9": "x.example:443", "npm-auth-secret-8": "y.example:443"},
			[]string{"registry=https://npm.example/\n", "cafile=/etc/ca.pem\n", "t=${NPM_TOKEN}\n"}},
		{".npmrc", "_authToken=no-registry-token-7\n", map[string]string{"no-registry-token-7": ""}, nil},
		// Keys as npm's ini parser reads them (quoted, arrays), a password in
		// a URL, and a section: its registry= is not the top-level one.
		{".npmrc", "\"//q.example/:_authToken\"=\"SECRET_QUOTED_2\"\n//a.example/:_authToken[]=SECRET_ARR_7\nregistry=http://user:pw-secret-5@r.example:8080/\n_authToken=unscoped-secret-6\n",
			map[string]string{"SECRET_QUOTED_2": "q.example:443", "SECRET_ARR_7": "a.example:443", "pw-secret-5": "r.example:8080", "unscoped-secret-6": "r.example:8080"}, nil},
		{".npmrc", "_authToken=X-unscoped-9\n[x]\nregistry=http://other.example/\n", map[string]string{"X-unscoped-9": ""}, []string{"[x]\n", "registry=http://other.example/\n"}},
		// What a second red team found npm reads and the masker did not: a
		// JSON escape in a quoted key, a lone CR ending a line, a byte-order
		// mark before a key, a token as a URL's user name.
		{".npmrc", "\"//d.example/:_auth\\u0054oken\"=SECRETD4\na=b\r//p.example/:_authToken=SECRETP16\n\ufeff//s.example/:_authToken=SECRETS19\nhttps-proxy=http://SECRETJ10@proxy.example:8080/\n",
			map[string]string{"SECRETD4": "d.example:443", "SECRETP16": "p.example:443", "SECRETS19": "s.example:443", "SECRETJ10": "proxy.example:8080"}, []string{"a=b\r"}},
		{".npmrc", "STRAY-TOKEN\n", map[string]string{}, []string{"\n"}},
		// Variants a red-team pass found in clear.
		{".npmrc", "#//old.example/:_authToken=STRAY-OLD\n//h.example:4873/:_AuthToken=tok-case-123\nkey=\"-----BEGIN PRIVATE KEY-----\\nabc\"\n_authToken=${HOME}tail-secret-1\n",
			map[string]string{"tok-case-123": "h.example:4873", "-----BEGIN PRIVATE KEY-----\\nabc": "", "${HOME}tail-secret-1": ""}, nil},
		{".pypirc", "[pypi]\nPassword = upper-secret-1\n[b]\nrepository: http://b.example:8080/\npassword: colon=secret=2\n# password = STRAY-COMMENT\n",
			map[string]string{"upper-secret-1": "", "colon=secret=2": "b.example:8080"}, nil},
		{".docker/config.json", `{"Auths": {"reg.example:5000": {"auth": "` + base64.StdEncoding.EncodeToString([]byte("notokcolon")) + `"}}, "httpHeaders": {"X-A": "hdr-secret-2"}, "proxies": {"default": {"httpProxy": "http://u:proxy-secret-3@proxy.example:3128"}}}`,
			map[string]string{base64.StdEncoding.EncodeToString([]byte("notokcolon")): "reg.example:5000", "hdr-secret-2": "", "proxy-secret-3": ""}, nil},
		{".netrc", "machine api.example login me password hunter22\nSTRAY-TOKEN\nmacdef init\ncd /x\n\ndefault login anon password anonpw\n",
			map[string]string{"hunter22": "api.example", "anonpw": ""}, []string{"machine api.example login me password ", "default login anon password "}},
		{".git-credentials", "https://me:ghp_abcdefghijklmnopqrstuvwxyz@git.example\nhttps://onlyuser@h.example\nSTRAY-TOKEN\n",
			map[string]string{"ghp_abcdefghijklmnopqrstuvwxyz": "git.example:443", "onlyuser": "h.example:443"}, []string{"https://"}},
		{".pypirc", "[distutils]\nindex-servers =\n    a\nSTRAY-TOKEN\n[a]\nrepository = https://up.example/legacy/\nusername = __token__\npassword = pypi-AgEIcHlwaS5vcmc\n",
			map[string]string{"pypi-AgEIcHlwaS5vcmc": "up.example:443"}, []string{"username = __token__\n", "index-servers =\n    a\n"}},
		{".docker/config.json", docker, map[string]string{"s3cretpass": "registry.example:443", "idtok123456": "r2.example:443", "hdrsecret99": ""}, []string{`"credsStore": "desktop"`, `"username": "me"`}},
		// git's credential store under XDG, podman's logins (docker's format).
		{".config/git/credentials", "https://me:ghp_abcdefghijklmnopqrstuvwxyz@git.example\n",
			map[string]string{"ghp_abcdefghijklmnopqrstuvwxyz": "git.example:443"}, []string{"https://"}},
		{".config/containers/auth.json", docker, map[string]string{"s3cretpass": "registry.example:443", "idtok123456": "r2.example:443", "hdrsecret99": ""}, []string{`"username": "me"`}},
	} {
		m, err := MaskFile(tc.rel, "/home/u/"+tc.rel, []byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.rel, err)
		}
		got := string(m.Content)
		if len(m.Secrets) != len(tc.secrets) {
			t.Errorf("%s: %d secrets, want %d:\n%s", tc.rel, len(m.Secrets), len(tc.secrets), got)
		}
		for _, s := range m.Secrets {
			host, ok := tc.secrets[s.Value()]
			if !ok || strings.Join(s.Hosts, ",") != host {
				t.Errorf("%s: secret %s bound to %v, want %q (known: %v)", tc.rel, s.Name, s.Hosts, host, ok)
			}
			if strings.Contains(got, s.Value()) {
				t.Errorf("%s: the real value is still in the file:\n%s", tc.rel, got)
			}
			if !strings.Contains(got, s.Placeholder) && !strings.Contains(got, base64.StdEncoding.EncodeToString([]byte(s.Placeholder))) &&
				!strings.Contains(got, base64.StdEncoding.EncodeToString([]byte("me:"+s.Placeholder))) && tc.rel != ".docker/config.json" {
				t.Errorf("%s: no placeholder for %s:\n%s", tc.rel, s.Name, got)
			}
		}
		if strings.Contains(got, "STRAY") || strings.Contains(got, "cd /x") {
			t.Errorf("%s: what is not the format was kept:\n%s", tc.rel, got)
		}
		for _, k := range tc.keep {
			if !strings.Contains(got, k) {
				t.Errorf("%s: lost %q:\n%s", tc.rel, k, got)
			}
		}
	}
	if _, err := MaskFile(".docker/config.json", "/x", []byte("{not json")); err == nil {
		t.Error("a broken docker config was masked")
	}
}

func FuzzMaskFile(f *testing.F) {
	f.Add(uint8(0), "//h.example/:_authToken=abc\n")
	f.Add(uint8(1), "machine h login u password p\n")
	f.Add(uint8(2), "https://u:p@h\n")
	f.Add(uint8(3), "[a]\nrepository=https://h/\npassword=p\n")
	f.Add(uint8(4), `{"auths":{"h":{"auth":"dTpw"}}}`)
	f.Fuzz(func(t *testing.T, which uint8, in string) {
		rel := MaskableFiles[int(which)%len(MaskableFiles)]
		m, err := MaskFile(rel, "/h/"+rel, []byte(in))
		if err != nil {
			return
		}
		for _, s := range m.Secrets {
			// A value that is also its host's name ("https://h@h") stays
			// in the host.
			inHost := slices.ContainsFunc(s.Hosts, func(h string) bool { return strings.Contains(h, s.Value()) })
			if len(s.Value()) >= 4 && strings.Contains(string(m.Content), s.Value()) && !strings.Contains(s.Placeholder, s.Value()) && !inHost {
				t.Errorf("%s: %q still holds %q:\n%s", rel, in, s.Value(), m.Content)
			}
		}
	})
}

// npm's base64 credentials leave neither the password nor its base64 in
// the file, and decode to the placeholder, as npm will decode them.
func TestMaskNpmBase64(t *testing.T) {
	pw := base64.StdEncoding.EncodeToString([]byte("npm-pass-secret-9"))
	auth := base64.StdEncoding.EncodeToString([]byte("me:npm-auth-secret-8"))
	m, err := MaskFile(".npmrc", "/h/.npmrc", []byte("//x.example/:_password="+pw+"\n//y.example/:_auth="+auth+"\n//z.example/:_password=not*base64\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := string(m.Content)
	for _, real := range []string{pw, auth, "npm-pass-secret-9", "npm-auth-secret-8", "not*base64"} {
		if strings.Contains(got, real) {
			t.Errorf("%q left in:\n%s", real, got)
		}
	}
	for i, prefix := range []string{"", "me:"} {
		line := strings.Split(got, "\n")[i]
		_, v, _ := strings.Cut(line, "=")
		dec, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if !slices.ContainsFunc(m.Secrets, func(s *Secret) bool { return string(dec) == prefix+s.Placeholder }) {
			t.Errorf("%s decodes to %q, not %q and a placeholder", line, dec, prefix)
		}
	}
}
