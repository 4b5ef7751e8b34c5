//go:build linux

package linux

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestCopySparse(t *testing.T) {
	dir := t.TempDir()
	src, err := os.Create(filepath.Join(dir, "src"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	src.Truncate(1 << 30)
	src.WriteAt([]byte("middle"), 512<<20)
	src.WriteAt([]byte("start"), 0)
	dst, _ := os.Create(filepath.Join(dir, "dst"))
	defer dst.Close()
	if err := copySparse(dst, src); err != nil {
		t.Fatal(err)
	}
	fi, _ := dst.Stat()
	if fi.Size() != 1<<30 {
		t.Errorf("size %d, want 1 GiB", fi.Size())
	}
	if blocks := fi.Sys().(*syscall.Stat_t).Blocks * 512; blocks > 16<<20 {
		t.Errorf("the copy takes %d bytes of disk for 11 bytes of data", blocks)
	}
	for _, at := range []struct {
		off  int64
		want string
	}{{0, "start"}, {512 << 20, "middle"}, {100 << 20, "\x00\x00\x00"}} {
		b := make([]byte, len(at.want))
		dst.ReadAt(b, at.off)
		if !bytes.Equal(b, []byte(at.want)) {
			t.Errorf("at %d: %q, want %q", at.off, b, at.want)
		}
	}
}
