//go:build linux

package linux

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// merger applies a run's overlay upper directories (as the kernel leaves
// them with the userxattr option: whiteouts are 0/0 character devices,
// opaque directories carry user.overlay.opaque=y) to the host, checking
// every change against the policy.
//
// It works on the run's final tree, so how an entry got there (renames of
// ancestors, links, races inside the sandbox) does not matter. Every
// operation, on the upper layer and on the host, is relative to a directory
// descriptor opened without following symbolic links, so no path is ever
// longer than one name and no link can lead the merge anywhere.
//
// Applied entries leave the upper layer (moved by rename when it is on the
// host's file system, else copied and removed), so a merge interrupted at
// any point is completed by running it again: nothing is applied twice.
type merger struct {
	pol *fsrules.Policy
	// start is the coarse real time at which the run began: a host entry
	// whose ctime is not before it changed during the run.
	start unix.Timespec
	// fine takes start's place for host entries on the filesystems
	// fineDevs names (see [TxStart]).
	fine     unix.Timespec
	fineDevs []uint64
	// discard lists what would change and applies nothing.
	discard bool
	// saves are where refused and conflicting versions are put aside.
	saves *saver
	// tmp names the host temporaries of copies (see [merger.tempName]).
	tmp *tempNames
	rep MergeReport
	// links maps an upper inode with several names to the host directory
	// (a dup'ed descriptor) and name it was first written to.
	links map[[2]uint64]hostName
	// owned are host files with several names of which the merge took
	// one away ([merger.owning]).
	owned map[[2]uint64]owned
	// copyOnly is set once a rename from the upper layer failed with
	// EXDEV: the rest is copied.
	copyOnly bool
	// afterEntry, when set, is called after each applied entry (tests).
	afterEntry func(n int)
	applied    int
}

type hostName struct {
	dirFD int
	name  string
}

// MergeReport is what merging a run's writes did.
type MergeReport struct {
	// Files and Bytes count regular files written to the host; Removed
	// the entries deleted; Applied every applied change.
	Files   int   `json:"files"`
	Bytes   int64 `json:"bytes"`
	Removed int   `json:"removed"`
	Applied int   `json:"applied"`
	// Refused are changes the policy kept from the host.
	Refused []fsrules.Refusal `json:"refused,omitempty"`
	// Conflicts are host paths that changed on the host during the run and
	// that the command changed too: the host's version is kept, the
	// command's is saved aside (Saved, empty for a deletion).
	Conflicts []Conflict `json:"conflicts,omitempty"`
	// Lost are changes that could be neither applied nor saved, with why.
	Lost []string `json:"lost,omitempty"`
	// Skipped are entries that are not merged by design (sockets), with why.
	Skipped []string `json:"skipped,omitempty"`
	// Would lists, for a discarded run, the changes it would have made
	// (at most maxWould; WouldMore counts the rest).
	Would     []string `json:"would,omitempty"`
	WouldMore int      `json:"wouldMore,omitempty"`
}

// Conflict is a path both the command and someone on the host changed,
// or (Why set) a change that could not be applied and was saved aside.
type Conflict struct {
	Path  string `json:"path"`
	Saved string `json:"saved,omitempty"`
	Why   string `json:"why,omitempty"`
}

const maxWould = 1000

func (m *merger) close() {
	for _, l := range m.links {
		unix.Close(l.dirFD)
	}
}

func (m *merger) lose(host string, err error) {
	m.rep.Lost = append(m.rep.Lost, fmt.Sprintf("%s: %v", host, err))
}

func (m *merger) skip(host, why string) {
	m.rep.Skipped = append(m.rep.Skipped, host+": "+why)
}

func (m *merger) would(c *fsrules.Change) {
	if len(m.rep.Would) < maxWould {
		m.rep.Would = append(m.rep.Would, c.Kind.String()+" "+c.Path)
	} else {
		m.rep.WouldMore++
	}
}

func (m *merger) done() {
	m.applied++
	m.rep.Applied++
	if m.afterEntry != nil {
		m.afterEntry(m.applied)
	}
}

// fileMode is the mode a merged file gets: the command's, without the
// set-user-ID and set-group-ID bits, so a sandbox cannot leave a setuid
// program on the host (its own mounts are nosuid; the host's are not).
func fileMode(st *unix.Stat_t) uint32 {
	return st.Mode & 0o7777 &^ (unix.S_ISUID | unix.S_ISGID)
}

// changedDuringRun reports whether a host entry changed at or after the
// run's start, as precisely as its filesystem stamps: one that keeps whole
// seconds (ext4 with small inodes), two (FAT) or 100 ns stamps a change
// made after the start with a time truncated below it, so the start is
// truncated as the entry's stamp is ([truncateLike]).
func (m *merger) changedDuringRun(st *unix.Stat_t) bool {
	if o, ok := m.owned[[2]uint64{st.Dev, st.Ino}]; ok {
		// The merge itself took a name of this inode away, which moved its
		// ctime: changed if its content, size or mode did, or its ctime
		// moved again after the merge's last such step.
		return st.Mtim != o.st.Mtim || st.Size != o.st.Size || st.Mode != o.st.Mode ||
			after(st.Ctim, truncateLike(o.upTo, st.Ctim))
	}
	start := m.start
	if slices.Contains(m.fineDevs, st.Dev) {
		start = m.fine
	}
	return !after(truncateLike(start, st.Ctim), st.Ctim)
}

