//go:build linux

package linux

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// treeOps builds an upper layer (and the host it goes over) from a byte
// string: the same ops give the same trees, so two merges can be
// compared.
type treeOps struct {
	names []string
}

var newTreeNames = []string{"a", "b", "c", ".git", "HEAD", "config", "hooks", ".bashrc", ".vscode", "x.git", "commondir", "locked"}

func (o treeOps) build(t *testing.T, e *mergeEnv, ops []byte) {
	write(t, filepath.Join(e.host, "locked"), "locked")
	write(t, filepath.Join(e.host, "a/keep"), "keep")
	write(t, filepath.Join(e.host, ".git/HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(e.host, ".git/config"), "[core]\n")
	dir, last := e.upper, ""
	for i := 0; i+1 < len(ops); i += 2 {
		name := o.names[int(ops[i+1])%len(o.names)]
		p := filepath.Join(dir, name)
		switch ops[i] % 11 {
		case 0: // descend (a directory)
			if os.Mkdir(p, 0o755) == nil || isDir(p) {
				dir = p
			}
		case 1:
			content := "file " + name
			if name == "HEAD" {
				content = "ref: refs/heads/main\n"
			}
			if st, err := os.Lstat(p); err == nil && !st.Mode().IsRegular() {
				continue // a fifo would block the write
			}
			if os.WriteFile(p, []byte(content), 0o644) == nil {
				last = p
			}
		case 2:
			unix.Mknod(p, unix.S_IFCHR|0o600, 0)
		case 3:
			os.Symlink(e.outside, p)
		case 4:
			unix.Lsetxattr(dir, "user.overlay.opaque", []byte("y"), 0)
		case 5:
			unix.Lsetxattr(dir, "user.mine", []byte("1"), 0)
		case 6:
			if last != "" {
				unix.Lsetxattr(last, "user.overlay.origin", []byte("o"), 0)
			}
		case 7:
			modes := []uint32{0o4755, 0o666, 0o600, 0o2755}
			if last != "" {
				unix.Chmod(last, modes[int(ops[i+1])%len(modes)])
			}
		case 8:
			if last != "" {
				os.Link(last, p)
			}
		case 9:
			unix.Mkfifo(p, 0o644)
		case 10:
			modes := []uint32{0o777, 0o2755, 0o1777, 0o700}
			unix.Chmod(dir, modes[int(ops[i+1])%len(modes)])
			dir = e.upper
		}
	}
}

// mergedState is what a merge left, with the host's path taken out:
// every host and state entry with its type, mode and content, and the
// report.
func mergedState(e *mergeEnv, rep *MergeReport) string {
	var b strings.Builder
	for _, root := range []string{e.host, e.state} {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			var st unix.Stat_t
			unix.Lstat(p, &st)
			fmt.Fprintf(&b, "%s %o", p, st.Mode)
			if st.Mode&unix.S_IFMT == unix.S_IFREG {
				fmt.Fprintf(&b, " %q", content(p))
			}
			buf := make([]byte, 256)
			if n, _ := unix.Llistxattr(p, buf); n > 0 {
				fmt.Fprintf(&b, " xattrs %q", buf[:n])
			}
			b.WriteString("\n")
			return nil
		})
	}
	r := *rep
	var refused []string
	for _, x := range r.Refused {
		refused = append(refused, x.Path+" "+x.Rule+" "+x.Saved)
	}
	slices.Sort(refused)
	r.Refused = nil
	fmt.Fprintf(&b, "%+v\nrefused %q\n", r, refused)
	root := filepath.Dir(e.host)
	return strings.NewReplacer(e.host, "HOST", e.state, "STATE", root, "ROOT", root[1:], "ROOT").Replace(b.String())
}

// The one-rename placement of a new directory leaves what the
// entry-by-entry merge leaves, for any upper layer: the same host tree
// (types, modes, contents, no attribute), the same quarantine and the
// same report.
func FuzzMoveNewTreeMatchesEntryByEntry(f *testing.F) {
	// Pairs of (op, name): names index newTreeNames (0 a, 1 b, 2 c, 3 .git,
	// 4 HEAD, 7 .bashrc, 9 x.git, 10 commondir); each seed puts one thing
	// that needs more than a rename in a new directory b.
	for _, s := range [][]byte{
		{0, 1, 1, 0, 0, 2, 1, 2}, // movable, nested
		{0, 1, 1, 0, 6, 0},       // overlayfs's attribute on a file
		{0, 1, 1, 0, 7, 0},       // a set-user-ID file
		{0, 1, 1, 0, 7, 1},       // a world-writable file
		{0, 1, 1, 0, 8, 2},       // a second name
		{0, 1, 9, 2, 1, 0},       // a fifo
		{0, 1, 2, 0, 1, 2},       // a device (a whiteout)
		{0, 1, 5, 0, 1, 0},       // the command's attribute on the directory
		{0, 1, 4, 0, 1, 0},       // an opaque directory
		{0, 1, 1, 0, 10, 0},      // a world-writable directory
		{0, 1, 1, 0, 10, 1},      // a set-group-ID directory
		{0, 1, 1, 0, 10, 2},      // sticky and world-writable
		{0, 1, 0, 3, 1, 4},       // b/.git/HEAD
		{0, 1, 1, 4},             // b/HEAD: b is a repository
		{0, 1, 1, 4, 0, 6, 1, 0}, // b/HEAD and b/hooks/a: a hook
		{0, 1, 0, 8},             // b/.vscode, empty: protected
		{0, 1, 0, 3},             // b/.git, empty
		{0, 1, 1, 10},            // b/commondir
		{0, 9, 1, 0},             // x.git
		{0, 1, 1, 7},             // b/.bashrc: protected
		{0, 1, 0, 2, 0, 8, 1, 0}, // b/c/.vscode/a: protected, deep
		{0, 1, 3, 0},             // a link
		{0, 0, 0, 1, 1, 2},       // a new directory in an existing one
		{0, 1, 0, 2, 1, 7, 11, 0, 0, 1, 0, 0, 1, 1}, // a refused name beside a movable tree
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			return
		}
		var states [2]string
		for i, entryByEntry := range []bool{false, true} {
			e := newMergeEnv(t)
			treeOps{newTreeNames}.build(t, e, ops)
			pol := &fsrules.Policy{Home: "/nonexistent", DenyWrite: []fsrules.Path{{Path: filepath.Join(e.host, "locked"), Exists: true}}}
			// A start past every host stamp: no host entry changed
			// during the run, in either merge.
			start := unix.NsecToTimespec(time.Now().Add(time.Hour).UnixNano())
			rep := e.merge(pol, start, func(m *merger) { m.entryByEntry = entryByEntry })
			states[i] = mergedState(e, rep)
		}
		if states[0] != states[1] {
			t.Fatalf("one rename:\n%s\nentry by entry:\n%s", states[0], states[1])
		}
	})
}

