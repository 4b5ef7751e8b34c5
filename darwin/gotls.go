package darwin

import (
	"slices"
	"strings"

	"github.com/sbx-sandbox/sbx/creds"
)

// goTLSNote is the warning for a run whose proxy terminates TLS for the
// hosts bound credentials go to: on macOS, programs built with Go verify
// certificates with the system's verifier and ignore SSL_CERT_FILE, so
// they refuse the run's CA for those hosts (curl, Python, Node and git
// take the bundle sbx points them at). "" when nothing is terminated.
func goTLSNote(secrets []*creds.Secret) string {
	var hosts []string
	for _, s := range secrets {
		for _, h := range s.Hosts {
			if !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
	}
	if len(hosts) == 0 {
		return ""
	}
	slices.Sort(hosts)
	return "TLS to " + strings.Join(hosts, ", ") + " is terminated by sbx's proxy to inject credentials; programs built with Go (gh, terraform, kubectl …) ignore SSL_CERT_FILE on macOS and will refuse its certificate for those hosts"
}