// owning runs op, which takes a name of the host file st away (an unlink,
// a replacement). When the file has other names, their ctime moves with
// the link count, which must not read as a change made on the host during
// the run ([merger.changedDuringRun]): the file as it was before the first
// such step, and the time after each, are recorded. A host change stamped
// no later than that (within a coarse clock tick of the step, 4 ms; a
// second on file systems that stamp whole seconds) that keeps the size and
// restores the mtime is not told from the merge's own.
func (m *merger) owning(st *unix.Stat_t, op func() error) error {
	if st == nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink < 2 {
		return op()
	}
	key := [2]uint64{st.Dev, st.Ino}
	o, ok := m.owned[key]
	if !ok {
		o = owned{st: *st}
	}
	err := op()
	if err == nil {
		// The fine clock: a file system with multigrain stamps gives the
		// step a ctime past the coarse one.
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &o.upTo)
	}
	if m.owned == nil {
		m.owned = map[[2]uint64]owned{}
	}
	m.owned[key] = o
	return err
}

// owned is a host file with several names of which the merge took one
// away: as it was before, and when the merge's last such step ended.
type owned struct {
	st   unix.Stat_t
	upTo unix.Timespec
}

// leafMode applies [merger.widens] to a file the command wrote: refused
// when it opens an existing guarded file to every user; a new one loses
// that bit (git init under a umask of 000), as set-user-ID bits are
// dropped.
func (m *merger) leafMode(up int, name string, st, hst *unix.Stat_t, s scope) (*fsrules.Refusal, error) {
	if fileMode(st)&0o002 == 0 {
		return nil, nil
	}
	if hst != nil {
		return m.widens(s, hst.Mode, fileMode(st)), nil
	}
	if !m.guarded(s) {
		return nil, nil
	}
	st.Mode &^= 0o002
	return nil, unix.Fchmodat(up, name, fileMode(st), 0)
}

// widens refuses a mode that lets every user write an entry the policy
// guards (a git directory, its config, a protected file) where old did
// not: on a shared host another user could then plant a hook. A new
// guarded entry gets its mode without that bit instead. (Group write
// follows the user's umask and is left alone.)
func (m *merger) widens(s scope, old, mode uint32) *fsrules.Refusal {
	if mode&^old&0o002 == 0 || !m.guarded(s) {
		return nil
	}
	return &fsrules.Refusal{Path: s.path, Kind: fsrules.Modify.String(), Rule: "protected",
		Why: fmt.Sprintf("mode %o would let other users write what git or a shell runs", mode&0o7777)}
}

// truncateLike truncates t to the precision stamp appears to have: as
// many trailing decimal zeros in its nanoseconds, or, with none at all,
// an even second.
func truncateLike(t, stamp unix.Timespec) unix.Timespec {
	if stamp.Nsec == 0 {
		return unix.Timespec{Sec: t.Sec &^ 1}
	}
	g := int64(1)
	for stamp.Nsec%(g*10) == 0 {
		g *= 10
	}
	return unix.Timespec{Sec: t.Sec, Nsec: t.Nsec - t.Nsec%g}
}

// scope is where an entry lies: its writable root, its host path and the
// innermost git directory holding it.
type scope struct {
	root, path, git string
	// links are what the repositories around path point git at
	// (fsrules.RepoLinks), found as the merge entered them.
	links []fsrules.Path
}

func (s scope) child(name string) scope {
	return scope{root: s.root, path: s.path + "/" + name, git: s.git, links: s.links}
}

func (s scope) change(kind fsrules.ChangeKind, dir bool) *fsrules.Change {
	return &fsrules.Change{Path: s.path, Root: s.root, Kind: kind, Dir: dir, NonDir: !dir, Git: s.git, RepoLinks: s.links}
}

// enterRepo adds to s what the repository whose work tree is the host
// directory open as host points git at, when it holds a .git (a
// repository nested in the writable root: vendored, a submodule, a
// worktree); the workspace's own is in the policy already.
func (m *merger) enterRepo(host int, s scope) scope {
	var st unix.Stat_t
	if host < 0 || s.git != "" || s.path == m.pol.Workspace || unix.Fstatat(host, ".git", &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return s
	}
	if l := fsrules.RepoLinks(s.path, s.root, m.pol.Home); len(l) > 0 {
		s.links = append(slices.Clip(s.links), l...)
	}
	return s
}

// mergeRoot merges the upper directory open as up into the host directory
// open as host (the writable root at path).
func (m *merger) mergeRoot(up, host int, path string) {
	s := scope{root: path, path: path}
	if isGitName(filepath.Base(path)) || isGitDirAt(up, host, ".") {
		s.git = path
	}
	m.dir(up, host, m.enterRepo(host, s), false)
}

// dir merges one upper directory into its host directory (host is -1 when
// the host has no such directory: only in a discarded run). An opaque upper
// directory replaced the host directory's contents: host entries it does
// not list are removed first, then the mark is cleared, so that a merge run
// again after an interruption does not remove what it already moved in.
func (m *merger) dir(up, host int, s scope, opaque bool) {
	names, err := readNames(up)
	if err != nil {
		m.lose(s.path, err)
		return
	}
	if opaque && host >= 0 {
		hostNames, err := readNames(host)
		if err != nil {
			m.lose(s.path, err)
			return
		}
		inUpper := make(map[string]bool, len(names))
		for _, n := range names {
			inUpper[n] = true
		}
		for _, n := range hostNames {
			if !inUpper[n] {
				m.remove(host, n, s.child(n))
			}
		}
		if !m.discard {
			_ = unix.Fremovexattr(up, "user.overlay.opaque")
		}
	}
	for _, name := range names {
		m.entry(up, host, name, s.child(name))
	}
}

