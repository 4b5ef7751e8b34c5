package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sbx-sandbox/sbx/creds"
)

func TestInjectionForBoundHostOnly(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.URL.String()+"|"+r.Header.Get("Authorization")+"|"+r.Header.Get("X-Key")+"|"+string(body))
		mu.Unlock()
	}))
	defer be.Close()
	port := be.Listener.Addr().String()[strings.LastIndexByte(be.Listener.Addr().String(), ':')+1:]
	real := "realsecretvalue-0123456789"
	res, err := creds.MaskEnv([]string{"API_TOKEN=" + real}, creds.Config{Vars: map[string]creds.VarConfig{"API_TOKEN": {Hosts: []string{"api.example.test"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ph := res.Secrets[0].Placeholder
	h := newHarness(t, []string{"api.example.test", "other.example.test", "127.0.0.1"}, nil)
	h.srv.Secrets = res.Secrets
	c := h.client()

	send := func(host string, basic bool) *http.Response {
		req, _ := http.NewRequest("POST", fmt.Sprintf("http://%s:%s/p?k=%s", host, port, ph), bytes.NewReader([]byte(`{"token":"`+ph+`"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Key", ph)
		if basic {
			req.SetBasicAuth("user", ph)
		} else {
			req.Header.Set("Authorization", "Bearer "+ph)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, basic := range []bool{false, true} {
		if resp := send("api.example.test", basic); resp.StatusCode != 200 {
			t.Fatalf("bound host: %d", resp.StatusCode)
		}
	}
	mu.Lock()
	if len(seen) != 2 {
		t.Fatalf("backend saw %d requests", len(seen))
	}
	for _, s := range seen {
		if strings.Contains(s, ph) || strings.Count(s, real) < 3 {
			t.Errorf("bound host did not get the real value everywhere: %q", s)
		}
	}
	if !strings.Contains(seen[1], "Basic ") {
		t.Errorf("basic auth lost: %q", seen[1])
	}
	mu.Unlock()

	// The placeholder sent to another allowed host: refused, audited by name.
	resp := send("other.example.test", false)
	if resp.StatusCode != 403 || !strings.Contains(resp.Header.Get("X-Sbx-Error"), "API_TOKEN") {
		t.Errorf("exfiltration: %d %q", resp.StatusCode, resp.Header.Get("X-Sbx-Error"))
	}
	mu.Lock()
	if len(seen) != 2 {
		t.Errorf("the unbound host was reached")
	}
	mu.Unlock()
	ev := h.eventsFor("other.example.test")
	if len(ev) != 1 || ev[0].Decision != "deny" || !strings.Contains(ev[0].Reason, "API_TOKEN") {
		t.Errorf("audit: %+v", ev)
	}
	for _, e := range h.events {
		if strings.Contains(fmt.Sprint(e), real) {
			t.Errorf("audit event holds the real value: %+v", e)
		}
	}
}
