package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"sync"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/sbx-sandbox/sbx/netrules"
)

// CA is a per-run certificate authority for TLS termination. Its key lives
// only in memory.
type CA struct {
	Cert tls.Certificate
	// PEM is the CA certificate (no key), to be trusted inside the sandbox.
	PEM []byte
}

// NewCA makes a fresh ECDSA P-256 CA valid for one day.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "sbx per-run CA", Organization: []string{"sbx"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{
		Cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		PEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}, nil
}

// systemRoots are where distributions keep the trusted roots bundle.
var systemRoots = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem", "/etc/ssl/ca-bundle.pem"}

// Bundle returns the system roots followed by the CA, for tools that take
// one file of trusted certificates.
func (ca *CA) Bundle() []byte {
	for _, p := range systemRoots {
		if b, err := os.ReadFile(p); err == nil {
			return append(append(b, '\n'), ca.PEM...)
		}
	}
	return ca.PEM
}

// certCache keeps the leaf certificates signed for each host.
type certCache struct {
	mu sync.Mutex
	m  map[string]*tls.Certificate
}

// Fetch implements goproxy.CertStorage.
func (c *certCache) Fetch(host string, gen func() (*tls.Certificate, error)) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cert, ok := c.m[host]; ok {
		return cert, nil
	}
	cert, err := gen()
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = map[string]*tls.Certificate{}
	}
	c.m[host] = cert
	return cert, nil
}

// terminates reports whether TLS to host is terminated: only when a masked
// credential is bound to it.
func (s *Server) terminates(h netrules.Host, port int) bool {
	return s.CA != nil && len(s.boundTo(h, port)) > 0
}

func (s *Server) mitmAction() *goproxy.ConnectAction {
	return &goproxy.ConnectAction{Action: goproxy.ConnectMitm, TLSConfig: goproxy.TLSConfigFromCA(&s.CA.Cert)}
}