func (m *merger) entry(up, host int, name string, s scope) {
	var st unix.Stat_t
	if err := unix.Fstatat(up, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		m.lose(s.path, err)
		return
	}
	var hst unix.Stat_t
	var hostErr error = unix.ENOENT
	if host >= 0 {
		hostErr = unix.Fstatat(host, name, &hst, unix.AT_SYMLINK_NOFOLLOW)
	}
	if hostErr != nil && !errors.Is(hostErr, unix.ENOENT) {
		m.lose(s.path, hostErr)
		return
	}
	var hp *unix.Stat_t
	if hostErr == nil {
		hp = &hst
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		if st.Rdev != 0 {
			m.skip(s.path, "device files are not merged")
			return
		}
		if hp != nil {
			m.remove(host, name, s)
		}
		if !m.discard {
			_ = unix.Unlinkat(up, name, 0)
		}
	case unix.S_IFDIR:
		m.subdir(up, host, name, &st, hp, s)
	case unix.S_IFREG, unix.S_IFLNK, unix.S_IFIFO:
		m.leaf(up, host, name, &st, hp, s)
	default:
		m.skip(s.path, "sockets are not merged")
	}
}

// subdir merges an upper directory: a new one is checked as a whole (a
// refused new directory is saved aside in one piece), an existing one is
// merged entry by entry.
func (m *merger) subdir(up, host int, name string, st, hst *unix.Stat_t, s scope) {
	sub, err := openDirAt(up, name)
	if err != nil {
		m.lose(s.path, err)
		return
	}
	defer unix.Close(sub)
	opaque := false
	var buf [8]byte
	if n, err := unix.Fgetxattr(sub, "user.overlay.opaque", buf[:]); err == nil && string(buf[:n]) == "y" {
		opaque = true
	}
	if name == ".git" || isGitDirAt(up, host, name) {
		s.git = s.path
	}
	hostIsDir := hst != nil && hst.Mode&unix.S_IFMT == unix.S_IFDIR
	if !hostIsDir {
		c := s.change(fsrules.Create, true)
		if r := m.pol.Check(c); r != nil {
			m.refuse(r, up, name)
			return
		}
		if hst != nil && !m.remove(host, name, s) {
			m.conflict(s.path, up, name)
			return
		}
		if m.discard {
			m.would(c)
			m.dir(sub, -1, s, false)
			return
		}
		if err := unix.Mkdirat(host, name, 0o700); errors.Is(err, unix.EEXIST) && hst == nil {
			// The host made an entry there during the merge (a link, a
			// directory): the host's stays, the command's tree is saved.
			m.conflict(s.path, up, name)
			return
		} else if err != nil && !errors.Is(err, unix.EEXIST) {
			m.lose(s.path, err)
			return
		}
		m.done()
	}
	hsub := -1
	if host >= 0 {
		if hsub, err = openDirAt(host, name); err != nil {
			m.lose(s.path, err)
			return
		}
		defer unix.Close(hsub)
	}
	m.dir(sub, hsub, m.enterRepo(hsub, s), opaque)
	if m.discard || hsub < 0 {
		return
	}
	mode := st.Mode & 0o1777
	if !hostIsDir && mode&0o002 != 0 && m.guarded(s) {
		mode &^= 0o002 // a new guarded directory: see [merger.widens]
	}
	var now unix.Stat_t
	if unix.Fstat(hsub, &now) == nil && now.Mode&0o7777 != mode {
		var r *fsrules.Refusal
		if hostIsDir {
			if r = m.pol.Check(s.change(fsrules.Modify, true)); r == nil {
				r = m.widens(s, now.Mode, mode)
			}
		}
		if r != nil {
			m.refuse(r, -1, "")
		} else if err := unix.Fchmod(hsub, mode); err != nil {
			m.lose(s.path, err)
		}
	}
	_ = unix.Unlinkat(up, name, unix.AT_REMOVEDIR) // consumed unless something stayed
}

