package proxy

import (
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

// flakyListener fails its first accepts as a process out of descriptors
// does.
type flakyListener struct {
	net.Listener
	fails int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// The accept loop survives EMFILE, says so once, and a connection past
// MaxConns gets an answer naming the limit.
func TestServeSurvivesEMFILEAndAnswersOverLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []Event
	s := &Server{MaxConns: 1, Audit: func(e Event) { mu.Lock(); events = append(events, e); mu.Unlock() }}
	defer s.Close()
	go s.Serve(&flakyListener{Listener: ln, fails: 5})
	hold, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	time.Sleep(200 * time.Millisecond) // the held connection takes the one slot
	over, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	over.Write([]byte("GET http://example.test/ HTTP/1.1\r\nHost: example.test\r\n\r\n"))
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	reply, _ := io.ReadAll(over)
	if !strings.Contains(string(reply), "503") || !strings.Contains(string(reply), "more than 1 connections") {
		t.Errorf("over the limit: %q", reply)
	}
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, e := range events {
		if e.Decision == "error" && strings.Contains(e.Reason, "too many open files") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("EMFILE reported %d times, want once: %+v", n, events)
	}
}
