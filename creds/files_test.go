package creds

import (
	"encoding/base64"
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
		{".npmrc", "registry=https://npm.example/\n//npm.example/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789\n_authToken = \"plain-token-1\"\ncafile=/etc/ca.pem\n//x.example/path/:_password=cGFzcw==\nt=${NPM_TOKEN}\n",
			map[string]string{"npm_abcdefghijklmnopqrstuvwxyz0123456789": "npm.example:443", "plain-token-1": "", "cGFzcw==": "x.example:443"},
			[]string{"registry=https://npm.example/\n", "cafile=/etc/ca.pem\n", "t=${NPM_TOKEN}\n"}},
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
			if !strings.Contains(got, s.Placeholder) && tc.rel != ".docker/config.json" {
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
			if len(s.Value()) >= 4 && strings.Contains(string(m.Content), s.Value()) && !strings.Contains(s.Placeholder, s.Value()) {
				t.Errorf("%s: %q still holds %q:\n%s", rel, in, s.Value(), m.Content)
			}
		}
	})
}