// leaf merges a regular file, symbolic link or fifo.
func (m *merger) leaf(up, host int, name string, st, hst *unix.Stat_t, s scope) {
	kind := fsrules.Create
	if hst != nil {
		kind = fsrules.Modify
		if same, err := m.sameEntry(up, host, name, st, hst); err != nil {
			m.lose(s.path, err)
			return
		} else if same {
			m.sameContent(up, host, name, st, hst, s)
			return
		}
	}
	c := s.change(kind, false)
	c.Link = st.Mode&unix.S_IFMT == unix.S_IFLNK
	c.Special = !c.Link && st.Mode&unix.S_IFMT != unix.S_IFREG
	switch {
	case name == "config" && s.git != "" && s.path == s.git+"/config":
		c.OldConfig, c.NewConfig = readSmall(host, name), readSmall(up, name)
	case fsrules.IsGitIndexName(name) && s.git != "" && s.path == s.git+"/"+name && !c.Link && !c.Special:
		c.NewIndex = readUpTo(up, name, fsrules.MaxGitIndex)
		var known bool
		if c.IndexSHA256, known = indexSHA256(up, host, s.git); !known {
			c.NewIndex = nil // refused: its object names' length is not known
		}
	case name == "HEAD" && s.git != "" && s.path == s.git+"/HEAD" && !fsrules.LooksLikeHead(readSmall(host, name)):
		// A new HEAD makes its directory a git directory: the config
		// already there (from an earlier run, when this was no git
		// directory) must pass as if it were new.
		cfg := readSmall(up, "config")
		if cfg == nil {
			cfg = readSmall(host, "config")
		}
		c.NewConfig = cfg
		c.GitHolds = gitHolds(host)
	}
	r := m.pol.Check(c)
	if r == nil && !c.Link {
		var err error
		if r, err = m.leafMode(up, name, st, hst, s); err != nil {
			m.lose(s.path, err)
			return
		}
	}
	if r != nil {
		m.refuse(r, up, name)
		return
	}
	if hst != nil && (m.changedDuringRun(hst) || hst.Mode&unix.S_IFMT == unix.S_IFDIR) {
		if hst.Mode&unix.S_IFMT != unix.S_IFDIR || !m.remove(host, name, s) {
			m.conflict(s.path, up, name)
			return
		}
	}
	if m.discard {
		m.would(c)
		return
	}
	if hst != nil && hst.Mode&unix.S_IFMT == unix.S_IFDIR {
		hst = nil // removed above
	}
	if err := m.owning(hst, func() error { return m.place(up, host, name, st, hst, s.path, m.mayShare(st) && m.guarded(s)) }); err != nil {
		m.placeFailed(up, name, s.path, err)
		return
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		m.rep.Files++
		m.rep.Bytes += st.Size
	}
	m.done()
}

// placeFailed keeps the command's version of an entry the merge could not
// place (the host's changed meanwhile): saved as a conflict, or lost.
func (m *merger) placeFailed(up int, name, path string, err error) {
	if saved := m.saves.save(m, "conflicts", path, up, name); saved != "" {
		m.rep.Conflicts = append(m.rep.Conflicts, Conflict{Path: path, Saved: saved, Why: err.Error()})
	} else {
		m.lose(path, err)
	}
}

// sameEntry reports whether the host entry already is what the upper one
// holds: the same type and content (a file opened for writing but not
// changed, a merge run again after an interruption).
func (m *merger) sameEntry(up, host int, name string, st, hst *unix.Stat_t) (bool, error) {
	if st.Mode&unix.S_IFMT != hst.Mode&unix.S_IFMT {
		return false, nil
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return st.Size == hst.Size && st.Size <= maxCompare && equalFiles(up, name, host, name), nil
	case unix.S_IFLNK:
		a, err := readlinkat(up, name)
		if err != nil {
			return false, err
		}
		b, err := readlinkat(host, name)
		return err == nil && a == b, nil
	}
	return true, nil
}

// maxCompare bounds the files the merge compares byte for byte to find
// one the command left as it was (touched, rewritten the same): a larger
// one is taken as changed, and moved or copied as any change is. A
// sparse file of terabytes costs a command nothing to make, and its
// comparison held the user-wide merge lock for hours.
const maxCompare = 64 << 20

