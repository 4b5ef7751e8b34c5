//go:build linux

package linux

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseMountDevs(t *testing.T) {
	info := "22 1 0:21 / / rw,relatime - overlay overlay rw\n" +
		"35 22 8:1 /home /home ro - ext4 /dev/sda1 rw\n" +
		"bogus line\n" +
		"x 1 0:2 / /a rw - tmpfs t rw\n" +
		"40 22 259:1048575 / /big rw - xfs /dev/nvme0n1 rw\n"
	got := parseMountDevs(info)
	want := map[uint64]uint64{22: unix.Mkdev(0, 21), 35: unix.Mkdev(8, 1), 40: unix.Mkdev(259, 1048575)}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for id, dev := range want {
		if got[id] != dev {
			t.Errorf("mount %d: dev %#x, want %#x", id, got[id], dev)
		}
	}
}

// diagMsg builds a unix_diag_msg with the given attributes (type, payload).
func diagMsg(attrs ...[]byte) []byte {
	msg := make([]byte, diagMsgLen)
	for _, a := range attrs {
		msg = append(msg, a...)
	}
	return msg
}

func attr(typ uint16, payload []byte) []byte {
	b := make([]byte, 4, 4+len(payload)+3)
	binary.NativeEndian.PutUint16(b, uint16(4+len(payload)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func TestParseDiagVFS(t *testing.T) {
	vfs := make([]byte, 8)
	binary.NativeEndian.PutUint32(vfs, 4242)
	binary.NativeEndian.PutUint32(vfs[4:], 42<<20|7) // the kernel's dev_t: major 42, minor 7
	name := []byte("/tmp/x.sock\x00")
	tests := []struct {
		name string
		msg  []byte
		want vfsID
		ok   bool
	}{
		{"vfs only", diagMsg(attr(unixDiagVFS, vfs)), vfsID{ino: 4242, dev: unix.Mkdev(42, 7)}, true},
		{"after a name", diagMsg(attr(0, name), attr(unixDiagVFS, vfs)), vfsID{ino: 4242, dev: unix.Mkdev(42, 7)}, true},
		{"no vfs (abstract or unbound)", diagMsg(attr(0, name)), vfsID{}, false},
		{"short vfs", diagMsg(attr(unixDiagVFS, vfs[:4])), vfsID{}, false},
		{"truncated message", diagMsg()[:8], vfsID{}, false},
		{"attribute length past the end", append(diagMsg(), 0xff, 0, 1, 0), vfsID{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseDiagVFS(tt.msg)
			if ok != tt.ok || got != tt.want {
				t.Errorf("got %v %v, want %v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseDiagVFS(f *testing.F) {
	vfs := make([]byte, 8)
	f.Add(diagMsg(attr(unixDiagVFS, vfs)))
	f.Add(diagMsg(attr(0, []byte("abc")), attr(unixDiagVFS, vfs)))
	f.Fuzz(func(t *testing.T, msg []byte) {
		parseDiagVFS(msg) // must not panic or loop
	})
}

func FuzzParseMountDevs(f *testing.F) {
	f.Add("22 1 0:21 / / rw - overlay overlay rw\n35 22 8:1 /home /home ro - ext4 /dev/sda1 rw\n")
	f.Fuzz(func(t *testing.T, info string) {
		parseMountDevs(info)
	})
}
