//go:build linux

package linux

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A run directory lives under StateDir/runs/<pid>-<starttime>-<random>. It
// holds what a later run needs to finish this one if it is killed:
//
//	record.json  sbx's pid and start time, the proxy's directory
//	tx.json      the transaction: writable roots and the policy (TxSpec)
//	helper.json  the transaction helper's pid, start time and clock
//	u/ w/ f/     the overlay upper and work directories, copies of files
//	journal      host temporaries a copying merge created
//	status       the command's exit status (a link's target), once bubblewrap exited
//	report.json  the merge's report, once it is complete
//	empty        an empty file for denyRead binds
const (
	recordFile  = "record.json"
	txFile      = "tx.json"
	helperFile  = "helper.json"
	journalFile = "journal"
	reportFile  = "report.json"
	statusFile  = "status"
	emptyFile   = "empty"
)

// record is written when the run directory is made.
type record struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
	// NetDir is the private directory of the proxy's socket.
	NetDir string `json:"netDir,omitempty"`
	// locks are the shared locks this sbx holds on the run directory and
	// the proxy's directory while it lives (holdLock).
	locks []*os.File
}

// release closes the record's locks.
func (r *record) release() {
	for _, f := range r.locks {
		f.Close()
	}
	r.locks = nil
}

// helperRecord is written by the transaction helper before it mounts
// anything; Clock is the time from which a host change is a conflict.
type helperRecord struct {
	PID   int           `json:"pid"`
	Start uint64        `json:"start"`
	Clock unix.Timespec `json:"clock"`
}

// procStart returns a process's start time in clock ticks since boot, which
// together with the pid identifies it.
func procStart(pid int) (uint64, error) {
	start, _, err := procStat(pid)
	return start, err
}

// procStat returns a process's start time and its state letter (R, S, Z …)
// from /proc/PID/stat.
func procStat(pid int) (start uint64, state byte, err error) {
	f, err := statFields(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	if len(f) < 20 {
		return 0, 0, errors.New("short /proc stat")
	}
	start, err = strconv.ParseUint(f[19], 10, 64) // field 22 overall
	return start, f[0][0], err
}

// statFields reads a /proc/PID[/task/TID]/stat file and returns its fields
// after the command name (the state first, then the parent's pid …). The
// name may hold spaces and parentheses: the split is after the last ')'.
func statFields(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("bad /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return nil, errors.New("short /proc stat")
	}
	return f, nil
}

// alive reports whether the process pid started at start still runs. A
// zombie does not: it has exited, and a parent that never reaps (a
// container whose PID 1 is not an init) would keep it so for good.
func alive(pid int, start uint64) bool {
	s, state, err := procStat(pid)
	return err == nil && s == start && state != 'Z' && state != 'X'
}

// writeJSON writes v to path whole or not at all (a temporary file renamed
// over it), so a kill in the middle never leaves half a record.
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// newRunDir creates this process's run directory. It is made, locked and
// recorded under runs.new, then renamed into runs: a clean-up never sees a
// run directory whose sbx has not yet taken its lock (one in another pid
// or time namespace, whose pid names no live process here, would be taken
// for a killed one).
func newRunDir(stateDir string) (string, *record, error) {
	pid := os.Getpid()
	start, err := procStart(pid)
	if err != nil {
		return "", nil, err
	}
	runs, staging := filepath.Join(stateDir, "runs"), filepath.Join(stateDir, stagingRuns)
	for _, d := range []string{runs, staging} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", nil, err
		}
	}
	made, err := os.MkdirTemp(staging, fmt.Sprintf("%d-%d-", pid, start))
	if err != nil {
		return "", nil, err
	}
	rec := &record{PID: pid, Start: start}
	dir := filepath.Join(runs, filepath.Base(made))
	err = os.WriteFile(filepath.Join(made, emptyFile), nil, 0o444)
	if err == nil {
		// On the empty file, which is never replaced: the directory's own
		// lock is the clean-ups' (one finishes a dead run at a time).
		rec.hold(filepath.Join(made, emptyFile))
		err = writeJSON(filepath.Join(made, recordFile), rec)
	}
	if err == nil {
		err = os.Rename(made, dir)
	}
	if err != nil {
		rec.release()
		os.RemoveAll(made)
		return "", nil, err
	}
	return dir, rec, nil
}

// stagingRuns is where run directories are made before they are complete
// (newRunDir); what a kill left there is removed by cleanStaging.
const stagingRuns = "runs.new"

// saver puts refused and conflicting versions aside, below the state
// directory (open as stateFD): <kind>/<run>/<host path>. The sandbox never
// sees the state directory.
type saver struct {
	stateFD  int
	stateDir string
	runID    string
}

