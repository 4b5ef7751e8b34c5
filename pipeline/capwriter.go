package pipeline

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Cap is sbx's one output cap: its writers together pass the first max
// bytes written to them and count the rest, which they drop while still
// reporting success, so a command never blocks on a full pipe.
type Cap struct {
	mu        sync.Mutex
	max, seen int64
}

// NewCap returns a cap of max bytes.
func NewCap(max int64) *Cap { return &Cap{max: max} }

// take counts n more bytes and returns how many of them pass.
func (c *Cap) take(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - c.seen
	c.seen += int64(n)
	return int(max(0, min(room, int64(n))))
}

// Dropped returns how many bytes were dropped so far.
func (c *Cap) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(0, c.seen-c.max)
}

// Writer returns w behind the cap.
func (c *Cap) Writer(w io.Writer) io.Writer { return capWriter{c, w} }

type capWriter struct {
	c *Cap
	w io.Writer
}

func (cw capWriter) Write(p []byte) (int, error) {
	if n := cw.c.take(len(p)); n > 0 {
		if _, err := cw.w.Write(p[:n]); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// CapBuffer keeps the first bytes written to it, up to its cap; it is safe
// for concurrent writers.
type CapBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	cap Cap
}

// NewCapBuffer returns a buffer that keeps at most max bytes.
func NewCapBuffer(max int) *CapBuffer { return &CapBuffer{cap: Cap{max: int64(max)}} }

func (b *CapBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p[:b.cap.take(len(p))])
	return len(p), nil
}

// Bytes returns what was kept.
func (b *CapBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// Dropped returns how many bytes were dropped.
func (b *CapBuffer) Dropped() int64 { return b.cap.Dropped() }

// HeadTail keeps the first and the last half of its size of what is
// written to it and counts what falls between: a command's summary and
// final error are at its end. It is safe for concurrent writers.
type HeadTail struct {
	mu      sync.Mutex
	half    int
	head    []byte
	tail    []byte // a ring once full
	pos     int    // where the ring's oldest byte is
	wrapped bool
	total   int64
}

// NewHeadTail returns a buffer that keeps at most size bytes.
func NewHeadTail(size int) *HeadTail { return &HeadTail{half: max(size/2, 1)} }

func (b *HeadTail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if room := b.half - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if room := b.half - len(b.tail); room > 0 && len(p) > 0 {
		k := min(room, len(p))
		b.tail = append(b.tail, p[:k]...)
		p = p[k:]
	}
	if len(p) >= b.half {
		copy(b.tail, p[len(p)-b.half:])
		b.pos, b.wrapped = 0, true
		return n, nil
	}
	for len(p) > 0 {
		k := copy(b.tail[b.pos:], p)
		b.pos = (b.pos + k) % b.half
		p = p[k:]
		b.wrapped = true
	}
	return n, nil
}

// Dropped returns how many bytes fell between the head and the tail.
func (b *HeadTail) Dropped() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.total-int64(len(b.head))-int64(len(b.tail)), 0)
}

// String is the head, a note of how many bytes were cut, and the tail.
func (b *HeadTail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	tail := b.tail
	if b.wrapped {
		tail = append(append([]byte(nil), b.tail[b.pos:]...), b.tail[:b.pos]...)
	}
	cut := b.total - int64(len(b.head)) - int64(len(tail))
	if cut <= 0 {
		return string(b.head) + string(tail)
	}
	return strings.ToValidUTF8(string(b.head), "\uFFFD") + fmt.Sprintf("\n\n... [sbx: %d bytes of output cut] ...\n\n", cut) + strings.ToValidUTF8(string(tail), "\uFFFD")
}