// A new tree that is all movable arrives in one rename (the upper
// directory itself: the same inode), with the report's counts; beside it,
// a new tree holding a protected name is merged entry by entry, and its
// movable subdirectory moves in one piece.
func TestMoveNewTree(t *testing.T) {
	e := newMergeEnv(t)
	u := upperTree{t, e.upper}
	u.file("fresh/a", "a\n")
	u.file("fresh/deep/b", "bb\n")
	if err := os.Symlink("a", filepath.Join(e.upper, "fresh/l")); err != nil {
		t.Fatal(err)
	}
	u.file("mixed/ok/c", "ccc\n")
	u.file("mixed/.bashrc", "evil\n")
	ino := func(p string) uint64 {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	fresh, mixed, ok := ino(filepath.Join(e.upper, "fresh")), ino(filepath.Join(e.upper, "mixed")), ino(filepath.Join(e.upper, "mixed/ok"))
	rep := e.merge(&fsrules.Policy{Home: "/nonexistent"}, coarseNow(), nil)
	if ino(filepath.Join(e.host, "fresh")) != fresh || ino(filepath.Join(e.host, "mixed/ok")) != ok {
		t.Error("a movable new tree was not moved in one piece")
	}
	if ino(filepath.Join(e.host, "mixed")) == mixed {
		t.Error("a tree holding a protected name was moved in one piece")
	}
	assertContent(t, filepath.Join(e.host, "fresh/deep/b"), "bb\n")
	assertAbsent(t, filepath.Join(e.host, "mixed/.bashrc"))
	if len(rep.Refused) != 1 || rep.Files != 3 || rep.Bytes != 9 || rep.Applied != 8 {
		t.Errorf("report: %d refused, %d files, %d bytes, %d applied", len(rep.Refused), rep.Files, rep.Bytes, rep.Applied)
	}
}

func assertAbsent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("%s exists (%v)", p, err)
	}
}

// The two ways of listing an entry's attributes agree (listxattrat, and
// the path through /proc kernels before 6.13 use), on a long list too,
// and neither follows a link.
func TestListXattrsBothWays(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	write(t, p, "x")
	var want []string
	for i := range 40 {
		a := fmt.Sprintf("user.attribute-with-a-long-name-%02d", i)
		if err := unix.Setxattr(p, a, []byte("v"), 0); err != nil {
			t.Skipf("no user xattrs here: %v", err)
		}
		want = append(want, a)
	}
	os.Symlink("f", filepath.Join(dir, "l"))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, name := range []string{"f", "l"} {
		got, err := listXattrs(fd, name)
		if err != nil {
			t.Fatal(err)
		}
		viaProc, err := xattrNames(func(buf []byte) (int, error) { return unix.Llistxattr(fdEntry(fd, name), buf) })
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		slices.Sort(viaProc)
		if w := map[string][]string{"f": want, "l": nil}[name]; !slices.Equal(got, w) || !slices.Equal(viaProc, w) {
			t.Errorf("%s: listxattrat %q, /proc %q, want %q", name, got, viaProc, w)
		}
	}
}

// A tree moved in one rename is, entry by entry, as new on the host as
// one merged entry by entry: another run in the same workspace that began
// before this merge and changes or removes one of its files gets a
// conflict, not a silent overwrite (its entries kept the change time the
// command wrote them, before that run began).
func TestMovedTreeIsNewToAnEarlierRun(t *testing.T) {
	for _, other := range []string{"change", "remove"} {
		t.Run(other, func(t *testing.T) {
			e := newMergeEnv(t)
			u := upperTree{t, e.upper}
			u.file("same/deep/common", "A\n")
			time.Sleep(20 * time.Millisecond)
			startB := coarseNow() // the other run begins
			time.Sleep(20 * time.Millisecond)
			var st unix.Stat_t
			unix.Lstat(filepath.Join(e.upper, "same"), &st)
			ino := st.Ino
			e.merge(&fsrules.Policy{Home: "/nonexistent"}, coarseNow(), nil)
			if unix.Lstat(filepath.Join(e.host, "same"), &st); st.Ino != ino {
				t.Fatal("the tree was not moved in one piece")
			}
			if other == "change" {
				u.file("same/deep/common", "B\n")
			} else {
				u.whiteout("same")
			}
			rep := e.merge(&fsrules.Policy{Home: "/nonexistent"}, startB, nil)
			if len(rep.Conflicts) == 0 {
				t.Errorf("no conflict: %+v", rep)
			}
			assertContent(t, filepath.Join(e.host, "same/deep/common"), "A\n")
		})
	}
}
