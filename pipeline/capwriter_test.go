package pipeline

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestCap(t *testing.T) {
	tests := []struct {
		max     int64
		writes  []string
		kept    string
		dropped int64
	}{
		{10, []string{"hello"}, "hello", 0},
		{10, []string{"hello", "world"}, "helloworld", 0},
		{10, []string{"hello", "world!"}, "helloworld", 1},
		{4, []string{"ab", "cdef", "gh"}, "abcd", 4},
		{0, []string{"x"}, "", 1},
	}
	for _, tt := range tests {
		var a, b bytes.Buffer
		c := NewCap(tt.max)
		wa, wb := c.Writer(&a), c.Writer(&b)
		for i, w := range tt.writes {
			dst := wa
			if i%2 == 1 {
				dst = wb
			}
			if n, err := dst.Write([]byte(w)); n != len(w) || err != nil {
				t.Errorf("write %q = %d, %v; want all of it taken", w, n, err)
			}
		}
		if got := a.String() + b.String(); len(got) != len(tt.kept) || c.Dropped() != tt.dropped {
			t.Errorf("max %d, writes %q: kept %q, dropped %d; want %q, %d", tt.max, tt.writes, got, c.Dropped(), tt.kept, tt.dropped)
		}
	}
}

func TestCapBufferConcurrent(t *testing.T) {
	b := NewCapBuffer(1000)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("0123456789"))
			}
		}()
	}
	wg.Wait()
	if got := string(b.Bytes()); got != strings.Repeat("0123456789", 100) || b.Dropped() != 7000 {
		t.Errorf("kept %d bytes, dropped %d", len(got), b.Dropped())
	}
}

func TestHeadTail(t *testing.T) {
	tests := []struct {
		size   int
		writes []string
		want   string
	}{
		{10, []string{"abc"}, "abc"},
		{10, []string{"abcdefghij"}, "abcdefghij"},
		{10, []string{"abcde", "fghij", "klm"}, "abcde\n\n... [sbx: 3 bytes of output cut] ...\n\nijklm"},
		{10, []string{"abcdefghijklmnopqrstuvwxyz"}, "abcde\n\n... [sbx: 16 bytes of output cut] ...\n\nvwxyz"},
		{10, []string{"ab", "cd", "ef", "gh", "ij", "kl", "mn"}, "abcde\n\n... [sbx: 4 bytes of output cut] ...\n\njklmn"},
	}
	for _, tt := range tests {
		b := NewHeadTail(tt.size)
		for _, w := range tt.writes {
			b.Write([]byte(w))
		}
		if got := b.String(); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.writes, got, tt.want)
		}
	}
	// The last line of a long output survives (seq 1 100000).
	b := NewHeadTail(1000)
	for i := 1; i <= 100000; i++ {
		b.Write([]byte(strconv.Itoa(i) + "\n"))
	}
	if s := b.String(); !strings.HasSuffix(s, "99999\n100000\n") || !strings.HasPrefix(s, "1\n2\n") {
		t.Errorf("head or tail lost: %q … %q", s[:20], s[len(s)-20:])
	}
}
