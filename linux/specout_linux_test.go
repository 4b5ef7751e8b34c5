package linux

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"
)

// TestSpecOutSendNeverBlocks: the command is handed over without waiting
// for the init to read, whether the policy is still in the pipe (a cold
// run) or the command is larger than the pipe; the init then reads the
// policy, the command and EOF, in that order.
func TestSpecOutSendNeverBlocks(t *testing.T) {
	big := func(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }
	cases := []struct {
		name         string
		policy, call []byte
	}{
		{"policy larger than the pipe", big(300<<10, 'p'), []byte("call")},
		{"command larger than the pipe", []byte("policy"), big(300<<10, 'c')},
		{"both larger", big(200<<10, 'p'), big(200<<10, 'c')},
		{"no command", big(200<<10, 'p'), nil},
		{"small", []byte("policy"), []byte("call")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			o := sendPolicy(w, tc.policy)
			if len(tc.policy) < 4096 {
				// Let the policy's write end, so send takes its own path.
				time.Sleep(10 * time.Millisecond)
			}
			returned := make(chan struct{})
			go func() {
				o.send(tc.call)
				close(returned)
			}()
			select {
			case <-returned:
			case <-time.After(10 * time.Second):
				t.Fatal("send waited for the reader")
			}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			want := append(append([]byte{}, tc.policy...), tc.call...)
			if !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes, want %d (policy then command)", len(got), len(want))
			}
		})
	}
}
