//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// The conflict clock of a command starting right after a call: a change
// made before the call (finely stamped: looked at, then changed again) is
// older than it, and a change made after it is not, on the clock that
// applies to the change's filesystem.
func TestConflictClockSeparatesBeforeAndAfter(t *testing.T) {
	dir := t.TempDir()
	e := &Executor{StateDir: t.TempDir()}
	roots := []fsrules.Path{{Path: dir, Exists: true, Dir: true}}
	p := filepath.Join(dir, "f")
	fine := 0
	for i := 0; i < 50; i++ {
		write(t, p, "a")
		os.Stat(p)
		write(t, p, "b")
		var before unix.Stat_t
		if err := unix.Stat(p, &before); err != nil {
			t.Fatal(err)
		}
		called := unix.NsecToTimespec(FileClock(e.StateDir).UnixNano())
		st := e.conflictClock(called, roots)
		write(t, p, "c")
		var later unix.Stat_t
		if err := unix.Stat(p, &later); err != nil {
			t.Fatal(err)
		}
		m := &merger{start: *st.Clock}
		if st.Fine != nil {
			fine++
			m.fine, m.fineDevs = *st.Fine, st.FineDevs
			if !slices.Contains(st.FineDevs, later.Dev) {
				t.Fatalf("the root's filesystem %d is not among %v", later.Dev, st.FineDevs)
			}
		}
		if m.changedDuringRun(&before) {
			t.Fatalf("run %d: a change before the call (ctime %v) is taken for one during the run (clock %v, fine %v)", i, before.Ctim, st.Clock, st.Fine)
		}
		if !m.changedDuringRun(&later) {
			t.Fatalf("run %d: a change after the start (ctime %v) is taken for one before it (clock %v, fine %v)", i, later.Ctim, st.Clock, st.Fine)
		}
	}
	t.Logf("%d of 50 starts took a fine-grained stamp instead of waiting for the coarse clock", fine)
}

// A filesystem mounted in a root (a ramfs: no multigrain timestamps of
// its own) follows the kernel's floor too: a change on it after the start
// is a change during the run whichever clock judges it.
func TestConflictClockSubmount(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "mnt")
	os.Mkdir(sub, 0o755)
	mountOrSkip(t, "ramfs", sub)
	e := &Executor{StateDir: t.TempDir()}
	p := filepath.Join(sub, "f")
	for i := 0; i < 50; i++ {
		called := unix.NsecToTimespec(FileClock(e.StateDir).UnixNano())
		st := e.conflictClock(called, []fsrules.Path{{Path: dir, Exists: true, Dir: true}})
		write(t, p, "c")
		var later unix.Stat_t
		unix.Stat(p, &later)
		m := &merger{start: *st.Clock}
		if st.Fine != nil {
			m.fine, m.fineDevs = *st.Fine, st.FineDevs
		}
		if !m.changedDuringRun(&later) {
			t.Fatalf("run %d: a change on the ramfs after the start (ctime %v) is taken for one before it (clock %v, fine %v)", i, later.Ctim, st.Clock, st.Fine)
		}
	}
}

// followsFloor: only a try made while the coarse clock is below the floor
// says anything; a stamp below the floor, or ahead of now (another
// machine's clock), does not follow it.
func TestFollowsFloor(t *testing.T) {
	ts := func(ns int64) unix.Timespec { return unix.NsecToTimespec(ns) }
	tests := []struct {
		name                      string
		floor, stamp, coarse, now int64
		follows, conclusive       bool
	}{
		{"at the floor", 1000, 1000, 900, 1100, true, true},
		{"above the floor", 1000, 1050, 900, 1100, true, true},
		{"coarse stamp below the floor", 1000, 900, 900, 1100, false, true},
		{"a remote clock ahead of now", 1000, 5000, 900, 1100, false, true},
		{"the coarse clock passed the floor", 1000, 1004, 1004, 1100, false, false},
	}
	for _, tt := range tests {
		f, c := followsFloor(ts(tt.floor), ts(tt.stamp), ts(tt.coarse), ts(tt.now))
		if f != tt.follows || c != tt.conclusive {
			t.Errorf("%s: follows %v conclusive %v", tt.name, f, c)
		}
	}
}

