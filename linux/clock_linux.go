//go:build linux

package linux

import (
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// wholeSeconds reports whether a root is on a filesystem that stamps
// whole seconds (ext4 with 128-byte inodes; FAT keeps two): its change
// time, which no one can set, has no nanoseconds.
func wholeSeconds(roots []fsrules.Path) bool {
	for _, r := range roots {
		var st unix.Stat_t
		if unix.Stat(r.Path, &st) == nil && st.Ctim.Nsec == 0 {
			return true
		}
	}
	return false
}

// secondAfter is the conflict clock on a filesystem stamping whole
// seconds: the first even second after called. A change made before the
// call is stamped with a second before it, one made once the coarse clock
// has reached it with that second or a later one, two-second stamps
// included; the command waits up to two seconds for it.
func secondAfter(called unix.Timespec) unix.Timespec {
	return unix.Timespec{Sec: (called.Sec + 2) &^ 1}
}

// after reports whether a is later than b.
func after(a, b unix.Timespec) bool {
	return a.Sec > b.Sec || a.Sec == b.Sec && a.Nsec > b.Nsec
}

// fineStamp changes a new unnamed file in dir (O_TMPFILE: nothing is
// left in dir, its listing does not change) right after looking at it,
// and returns the change time, and whether that is ahead of the coarse
// clock: a fine-grained stamp, which only a filesystem with multigrain
// timestamps gives (ext4, xfs, btrfs, tmpfs on Linux 6.13 and later). The
// kernel then keeps every later stamp at or above it (the floor), on
// every filesystem that takes its stamps from the kernel's clock.
func fineStamp(dir string) (unix.Timespec, bool) {
	s, err := stampNew(dir)
	return s, err == nil && after(s, coarseNow())
}

// stampNew is the change time of a new unnamed file in dir, looked at
// and then changed.
func stampNew(dir string) (unix.Timespec, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return unix.Timespec{}, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return unix.Timespec{}, err
	}
	if _, err := unix.Write(fd, []byte{0}); err != nil {
		return unix.Timespec{}, err
	}
	err = unix.Fstat(fd, &st)
	return st.Ctim, err
}

// followsFloor judges one try: floor is a fine-grained stamp just taken,
// stamp the change time of a file changed right after on the filesystem
// tried, coarse the coarse clock and now the fine one, read after that.
// The try says something only while the coarse clock is still below the
// floor (a later tick could explain a later stamp); the filesystem then
// follows the floor when its stamp is at or above it and not ahead of
// now (a filesystem stamping with another machine's clock does not).
func followsFloor(floor, stamp, coarse, now unix.Timespec) (follows, conclusive bool) {
	if !after(floor, coarse) {
		return false, false
	}
	return !after(floor, stamp) && !after(stamp, now), true
}

// floorFilesystems remembers the filesystems (by device) seen to take
// their stamps from this kernel's clock with its floor: a filesystem
// that does keeps doing so. One not seen to is tried again at the next
// call.
type floorFilesystems struct {
	mu  sync.Mutex
	dev map[uint64]bool
}

// all reports whether every root is a directory on a filesystem that
// follows the floor, and returns those filesystems; state is a directory
// on a filesystem with multigrain timestamps, for the tries.
func (f *floorFilesystems) all(roots []fsrules.Path, state string) ([]uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var devs []uint64
	for _, r := range roots {
		var st unix.Stat_t
		if !r.Dir || unix.Stat(r.Path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return nil, false
		}
		if !f.dev[st.Dev] && !tryFloor(r.Path, state) {
			return nil, false
		}
		if f.dev == nil {
			f.dev = map[uint64]bool{}
		}
		f.dev[st.Dev] = true
		if !slices.Contains(devs, st.Dev) {
			devs = append(devs, st.Dev)
		}
	}
	return devs, len(devs) > 0
}

// tryFloor tries whether dir's filesystem follows the floor.
func tryFloor(dir, state string) bool {
	floor, ok := fineStamp(state)
	if !ok {
		return false
	}
	stamp, err := stampNew(dir)
	if err != nil {
		return false
	}
	coarse := coarseNow()
	var now unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &now)
	follows, _ := followsFloor(floor, stamp, coarse, now)
	return follows
}

// clockAfter is the conflict clock for a command that starts now, after a
// call that came at called (see [FileClock]): the coarse clock once it
// has passed called. A change the host made before the call has a ctime
// not after called, so it is older than that value; a change made after
// the clock was read has a ctime not before it, whatever its granularity
// (a coarse stamp is the coarse clock, a fine one is later). The wait is
// one tick at most when called is a FileClock value, longer when it is
// the fine clock (the coarse clock lags it by one to two ticks).
func clockAfter(called unix.Timespec) unix.Timespec {
	for {
		c := coarseNow()
		if c.Sec > called.Sec || c.Sec == called.Sec && c.Nsec > called.Nsec {
			return c
		}
		time.Sleep(250 * time.Microsecond)
	}
}

// FileClock returns a time no file change made so far has a later ctime
// than, usually well before now: the change time of a new unnamed file in
// dir (O_TMPFILE, nothing is left in dir). A file's ctime is the coarse
// clock (one tick behind), or, on filesystems with multigrain timestamps
// (Linux 6.13 and later) when the file was looked at since its last
// change, the fine clock; the kernel keeps every later stamp at or above
// the latest fine one (a global floor), which a new file's stamp shows.
// When dir cannot hold such a file, FileClock returns now, which is later
// than every stamp and only makes the next command wait for the coarse
// clock to pass it. The stamp is kept between the coarse clock and now (a
// filesystem whose stamps come from another machine's clock cannot make
// the wait longer, or let a change stamped in this tick pass for one made
// during the run). Every filesystem that takes its stamps from the
// kernel's clock shows the floor, multigrain or not; a dir on one that
// takes them from elsewhere (a network filesystem) does not: a change
// stamped finely on another filesystem in the tick before may then be
// taken for one made during the run (a conflict reported, the command's
// version saved aside; nothing lost).
func FileClock(dir string) time.Time {
	floor := coarseNow()
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return time.Now()
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	now := time.Now()
	c := time.Unix(st.Ctim.Unix())
	switch {
	case err != nil || c.After(now):
		return now
	case c.Before(time.Unix(floor.Unix())):
		return time.Unix(floor.Unix())
	}
	return c
}

// coarseNow is the clock file timestamps are taken from: a change made
// after it has a ctime not before it.
func coarseNow() unix.Timespec {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts)
	return ts
}
