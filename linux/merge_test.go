//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// upperTree builds an upper layer the way overlayfs leaves one.
type upperTree struct {
	t   *testing.T
	dir string
}

func (u upperTree) file(rel, content string) {
	u.t.Helper()
	p := filepath.Join(u.dir, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		u.t.Fatal(err)
	}
}

func (u upperTree) whiteout(rel string) {
	u.t.Helper()
	p := filepath.Join(u.dir, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := unix.Mknod(p, unix.S_IFCHR|0o600, 0); err != nil {
		u.t.Skipf("cannot make a whiteout (0/0 character device) here: %v", err)
	}
}

func (u upperTree) opaqueDir(rel string) {
	u.t.Helper()
	p := filepath.Join(u.dir, rel)
	os.MkdirAll(p, 0o755)
	if err := unix.Setxattr(p, "user.overlay.opaque", []byte("y"), 0); err != nil {
		u.t.Skipf("no user xattrs here: %v", err)
	}
}

func write(t *testing.T, p, content string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func content(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestMergeHostileUpper feeds the merge an upper layer a command could
// have shaped at will, and checks it never writes outside the host
// directory, never touches a kept path, and keeps what changed on the
// host during the run.
func TestMergeHostileUpper(t *testing.T) {
	root := t.TempDir()
	host, upper, outside, state := filepath.Join(root, "host"), filepath.Join(root, "upper"), filepath.Join(root, "outside"), filepath.Join(root, "state")
	for _, d := range []string{host, upper, outside, state} {
		os.Mkdir(d, 0o755)
	}
	write(t, filepath.Join(outside, "secret"), "outside\n")
	write(t, filepath.Join(host, ".bashrc"), "protected\n")
	write(t, filepath.Join(host, "locked/f"), "locked\n")
	write(t, filepath.Join(host, "git/config"), "config\n")
	write(t, filepath.Join(host, "olddir/keep"), "old\n")
	write(t, filepath.Join(host, "racy.txt"), "before\n")
	write(t, filepath.Join(host, "racydel.txt"), "before\n")
	write(t, filepath.Join(host, "deltree/a"), "a\n")
	write(t, filepath.Join(host, "deltree/racy"), "before\n")
	if err := os.Symlink(outside, filepath.Join(host, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(host, "link2")); err != nil {
		t.Fatal(err)
	}
	// Coarse clocks tick every few ms: leave a gap before the run starts.
	time.Sleep(20 * time.Millisecond)
	start := coarseNow()
	time.Sleep(20 * time.Millisecond)
	// Changed on the host during the run.
	write(t, filepath.Join(host, "racy.txt"), "host\n")
	write(t, filepath.Join(host, "racydel.txt"), "host\n")
	write(t, filepath.Join(host, "deltree/racy"), "host\n")

	u := upperTree{t, upper}
	u.file(".bashrc", "evil\n")             // a kept path
	u.whiteout("locked")                    // a kept directory
	u.file("link/secret", "through link\n") // a plain (non-opaque) dir over a symlink
	u.opaqueDir("link2")
	u.file("link2/secret", "through link2\n")
	u.opaqueDir("olddir")
	u.file("olddir/new", "new\n")
	u.file("racy.txt", "sandbox\n")
	u.whiteout("racydel.txt")
	u.whiteout("deltree")
	u.file("fresh/deep/f", "fresh\n")
	u.file("git/index", "new index\n") // a directory holding a kept path
	u.file("suid", "#!/bin/sh\n")
	if err := unix.Chmod(filepath.Join(upper, "suid"), 0o6755); err != nil {
		t.Fatal(err)
	}

	hostFD, err := unix.Open(host, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(hostFD)
	stateFD, err := unix.Open(state, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(stateFD)
	m := &merger{start: start, keep: []string{filepath.Join(host, ".bashrc"), filepath.Join(host, "locked/f"), filepath.Join(host, "git/config")},
		asideFD: stateFD, asideRel: "conflicts/run", asideBase: state}
	defer m.close()
	m.dir(upper, hostFD, host, false)

	checks := []struct{ path, want string }{
		{filepath.Join(outside, "secret"), "outside\n"},
		{filepath.Join(host, ".bashrc"), "protected\n"},
		{filepath.Join(host, "locked/f"), "locked\n"},
		{filepath.Join(host, "link/secret"), "through link\n"},
		{filepath.Join(host, "link2/secret"), "through link2\n"},
		{filepath.Join(host, "olddir/new"), "new\n"},
		{filepath.Join(host, "racy.txt"), "host\n"},
		{filepath.Join(host, "racydel.txt"), "host\n"},
		{filepath.Join(host, "deltree/racy"), "host\n"},
		{filepath.Join(host, "fresh/deep/f"), "fresh\n"},
		{filepath.Join(host, "git/index"), "new index\n"},
		{filepath.Join(host, "git/config"), "config\n"},
		{filepath.Join(state, "conflicts/run", host, "racy.txt"), "sandbox\n"},
	}
	for _, c := range checks {
		if got := content(c.path); got != c.want {
			t.Errorf("%s: %q, want %q", c.path, got, c.want)
		}
	}
	for _, gone := range []string{"olddir/keep", "deltree/a"} {
		if _, err := os.Lstat(filepath.Join(host, gone)); !os.IsNotExist(err) {
			t.Errorf("%s should be gone: %v", gone, err)
		}
	}
	var sst unix.Stat_t
	if err := unix.Stat(filepath.Join(host, "suid"), &sst); err != nil || sst.Mode&0o7777 != 0o755 {
		t.Errorf("suid merged with mode %o (%v), want 755", sst.Mode&0o7777, err)
	}
	if st, err := os.Lstat(filepath.Join(host, "link")); err != nil || !st.IsDir() {
		t.Errorf("link should be a real directory now: %v %v", st, err)
	}
	var conflicts []string
	for _, c := range m.rep.Conflicts {
		conflicts = append(conflicts, strings.TrimPrefix(c.Path, host+"/"))
	}
	slices.Sort(conflicts)
	if want := []string{"deltree/racy", "racy.txt", "racydel.txt"}; !slices.Equal(conflicts, want) {
		t.Errorf("conflicts %q, want %q", conflicts, want)
	}
	if len(m.rep.Skipped) != 2 {
		t.Errorf("skipped %q, want the two kept paths", m.rep.Skipped)
	}
	if len(m.rep.Errors) > 0 {
		t.Errorf("errors: %q", m.rep.Errors)
	}
}
