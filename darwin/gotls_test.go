package darwin

import (
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/creds"
)

func TestGoTLSNote(t *testing.T) {
	if n := goTLSNote(nil); n != "" {
		t.Errorf("no binding: %q", n)
	}
	n := goTLSNote([]*creds.Secret{{Name: "A", Hosts: []string{"b.example.com", "a.example.com"}}, {Name: "B", Hosts: []string{"a.example.com"}}})
	if !strings.Contains(n, "TLS to a.example.com, b.example.com is terminated") || !strings.Contains(n, "Go") {
		t.Errorf("%q", n)
	}
}