// sameContent handles an entry whose content the host already has: only
// its mode and times may differ.
func (m *merger) sameContent(up, host int, name string, st, hst *unix.Stat_t, s scope) {
	modeDiff := st.Mode&unix.S_IFMT != unix.S_IFLNK && fileMode(st) != hst.Mode&0o7777
	timeDiff := st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mtim != hst.Mtim
	if modeDiff || timeDiff {
		c := s.change(fsrules.Modify, false)
		r := m.pol.Check(c)
		if r == nil && modeDiff {
			r = m.widens(s, hst.Mode, fileMode(st))
		}
		if r != nil {
			m.refuse(r, -1, "")
			return
		}
		if m.discard {
			m.would(c)
			return
		}
		if hst.Mode&unix.S_IFMT == unix.S_IFREG && hst.Nlink > 1 {
			// The host file has other names (a hard link from a package
			// store, a local clone's objects, a protected file): changed
			// in place, the mode or times would change for them all. The
			// command's file replaces this name, as the sandbox saw it
			// (overlayfs copied it up, apart from the other names).
			if err := m.owning(hst, func() error { return m.place(up, host, name, st, hst, s.path, m.mayShare(st) && m.guarded(s)) }); err != nil {
				m.placeFailed(up, name, s.path, err)
				return
			}
			m.done()
			return
		}
		var err error
		if modeDiff {
			err = unix.Fchmodat(host, name, fileMode(st), 0)
		}
		if err == nil && timeDiff {
			err = unix.UtimesNanoAt(host, name, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil {
			m.lose(s.path, err)
			return
		}
		m.done()
	}
	if m.mayShare(st) && !m.guarded(s) {
		m.remember(st, host, name)
	}
	if !m.discard {
		_ = unix.Unlinkat(up, name, 0)
	}
}

// place puts the upper entry at name in the host directory, replacing what
// is there in one step: a rename from the upper layer when it is on the
// same file system, else a complete copy renamed into place.
//
// hst is the host entry as the merge checked it (nil: there was none):
// one that changed or appeared since is never replaced ([errHostChanged]).
//
// A guarded file ([merger.guarded]) never shares its inode with another
// name: an upper file with several names is copied there, and no other
// name is linked to it.
func (m *merger) place(up, host int, name string, st, hst *unix.Stat_t, path string, guarded bool) error {
	dir := filepath.Dir(path)
	// An inode seen before under another name (its link count may have
	// dropped since: a copied name leaves the upper layer).
	key := [2]uint64{st.Dev, st.Ino}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && !guarded {
		// A second name of a file placed already (copied, when it has
		// the command's attributes: the copy has none) links to it.
		if prev, ok := m.links[key]; ok {
			err := m.viaTemp(host, name, dir, hst, func(tmp string) error {
				return unix.Linkat(prev.dirFD, prev.name, host, tmp, 0)
			})
			if err == nil {
				_ = unix.Unlinkat(up, name, 0)
			}
			return err
		}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && (guarded && st.Nlink > 1 || commandXattrs(up, name)) {
		// A copy has an inode of its own and no extended attribute (an
		// ACL or a user.* attribute the command set stays behind).
		if err := m.copyFile(up, host, name, st, hst, dir); err != nil {
			return err
		}
		if !guarded {
			m.remember(st, host, name)
		}
		_ = unix.Unlinkat(up, name, 0)
		return nil
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && fileMode(st) != st.Mode&0o7777 {
		if err := unix.Fchmodat(up, name, fileMode(st), 0); err != nil {
			return err
		}
	}
	if !m.copyOnly {
		err := renameUnchanged(up, name, host, name, hst)
		if err == nil {
			if !guarded {
				m.remember(st, host, name)
			}
			return nil
		}
		if !errors.Is(err, unix.EXDEV) {
			return err
		}
		m.copyOnly = true
	}
	var err error
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		err = m.copyFile(up, host, name, st, hst, dir)
	case unix.S_IFLNK:
		target, rerr := readlinkat(up, name)
		if rerr != nil {
			return rerr
		}
		err = m.viaTemp(host, name, dir, hst, func(tmp string) error { return unix.Symlinkat(target, host, tmp) })
	case unix.S_IFIFO:
		err = m.viaTemp(host, name, dir, hst, func(tmp string) error { return unix.Mkfifoat(host, tmp, fileMode(st)) })
	}
	if err == nil {
		if !guarded {
			m.remember(st, host, name)
		}
		_ = unix.Unlinkat(up, name, 0)
	}
	return err
}

// copyFile copies the upper file into an anonymous file in the host
// directory, with its mode and times, links it under a journaled temporary
// name and renames that over name: the host never sees a partial file.
func (m *merger) copyFile(up, host int, name string, st, hst *unix.Stat_t, dir string) error {
	src, err := unix.Openat(up, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	in := os.NewFile(uintptr(src), name)
	defer in.Close()
	fd, err := unix.Openat(host, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	out := os.NewFile(uintptr(fd), name)
	defer out.Close()
	if err := copySparse(out, in); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, fileMode(st)); err != nil {
		return err
	}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), []unix.Timespec{st.Atim, st.Mtim}, 0); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	return m.viaTemp(host, name, dir, hst, func(tmp string) error {
		return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), host, tmp, unix.AT_SYMLINK_FOLLOW)
	})
}

// viaTemp makes an entry under a journaled temporary name with mk, then
// renames it over name (dir is the host directory's path, for the journal)
// unless the host entry changed since hst ([renameUnchanged]).
func (m *merger) viaTemp(host int, name, dir string, hst *unix.Stat_t, mk func(tmp string) error) error {
	tmp, err := m.tmp.next(dir)
	if err != nil {
		return err
	}
	if err := mk(tmp); err != nil {
		return err
	}
	if err := renameUnchanged(host, tmp, host, name, hst); err != nil {
		_ = unix.Unlinkat(host, tmp, 0)
		return err
	}
	return nil
}

// errHostChanged says a host entry changed, or appeared, while the merge
// prepared the command's version (a large file takes a while to copy).
var errHostChanged = errors.New("changed on the host while the merge applied the command's version")

// renameUnchanged renames from over to when the host entry at to is still
// hst (nil: still absent), checked just before: the same inode with the
// same change time, modification time and size. A new entry is never
// replaced (RENAME_NOREPLACE where the filesystem has it).
func renameUnchanged(fromDir int, from string, toDir int, to string, hst *unix.Stat_t) error {
	if hst == nil {
		err := unix.Renameat2(fromDir, from, toDir, to, unix.RENAME_NOREPLACE)
		switch {
		case errors.Is(err, unix.EEXIST):
			return errHostChanged
		case !errors.Is(err, unix.EINVAL):
			return err
		}
	}
	var now unix.Stat_t
	err := unix.Fstatat(toDir, to, &now, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case hst == nil && !errors.Is(err, unix.ENOENT):
		return errHostChanged
	case hst != nil && (err != nil || !sameState(&now, hst)):
		return errHostChanged
	}
	return unix.Renameat(fromDir, from, toDir, to)
}

// sameState reports whether two stats of a host entry show no change
// between them.
func sameState(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Ctim == b.Ctim && a.Mtim == b.Mtim && a.Size == b.Size && a.Mode == b.Mode
}

func (m *merger) remember(st *unix.Stat_t, host int, name string) {
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink < 2 {
		return
	}
	fd, err := unix.Dup(host)
	if err != nil {
		return
	}
	if m.links == nil {
		m.links = map[[2]uint64]hostName{}
	}
	m.links[[2]uint64{st.Dev, st.Ino}] = hostName{fd, name}
}

