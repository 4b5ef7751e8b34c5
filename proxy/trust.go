package proxy

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sbx-sandbox/sbx/creds"
)

// Trust is what a run needs so its commands accept the proxy's terminated
// TLS: the per-run CA (its key stays in memory) and, on disk, its
// certificate and a bundle of the system roots plus it.
type Trust struct {
	CA                 *CA
	CAFile, BundleFile string
}

// NewTrust makes the per-run CA when a masked credential is bound to a host
// (TLS is terminated only then) and writes its certificate and bundle into
// dir, which must be private to the run. It returns nil, nil when no
// credential is bound: the proxy then never terminates TLS.
func NewTrust(dir string, secrets []*creds.Secret) (*Trust, error) {
	bound := false
	for _, s := range secrets {
		bound = bound || s.Placeholder != "" && len(s.Hosts) > 0
	}
	if !bound {
		return nil, nil
	}
	ca, err := NewCA()
	if err != nil {
		return nil, fmt.Errorf("per-run CA: %w", err)
	}
	t := &Trust{CA: ca, CAFile: filepath.Join(dir, "sbx-ca.pem"), BundleFile: filepath.Join(dir, "sbx-bundle.pem")}
	if err := os.WriteFile(t.CAFile, ca.PEM, 0o644); err != nil {
		return nil, fmt.Errorf("per-run CA: %w", err)
	}
	if err := os.WriteFile(t.BundleFile, ca.Bundle(), 0o644); err != nil {
		return nil, fmt.Errorf("per-run CA bundle: %w", err)
	}
	return t, nil
}

// Env returns env with every trust variable pointing at the bundle (see
// [TrustEnv]); a nil Trust leaves env as it is.
func (t *Trust) Env(env []string) []string {
	if t == nil {
		return env
	}
	return TrustEnv(env, t.CAFile, t.BundleFile)
}

// Files returns the two files, for a backend that binds them into the
// sandbox; none for a nil Trust.
func (t *Trust) Files() []string {
	if t == nil {
		return nil
	}
	return []string{t.CAFile, t.BundleFile}
}
