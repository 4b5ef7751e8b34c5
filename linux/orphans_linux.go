//go:build linux && !sbxinner

package linux

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ownerLink names, in a proxy directory, the sbx that serves it: a link
// to "PID-START" (its pid and its start in clock ticks since boot).
const ownerLink = "owner"

// netDirGrace is how old a proxy directory without an owner link must be
// before a sweep takes it for a dead run's (one being made has none yet).
const netDirGrace = 10 * time.Minute

// markNetDir records in the proxy directory dir which sbx serves it, for
// a sweep that finds it when no run directory names it any more.
func markNetDir(dir string, rec *record) error {
	return os.Symlink(fmt.Sprintf("%d-%d", rec.PID, rec.Start), filepath.Join(dir, ownerLink))
}

// sweepOrphans removes what dead runs of this user left outside any state
// directory, where a run's own clean-up, its helper's, or the next run of
// the same state directory did not: proxy directories in the system's
// temporary directory and empty cgroups, of runs whose sbx is gone. They
// are left when a state directory is removed while a killed run's helper
// still finishes (the run directory named them), or by sbx versions that
// did not clean them.
func sweepOrphans(rep *CleanReport) {
	for _, d := range deadNetDirs(os.TempDir()) {
		if err := os.RemoveAll(d); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
			continue
		}
		rep.Orphans = append(rep.Orphans, d)
	}
	for _, d := range deadCgroups("/sys/fs/cgroup") {
		// rmdir takes only an empty cgroup: one whose processes still
		// exit stays for the next sweep.
		if err := os.Remove(d); err == nil {
			rep.Orphans = append(rep.Orphans, d)
		}
	}
}

// deadNetDirs lists the proxy directories in tmp that belong to this user
// and to no live sbx: by their owner link, or, without one, older than
// netDirGrace with no process listening on their proxy socket. Only a
// directory of mode 0700 that holds nothing but what sbx puts there is
// taken for one (tmp is read, not matched: a glob character in it is a
// name like any other).
func deadNetDirs(tmp string) []string {
	ents, _ := os.ReadDir(tmp)
	var listening map[vfsID]bool
	var out []string
	for _, e := range ents {
		d := filepath.Join(tmp, e.Name())
		if !strings.HasPrefix(e.Name(), "sbx-net-") || !proxyDirShape(d) || lockHeld(d) {
			continue // not sbx's, or its sbx lives (seen from any namespace)
		}
		if owner, err := os.Readlink(filepath.Join(d, ownerLink)); err == nil {
			if !ownerAlive(owner) {
				out = append(out, d)
			}
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(d, &st) != nil || time.Since(time.Unix(st.Mtim.Unix())) < netDirGrace {
			continue
		}
		if listening == nil {
			if listening = hostListeners(); listening == nil {
				continue // cannot tell: kept
			}
		}
		if !listening[socketID(filepath.Join(d, "proxy.sock"))] {
			out = append(out, d)
		}
	}
	return out
}

// proxyFiles are the names sbx puts in a proxy directory.
var proxyFiles = []string{"proxy.sock", "handoff.sock", ownerLink, "sbx-ca.pem", "sbx-bundle.pem"}

// proxyDirShape reports whether d is a directory (not a link) of this
// user's, mode 0700, holding nothing but proxyFiles: the owner as a link,
// the sockets as sockets.
func proxyDirShape(d string) bool {
	var st unix.Stat_t
	if unix.Lstat(d, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o7777 != 0o700 || int(st.Uid) != os.Getuid() {
		return false
	}
	ents, err := os.ReadDir(d)
	if err != nil {
		return false
	}
	for _, e := range ents {
		switch {
		case !slices.Contains(proxyFiles, e.Name()):
			return false
		case e.Name() == ownerLink && e.Type() != fs.ModeSymlink:
			return false
		case strings.HasSuffix(e.Name(), ".sock") && e.Type() != fs.ModeSocket:
			return false
		}
	}
	return true
}

// ownerAlive reports whether the sbx that an owner link or a run's name
// ("PID-START…") names lives; a name it cannot read is taken for live.
func ownerAlive(name string) bool {
	pid, start, ok := parseOwner(name)
	return !ok || alive(pid, start)
}

// parseOwner reads the pid and start time at the head of name
// ("PID-START" or "PID-START-…").
func parseOwner(name string) (pid int, start uint64, ok bool) {
	parts := strings.SplitN(name, "-", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(parts[0])
	start, err2 := strconv.ParseUint(parts[1], 10, 64)
	return pid, start, err1 == nil && err2 == nil
}

// hostListeners is the identities of the listening Unix sockets of this
// network namespace (nil when sock_diag fails).
func hostListeners() map[vfsID]bool {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	m, _ := dumpListeners(fd)
	return m
}

// socketID is the identity of the file at path ({} when there is none).
func socketID(path string) vfsID {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return vfsID{}
	}
	return vfsID{ino: st.Ino, dev: st.Dev}
}

// deadCgroups lists the run cgroups ("sbx-PID-START-N", at most 8 levels
// below root) whose sbx is gone, made at least netDirGrace ago: an sbx in
// another pid or time namespace has a pid and start that name no process
// here, and its cgroup is empty only while its run is set up.
func deadCgroups(root string) []string {
	var out []string
	pat := root
	for depth := 0; depth < 8; depth++ {
		m, _ := filepath.Glob(filepath.Join(pat, "sbx-*"))
		for _, d := range m {
			name := strings.TrimPrefix(filepath.Base(d), "sbx-")
			parts := strings.Split(name, "-")
			var st unix.Stat_t
			if len(parts) != 3 || !digits(parts[2]) || unix.Lstat(d, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR ||
				time.Since(time.Unix(st.Mtim.Unix())) < netDirGrace || ownerAlive(name) {
				continue
			}
			out = append(out, d)
		}
		pat += "/*"
	}
	return out
}

// digits reports whether s is a non-empty run of decimal digits.
func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