// commandXattrs reports whether the upper file carries extended attributes
// of the namespaces a command can set without privilege (user.*, and POSIX
// ACLs as the file's owner): moved by rename, the file would take them to
// the host. Security labels (security.*), which a host may put on every
// file, do not count. overlayfs's own ([overlayOwn]) are removed first:
// they describe the upper layer, not the file, and sbx leaves nothing of
// its own on the host; one that cannot be removed counts. A list that
// cannot be read counts.
func commandXattrs(dir int, name string) bool {
	names, err := listXattrs(dir, name)
	if err != nil {
		return !errors.Is(err, unix.ENOTSUP)
	}
	for _, a := range names {
		if overlayOwn(a) && unix.Lremovexattr(fdEntry(dir, name), a) == nil {
			continue
		}
		if strings.HasPrefix(a, "user.") || strings.HasPrefix(a, "system.posix_acl") {
			return true
		}
	}
	return false
}

// overlayOwn reports whether an attribute of an upper file is one overlayfs
// wrote there itself (user.overlay.origin on every copied-up file, with the
// userxattr option). What a command sets under that prefix through the
// overlay is stored escaped, as user.overlay.overlay.* (Linux 6.7; older
// kernels refuse it), and is the command's.
func overlayOwn(attr string) bool {
	return strings.HasPrefix(attr, "user.overlay.") && !strings.HasPrefix(attr, "user.overlay.overlay.")
}

// listXattrs lists the extended attributes of the entry name in dir (not
// following a link): with listxattrat, or through /proc before Linux 6.13
// (and where a container's seccomp profile refuses a system call it does
// not know, with ENOSYS or EPERM).
func listXattrs(dir int, name string) ([]string, error) {
	names, err := xattrNames(func(buf []byte) (int, error) { return listxattrAt(dir, name, buf) })
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		p := fdEntry(dir, name)
		return xattrNames(func(buf []byte) (int, error) { return unix.Llistxattr(p, buf) })
	}
	return names, err
}

// xattrNames reads an attribute list with list (a listxattr call), as
// large as it is.
func xattrNames(list func([]byte) (int, error)) ([]string, error) {
	buf := make([]byte, 256)
	n, err := list(buf)
	if errors.Is(err, unix.ERANGE) {
		if n, err = list(nil); err == nil {
			buf = make([]byte, n)
			n, err = list(buf)
		}
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, a := range strings.Split(string(buf[:n]), "\x00") {
		if a != "" {
			names = append(names, a)
		}
	}
	return names, nil
}

// fdEntry names the entry name of the directory open at dir.
func fdEntry(dir int, name string) string {
	return "/proc/self/fd/" + strconv.Itoa(dir) + "/" + name
}

// mayShare reports whether the upper file's inode has, or had, another
// name: only then does [merger.guarded] matter (and cost a policy check).
func (m *merger) mayShare(st *unix.Stat_t) bool {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	_, seen := m.links[[2]uint64{st.Dev, st.Ino}]
	return st.Nlink > 1 || seen
}

// guarded reports whether the host file at s is one the policy keeps from
// arbitrary changes: a protected or persistence name, a denyWrite, any file
// of a git directory. The merge never gives such a file a second name (a
// hard link the command made to .git/config, merged as a link, would let
// an ordinary write on the host to notes.txt rewrite the config unchecked).
func (m *merger) guarded(s scope) bool {
	return s.git != "" || m.pol.Check(s.change(fsrules.Modify, false)) != nil
}

// remove deletes name from the host directory, recursively, as the command
// did. A tree holding anything the policy keeps is kept whole (a git
// directory loses neither its hooks nor, for lack of them, its objects);
// an entry changed on the host during the run is kept too (a conflict),
// with the directories holding it. It reports whether everything went.
func (m *merger) remove(dirFD int, name string, s scope) bool {
	var st unix.Stat_t
	if err := unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return true
		}
		m.lose(s.path, err)
		return false
	}
	if r := m.deletable(dirFD, name, s, &st); r != nil {
		if r.Path != s.path {
			r.Why = "it holds " + r.Path + ": " + r.Why
			r.Path = s.path
		}
		m.refuse(r, -1, "")
		return false
	}
	return m.removeTree(dirFD, name, s, &st)
}