// save moves (or, across file systems, copies) the upper entry name of up
// to the save directory kind, and returns where it went; "" if it could
// not be saved whole.
func (s *saver) save(m *merger, kind, path string, up int, name string) string {
	if s == nil || s.stateFD < 0 {
		return ""
	}
	rel := filepath.Join(kind, s.runID, strings.TrimPrefix(path, "/"))
	dirFD, err := mkdirAllAt(s.stateFD, filepath.Dir(rel))
	if err != nil {
		return ""
	}
	defer unix.Close(dirFD)
	base := filepath.Base(rel)
	for i := 0; i < 100; i++ {
		dst := base
		if i > 0 {
			dst = fmt.Sprintf("%s~%d", base, i)
		}
		var st unix.Stat_t
		if unix.Fstatat(dirFD, dst, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			continue // saved by an interrupted merge, or a clash
		}
		var err error = unix.EXDEV
		if !sharedFile(up, name) {
			err = unix.Renameat(up, name, dirFD, dst)
		}
		if errors.Is(err, unix.EXDEV) {
			if err = copyTreeAt(up, name, dirFD, dst); err == nil {
				removeTreeAt(up, name)
			} else {
				removeTreeAt(dirFD, dst) // no partial copy stays
			}
		}
		if err != nil {
			return ""
		}
		return filepath.Join(s.stateDir, filepath.Dir(rel), dst)
	}
	return ""
}

// sharedFile reports whether name is a regular file with other names (one
// the merge applied, a hard link of the command's): saved by rename, the
// evidence would change with every write to those names.
func sharedFile(dir int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1
}

// mkdirAllAt creates the directories of rel below dirFD, never following a
// symlink, and returns the last one open.
func mkdirAllAt(dirFD int, rel string) (int, error) {
	fd, err := unix.Dup(dirFD)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(filepath.Clean(rel), "/") {
		if c == "" || c == "." {
			continue
		}
		if err := unix.Mkdirat(fd, c, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return -1, err
		}
		next, err := openDirAt(fd, c)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// copyTreeAt copies a file, symlink or directory tree from (src, name) to
// (dst, dstName), keeping modes (fifos and devices are left out).
func copyTreeAt(src int, name string, dst int, dstName string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(src, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		t, err := readlinkat(src, name)
		if err != nil {
			return err
		}
		return unix.Symlinkat(t, dst, dstName)
	case unix.S_IFDIR:
		if err := unix.Mkdirat(dst, dstName, 0o700); err != nil {
			return err
		}
		sfd, err := openDirAt(src, name)
		if err != nil {
			return err
		}
		defer unix.Close(sfd)
		dfd, err := openDirAt(dst, dstName)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		names, err := readNames(sfd)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := copyTreeAt(sfd, n, dfd, n); err != nil {
				return err
			}
		}
		return unix.Fchmod(dfd, st.Mode&0o777|0o700)
	case unix.S_IFREG:
		in, err := unix.Openat(src, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		inf := os.NewFile(uintptr(in), name)
		defer inf.Close()
		out, err := unix.Openat(dst, dstName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		outf := os.NewFile(uintptr(out), dstName)
		err = copySparse(outf, inf)
		if err == nil {
			err = outf.Sync()
		}
		if cerr := outf.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			// Never leave a truncated copy that looks complete.
			_ = unix.Unlinkat(dst, dstName, 0)
		}
		return err
	}
	return nil
}

// removeTreeAt removes name below dirFD, recursively, never following a
// link.
func removeTreeAt(dirFD int, name string) {
	if unix.Unlinkat(dirFD, name, 0) == nil {
		return
	}
	fd, err := openDirAt(dirFD, name)
	if err != nil {
		return
	}
	_ = unix.Fchmod(fd, 0o700)
	names, _ := readNames(fd)
	for _, n := range names {
		removeTreeAt(fd, n)
	}
	unix.Close(fd)
	_ = unix.Unlinkat(dirFD, name, unix.AT_REMOVEDIR)
}

// tempNames hands out the names of host temporaries and writes each, before
// it exists, to the run's journal: a later clean-up removes what an
// interrupted merge left.
type tempNames struct {
	journal *os.File
	prefix  string
	n       int
}

func (t *tempNames) next(dir string) (string, error) {
	t.n++
	name := t.prefix + strconv.Itoa(t.n)
	if t.journal != nil {
		if _, err := t.journal.WriteString(filepath.Join(dir, name) + "\n"); err != nil {
			return "", fmt.Errorf("journal: %w", err)
		}
	}
	return name, nil
}

// removeJournaled removes the host temporaries a journal lists that still
// exist (never a directory).
func removeJournaled(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		p := sc.Text()
		if !filepath.IsAbs(p) || !strings.HasPrefix(filepath.Base(p), tempPrefix) {
			continue
		}
		if err := unix.Unlinkat(unix.AT_FDCWD, p, 0); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EISDIR) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return sc.Err()
}

// tempPrefix starts the names of a merge's host temporaries.
const tempPrefix = ".sbx-merge-"

// forceRemoveAll removes a run directory, making its directories writable
// on the way (an overlay's work directory is mode 0).
func forceRemoveAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.Chmod(dir, 0o700)
	return os.RemoveAll(dir)
}

// hold takes a shared lock on path for as long as the record's sbx lives
// (until release): whoever holds it is alive, in whatever pid or time
// namespace (where a pid and a start time read from another are not the
// same). Close-on-exec: no child holds it on sbx's behalf. One that
// cannot be taken leaves the pid and start time to tell.
func (r *record) hold(path string) {
	if f := holdLock(path); f != nil {
		r.locks = append(r.locks, f)
	}
}

// holdLock opens path and takes a shared lock on it (nil when it cannot).
func holdLock(path string) *os.File {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	if unix.Flock(fd, unix.LOCK_SH) != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), path)
}

// lockHeld reports whether a live process holds a lock on path (taken by
// holdLock or by a clean-up).
func lockHeld(path string) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	_ = unix.Flock(fd, unix.LOCK_UN)
	return false
}
