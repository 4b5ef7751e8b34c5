//go:build linux && !sbxinner

package linux

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// ownerNames are a live owner (this process) and a dead one (this pid
// with another start time).
func ownerNames(t *testing.T) (live, dead string) {
	t.Helper()
	start, err := procStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d-%d", os.Getpid(), start), fmt.Sprintf("%d-%d", os.Getpid(), start+1)
}

// A sweep takes a proxy directory for a dead run's only when its owner
// link names a dead sbx, or, without one, when it is old and nothing
// listens on its socket; never another user's, never a link or a file.
func TestDeadNetDirs(t *testing.T) {
	live, dead := ownerNames(t)
	tmp := t.TempDir()
	old := time.Now().Add(-2 * netDirGrace)
	young := map[string]bool{"deadowner": true, "young": true}
	mk := func(name, owner string) string {
		d := filepath.Join(tmp, "sbx-net-"+name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.Symlink(owner, filepath.Join(d, ownerLink)); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	listen := func(dir string, keep bool) {
		ln, err := net.Listen("unix", filepath.Join(dir, "proxy.sock"))
		if err != nil {
			t.Fatal(err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		if keep {
			t.Cleanup(func() { ln.Close() })
		} else {
			ln.Close() // the socket file stays, with no listener
		}
	}
	deadOwner := mk("deadowner", dead)
	// A dead owner by its pid, but locked: an sbx in another namespace.
	if f := holdLock(mk("lockedowner", dead)); f != nil {
		defer f.Close()
	} else {
		t.Fatal("no lock")
	}
	mk("liveowner", live)
	listen(mk("listening", ""), true)
	quiet := mk("quiet", "")
	listen(quiet, false)
	empty := mk("empty", "") // killed before its socket
	mk("young", "")
	mk("unreadable", "not-an-owner")
	if err := os.WriteFile(filepath.Join(tmp, "sbx-net-file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(deadOwner, filepath.Join(tmp, "sbx-net-link")); err != nil {
		t.Fatal(err)
	}
	// Not sbx's shape: kept whatever their age and owner.
	precious := mk("precious", "")
	if err := os.WriteFile(filepath.Join(precious, "precious"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(mk("wide", dead), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mk("ownerfile", ""), ownerLink), []byte(dead), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		other := mk("otheruser", dead)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	// The times last: making the sockets changed them.
	ents, _ := filepath.Glob(filepath.Join(tmp, "sbx-net-*"))
	for _, p := range ents {
		if !young[filepath.Base(p)[len("sbx-net-"):]] {
			os.Chtimes(p, old, old)
		}
	}
	got := deadNetDirs(tmp)
	want := []string{deadOwner, empty, quiet}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("dead proxy directories:\n got %v\nwant %v", got, want)
	}
	// A glob character in the temporary directory's name is a name.
	if got := deadNetDirs(tmp[:len(tmp)-1] + "?"); len(got) != 0 {
		t.Errorf("a pattern for the temporary directory matched %v", got)
	}
}

// Run cgroups ("sbx-PID-START-…") are taken for dead runs' by the sbx
// their name names, at any depth; other names are left alone.
func TestDeadCgroups(t *testing.T) {
	live, dead := ownerNames(t)
	root := t.TempDir()
	old := time.Now().Add(-2 * netDirGrace)
	var want []string
	for _, c := range []struct {
		path          string
		young, isDead bool
	}{
		{"sbx-" + dead + "-11", false, true},
		{"pids/user.slice/sbx/sbx-" + dead + "-22", false, true},
		{"sbx-" + dead + "-33", true, false}, // dead by its name, but new: another namespace's, set up now?
		{"sbx-" + live + "-44", false, false},
		{"sbx", false, false},
		{"sbx-other", false, false},
		{"sbx-1-1", false, false},
		{"sbx-" + dead + "-x", false, false},
		{"pids/sbx-" + live + "-55", false, false},
	} {
		p := filepath.Join(root, c.path)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if !c.young {
			os.Chtimes(p, old, old)
		}
		if c.isDead {
			want = append(want, p)
		}
	}
	got := deadCgroups(root)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("dead cgroups:\n got %v\nwant %v", got, want)
	}
}