// deletable checks the deletion of a host entry and everything below it,
// and returns the first refusal.
func (m *merger) deletable(dirFD int, name string, s scope, st *unix.Stat_t) *fsrules.Refusal {
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if isDir && (name == ".git" || isGitDirAt(-1, dirFD, name)) {
		s.git = s.path
	}
	if r := m.pol.Check(s.change(fsrules.Delete, isDir)); r != nil || !isDir {
		return r
	}
	fd, err := openDirAt(dirFD, name)
	if err != nil {
		return &fsrules.Refusal{Path: s.path, Kind: "delete", Rule: "error", Why: err.Error()}
	}
	defer unix.Close(fd)
	names, err := readNames(fd)
	if err != nil {
		return &fsrules.Refusal{Path: s.path, Kind: "delete", Rule: "error", Why: err.Error()}
	}
	for _, n := range names {
		var cst unix.Stat_t
		if err := unix.Fstatat(fd, n, &cst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		if r := m.deletable(fd, n, s.child(n), &cst); r != nil {
			return r
		}
	}
	return nil
}

// removeTree deletes a host entry the policy lets go, keeping what changed
// on the host during the run.
func (m *merger) removeTree(dirFD int, name string, s scope, st *unix.Stat_t) bool {
	c := s.change(fsrules.Delete, st.Mode&unix.S_IFMT == unix.S_IFDIR)
	if !c.Dir {
		if m.changedDuringRun(st) {
			m.rep.Conflicts = append(m.rep.Conflicts, Conflict{Path: s.path})
			return false
		}
		if m.discard {
			m.would(c)
			return true
		}
		if err := m.owning(st, func() error { return unix.Unlinkat(dirFD, name, 0) }); err != nil {
			m.lose(s.path, err)
			return false
		}
		m.rep.Removed++
		m.done()
		return true
	}
	fd, err := openDirAt(dirFD, name)
	if err != nil {
		m.lose(s.path, err)
		return false
	}
	names, err := readNames(fd)
	all := err == nil
	if err != nil {
		m.lose(s.path, err)
	}
	for _, n := range names {
		var cst unix.Stat_t
		if err := unix.Fstatat(fd, n, &cst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if !errors.Is(err, unix.ENOENT) {
				m.lose(s.path+"/"+n, err)
				all = false
			}
			continue
		}
		all = m.removeTree(fd, n, s.child(n), &cst) && all
	}
	unix.Close(fd)
	if !all {
		return false
	}
	if m.discard {
		m.would(c)
		return true
	}
	if err := unix.Unlinkat(dirFD, name, unix.AT_REMOVEDIR); err != nil {
		m.lose(s.path, err)
		return false
	}
	m.rep.Removed++
	m.done()
	return true
}

// refuse records a refused change and saves the command's version of it
// (the upper entry name in up; up < 0 when there is none) to the
// quarantine.
func (m *merger) refuse(r *fsrules.Refusal, up int, name string) {
	if up >= 0 && !m.discard {
		r.Saved = m.saves.save(m, "quarantine", r.Path, up, name)
		if r.Saved == "" {
			m.lose(r.Path, errors.New("refused by the policy, and it could not be saved to the quarantine"))
		}
	}
	m.rep.Refused = append(m.rep.Refused, *r)
}

// rootGone saves aside the staged writes (up, in the directory stage) of a
// writable root that was removed from the host after its run was killed
// and before the run was finished: there is nothing to merge them into.
func (m *merger) rootGone(path string, stage int, up string) {
	c := Conflict{Path: path, Why: "the writable root was removed from the host after the run was killed"}
	if c.Saved = m.saves.save(m, "conflicts", path, stage, up); c.Saved == "" {
		m.lose(path, errors.New(c.Why+", and the command's writes could not be saved"))
		return
	}
	m.rep.Conflicts = append(m.rep.Conflicts, c)
}

// conflict keeps the host's version of path and saves the command's. It
// replaces the record that removing the host's entry there made (which
// says the command deleted it: the command replaced it).
func (m *merger) conflict(path string, up int, name string) {
	m.rep.Conflicts = slices.DeleteFunc(m.rep.Conflicts, func(k Conflict) bool {
		return k.Path == path && k.Saved == "" && k.Why == ""
	})
	c := Conflict{Path: path}
	if !m.discard {
		if c.Saved = m.saves.save(m, "conflicts", path, up, name); c.Saved == "" {
			m.lose(path, errors.New("changed on the host during the run, and the command's version could not be saved"))
			return
		}
	}
	m.rep.Conflicts = append(m.rep.Conflicts, c)
}

// gitRunsNames are the entries of a git directory through which git runs
// or follows something: hooks, info/, the pointers elsewhere, the state of
// an operation that runs commands when continued, and git's data (a link
// there sends git elsewhere).
var gitRunsNames = []string{"hooks", "info", "commondir", "gitdir", "rebase-merge", "rebase-apply", "sequencer",
	"objects", "refs", "logs", "packed-refs", "config"}

// gitHolds names the first entry of the host directory dir (-1: none) that
// git would run or follow were dir a git directory, as [fsrules.GitEntry]
// decides for a change there: a directory that a new HEAD makes a git
// directory must not hold a hook an earlier run left when it was none.
func gitHolds(dir int) string {
	if dir < 0 {
		return ""
	}
	for _, n := range gitRunsNames {
		var st unix.Stat_t
		if unix.Fstatat(dir, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return n + " (a symbolic link)"
		case st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1:
			// Made by an earlier run when this was no git directory: a
			// write through the other name would change it unchecked.
			return n + " (a file with another name: a hard link)"
		}
		if ok, config, _ := fsrules.GitEntry(n, isDir); !ok && !config {
			return n
		}
		if !isDir || n != "hooks" && n != "info" && n != "objects" {
			continue
		}
		if bad := gitHoldsBelow(dir, n); bad != "" {
			return bad
		}
	}
	for _, n := range []string{"index", "sharedindex"} {
		if bad := badIndexIn(dir, n); bad != "" {
			return bad
		}
	}
	return ""
}

// badIndexIn names an index file of the host directory dir (index, or
// sharedindex.* when prefix is "sharedindex") that git, were dir a git
// directory, would read as naming a path it never writes ("" if none).
func badIndexIn(dir int, prefix string) string {
	names := []string{prefix}
	if prefix != "index" {
		all, err := readNames(dir)
		if err != nil {
			return "its entries (they cannot be listed)"
		}
		names = slices.DeleteFunc(all, func(n string) bool { return !strings.HasPrefix(n, prefix+".") })
	}
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(dir, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return n + " (not a regular file)"
		}
		data := readUpTo(dir, n, fsrules.MaxGitIndex)
		if ok, why := fsrules.GitIndexSafe(data, fsrules.GitUsesSHA256(readSmall(dir, "config"))); !ok {
			return n + " (" + why + ")"
		}
	}
	return ""
}

