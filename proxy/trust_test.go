package proxy

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/creds"
)

func TestNewTrust(t *testing.T) {
	dir := t.TempDir()
	tr, err := NewTrust(dir, []*creds.Secret{{Name: "A", Placeholder: ""}})
	if err != nil || tr != nil {
		t.Fatalf("no bound credential: %v, %v; want no CA", tr, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files written without a CA: %v", ents)
	}
	tr, err = NewTrust(dir, []*creds.Secret{{Name: "B", Placeholder: "sbx_ph", Hosts: []string{"api.example.test"}}})
	if err != nil || tr == nil {
		t.Fatalf("bound credential: %v, %v", tr, err)
	}
	data, err := os.ReadFile(tr.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(data)
	if blk == nil {
		t.Fatalf("CA file is not PEM: %q", data)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil || !cert.IsCA {
		t.Fatalf("CA file: %v %v", cert, err)
	}
	if strings.Contains(string(data), "PRIVATE KEY") {
		t.Error("the CA key was written to disk")
	}
	if b, _ := os.ReadFile(tr.BundleFile); !strings.Contains(string(b), string(data)) {
		t.Error("the bundle lacks the CA")
	}
	env := tr.Env([]string{"PATH=/bin", "AWS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt", "npm_config_cafile=/etc/npm-ca.pem"})
	for _, want := range []string{"SSL_CERT_FILE=" + tr.BundleFile, "AWS_CA_BUNDLE=" + tr.BundleFile, "npm_config_cafile=" + tr.BundleFile, "NODE_EXTRA_CA_CERTS=" + tr.CAFile} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s: %q", want, env)
		}
	}
	for _, old := range []string{"AWS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt", "npm_config_cafile=/etc/npm-ca.pem"} {
		if slices.Contains(env, old) {
			t.Errorf("the inherited %s is kept", old)
		}
	}
	if _, err := NewTrust("/nonexistent/dir", []*creds.Secret{{Placeholder: "x", Hosts: []string{"h"}}}); err == nil {
		t.Error("an unwritable directory is not an error")
	}
}
