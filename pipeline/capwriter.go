package pipeline

import (
	"bytes"
	"io"
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