// gitHoldsBelow checks the entries of the directory sub of dir (hooks/,
// info/, objects/info/) as gitHolds does; one that cannot be listed counts.
func gitHoldsBelow(dir int, sub string) string {
	fd, err := openDirAt(dir, sub)
	if err != nil {
		return sub
	}
	defer unix.Close(fd)
	names, err := readNames(fd)
	if err != nil {
		return sub
	}
	for _, c := range names {
		var st unix.Stat_t
		if unix.Fstatat(fd, c, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		rel := sub + "/" + c
		if sub == "objects" && c == "info" {
			if bad := gitHoldsBelow(dir, rel); bad != "" {
				return bad
			}
			continue
		}
		if ok, _, _ := fsrules.GitEntry(rel, st.Mode&unix.S_IFMT == unix.S_IFDIR); !ok {
			return rel
		}
	}
	return ""
}

// isGitDirAt reports whether name in the directory up (the upper layer, or
// -1) or host (or -1) is, or may be taken by git for, a git directory:
// either layer has a commondir file (a linked worktree's); or a HEAD that
// is not a plain file of other text (a file that reads as a ref or an
// object name, a link, or anything else: a socket, fifo or whiteout that
// hides the host's HEAD from the merge while git on the host still reads
// it); or objects and refs with worktrees, hooks or config beside them (a
// linked worktree's common directory, which git uses with no HEAD of its
// own: one whose HEAD an earlier run removed stays a git directory). A
// directory named like a bare repository (x.git) counts with none of
// these: `git init --bare x.git` on the host keeps the hooks and config a
// command left there.
func isGitDirAt(up, host int, name string) bool {
	if isGitName(name) {
		return true
	}
	for _, d := range []int{up, host} {
		if d >= 0 && gitDirIn(d, name) {
			return true
		}
	}
	return false
}

// isGitName reports whether a directory's name is a bare repository's
// (x.git; .git itself is a work tree's).
func isGitName(name string) bool {
	return len(name) > len(".git") && strings.EqualFold(name[len(name)-len(".git"):], ".git")
}

// gitDirIn reports whether name in the directory d, one layer, holds what
// makes a git directory (see isGitDirAt).
func gitDirIn(d int, name string) bool {
	var st unix.Stat_t
	has := func(entry string) bool {
		return unix.Fstatat(d, filepath.Join(name, entry), &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	}
	if has("commondir") && st.Mode&unix.S_IFMT == unix.S_IFREG {
		return true
	}
	if has("HEAD") && (st.Mode&unix.S_IFMT != unix.S_IFREG || fsrules.LooksLikeHead(readSmall(d, filepath.Join(name, "HEAD")))) {
		return true
	}
	return has("objects") && has("refs") && (has("worktrees") || has("hooks") || has("config"))
}

// openDirAt opens a directory below dirFD without following a link.
func openDirAt(dirFD int, name string) (int, error) {
	return unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// readNames lists a directory open as fd (through a fresh descriptor, so
// fd's offset is left alone).
func readNames(fd int) ([]string, error) {
	nfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(nfd), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}

func readlinkat(dirFD int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirFD, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// indexSHA256 reports whether git on the host, once the merge is done,
// reads the index of git directory g (open as up and host) with SHA-256
// object names: the format is its common directory's config's, as it
// will stand. A linked worktree's commondir and an existing config's
// format are the host's (the merge refuses changing them); a new
// repository's config is the command's, if the merge takes it. known is
// false for a linked worktree whose common config cannot be read.
func indexSHA256(up, host int, g string) (sha256, known bool) {
	if cd := readSmall(host, "commondir"); cd != nil {
		common := strings.TrimSpace(string(cd))
		if !filepath.IsAbs(common) {
			common = filepath.Join(g, common)
		}
		cfg, err := fsrules.ReadRegular(filepath.Join(common, "config"))
		return fsrules.GitUsesSHA256(cfg), err == nil
	}
	if old := readSmall(host, "config"); old != nil {
		return fsrules.GitUsesSHA256(old), true
	}
	cfg := readSmall(up, "config")
	if ok, _ := fsrules.GitConfigChange(nil, cfg); ok && cfg != nil {
		return fsrules.GitUsesSHA256(cfg), true
	}
	return false, true
}

// readSmall reads a small regular file below dirFD; nil if there is none
// (or it is not a regular file).
func readSmall(dirFD int, name string) []byte { return readUpTo(dirFD, name, 2<<20) }

// readUpTo reads the regular file name in dirFD, max+1 bytes at most
// (nil if it cannot be read).
func readUpTo(dirFD int, name string, max int64) []byte {
	if dirFD < 0 {
		return nil
	}
	fd, err := unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil
	}
	return data // over max when the file is: the caller's check refuses it
}

// equalFiles compares two regular files byte for byte.
func equalFiles(dirA int, name string, dirB int, nameB string) bool {
	open := func(d int, n string) *os.File {
		fd, err := unix.Openat(d, n, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return nil
		}
		return os.NewFile(uintptr(fd), n)
	}
	a, b := open(dirA, name), open(dirB, nameB)
	if a == nil || b == nil {
		if a != nil {
			a.Close()
		}
		if b != nil {
			b.Close()
		}
		return false
	}
	defer a.Close()
	defer b.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return (ea == io.EOF || ea == io.ErrUnexpectedEOF) && (eb == io.EOF || eb == io.ErrUnexpectedEOF)
		}
	}
}