// The merge judges a host entry by the fine clock only on the
// filesystems it was given for; on any other, by the coarse one; each as
// precisely as the entry's stamp.
func TestChangedDuringRunByFilesystem(t *testing.T) {
	ts := func(ns int64) unix.Timespec { return unix.NsecToTimespec(ns) }
	m := &merger{start: ts(987), fine: ts(3000), fineDevs: []uint64{7}}
	tests := []struct {
		dev     uint64
		ctime   int64
		changed bool
	}{
		{7, 2000, false}, {7, 3000, true}, {7, 999, false}, {7, 2999, false},
		{8, 2000, true}, {8, 1000, true}, {8, 986, false}, {8, 987, true},
		// Stamps of 100 ns precision: the start's 100 ns, and before.
		{8, 900, true}, {8, 800, false},
	}
	for _, tt := range tests {
		st := &unix.Stat_t{Dev: tt.dev, Ctim: ts(tt.ctime)}
		if got := m.changedDuringRun(st); got != tt.changed {
			t.Errorf("device %d, ctime %d: changed %v", tt.dev, tt.ctime, got)
		}
	}
}

// A filesystem that keeps whole seconds stamps a change made after the
// start, in the same second, with a time before it: the start is
// truncated as the stamp is.
func TestChangedDuringRunCoarseStamps(t *testing.T) {
	start := unix.Timespec{Sec: 1001, Nsec: 700_000_000}
	m := &merger{start: start}
	tests := []struct {
		ctime   unix.Timespec
		changed bool
	}{
		{unix.Timespec{Sec: 1001}, true},                     // 1 s stamps, same second
		{unix.Timespec{Sec: 1000}, true},                     // 2 s stamps (FAT) of the same two seconds
		{unix.Timespec{Sec: 999}, false},                     // before
		{unix.Timespec{Sec: 1001, Nsec: 600_000_000}, false}, // 100 ms stamps, before
		{unix.Timespec{Sec: 1001, Nsec: 700_000_000}, true},
		{unix.Timespec{Sec: 1001, Nsec: 700_000_001}, true},
		{unix.Timespec{Sec: 1001, Nsec: 699_999_999}, false},
	}
	for _, tt := range tests {
		if got := m.changedDuringRun(&unix.Stat_t{Ctim: tt.ctime}); got != tt.changed {
			t.Errorf("ctime %v, start %v: changed %v", tt.ctime, start, got)
		}
	}
}

// mountsBelow names the mount points inside a directory, as mountinfo
// writes them (a space is \040).
func TestMountsBelow(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/x\134y`: `/x\y`, `/plain`: "/plain", `/end\04`: `/end\04`} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescape %q = %q, want %q", in, got, want)
		}
	}
	dir := t.TempDir()
	sub := filepath.Join(dir, "a b")
	os.Mkdir(sub, 0o755)
	mountOrSkip(t, "tmpfs", sub)
	if got := mountsBelow(dir); !slices.Equal(got, []string{sub}) {
		t.Errorf("mounts below %s: %q", dir, got)
	}
	if got := mountsBelow(sub); len(got) != 0 {
		t.Errorf("mounts below %s: %q", sub, got)
	}
}

// mountOrSkip mounts a filesystem of type fs at dir until the test ends;
// where that cannot be done it skips, or, in CI, fails.
func mountOrSkip(t *testing.T, fs, dir string) {
	t.Helper()
	if err := unix.Mount(fs, dir, fs, 0, ""); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot mount a %s: %v", fs, err)
		}
		t.Skipf("cannot mount a %s: %v", fs, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
}

// On a filesystem stamping whole (or two) seconds, the clock is the next
// even second: a change stamped in the call's second is before it, one
// stamped at or after it is during the run, as the merge judges them.
func TestSecondAfter(t *testing.T) {
	for _, called := range []unix.Timespec{{Sec: 10, Nsec: 300}, {Sec: 11, Nsec: 999_999_999}, {Sec: 10}} {
		start := secondAfter(called)
		if start.Nsec != 0 || start.Sec%2 != 0 || !after(start, called) || start.Sec > called.Sec+2 {
			t.Fatalf("secondAfter(%v) = %v", called, start)
		}
		m := &merger{start: start}
		for _, before := range []int64{called.Sec, called.Sec &^ 1} {
			if m.changedDuringRun(&unix.Stat_t{Ctim: unix.Timespec{Sec: before}}) {
				t.Errorf("called %v: a change stamped %d (before the call) is taken for one during the run", called, before)
			}
		}
		for _, during := range []int64{start.Sec, start.Sec + 1} {
			if !m.changedDuringRun(&unix.Stat_t{Ctim: unix.Timespec{Sec: during}}) {
				t.Errorf("called %v: a change stamped %d (during the run) is taken for one before it", called, during)
			}
		}
	}
}
