//go:build linux

package linux

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/sys/unix"
)

// readRoots calls add for each path below which Landlock lets the
// command read files when the paths hidden must stay unreadable whatever
// the host puts there: in every directory above a hidden path, each entry
// that neither is one nor holds one nor matches a name pattern of that
// directory (add gets the directory, open as dirfd, and the entry's
// name), and each readable path that holds none
// (dirfd is AT_FDCWD, and name the path). A file the host makes or
// renames into such a directory during the run (over a mask, which the
// kernel then detaches) is below no root: unreadable. Symbolic links are
// left out: what one points to is read through its own path. Paths are
// taken as the sandbox sees them (called in it). listing, when set, is
// told each directory just before its entries are listed.
func readRoots(hidden []string, names []HiddenName, readable []string, add func(dirfd int, dir, name string) error, listing func(dir string)) error {
	above := map[string]bool{}
	isHidden := map[string]bool{}
	mark := func(d string) {
		for ; !above[d]; d = filepath.Dir(d) {
			above[d] = true
			if d == "/" {
				break
			}
		}
	}
	for _, h := range hidden {
		h = resolvedParent(h)
		isHidden[h] = true
		mark(filepath.Dir(h))
	}
	// A name pattern applies where something else is hidden already: it
	// makes no directory one whose entries the host may not replace
	// unseen (a monorepo's root above the workspace, whose files the user
	// edits during a run, only for a .env that may appear there).
	patterns := map[string][]string{}
	for _, n := range names {
		d := resolvedParent(n.Dir)
		patterns[d] = append(patterns[d], n.Name)
	}
	for _, r := range readable {
		if r = resolvedParent(r); !above[r] {
			if err := add(unix.AT_FDCWD, "", r); err != nil {
				return err
			}
		}
	}
	for d := range above {
		if listing != nil {
			listing(d)
		}
		if err := entryRoots(d, above, isHidden, patterns[d], add); err != nil {
			return err
		}
	}
	return nil
}

// entryRoots calls add for each entry of the directory d that is not a
// symbolic link, in above or in hidden, and whose name matches none of
// patterns.
func entryRoots(d string, above, hidden map[string]bool, patterns []string, add func(dirfd int, dir, name string) error) error {
	f, err := os.Open(d)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		// What the host makes there later is below no root; so is what
		// the caller may not list (nor, most likely, read).
		return nil
	}
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1) // unsorted
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	fd := int(f.Fd())
	for _, e := range entries {
		p := filepath.Join(d, e.Name())
		if e.Type() == fs.ModeSymlink || above[p] || hidden[p] || matchesAny(patterns, e.Name()) {
			continue
		}
		if err := add(fd, d, e.Name()); err != nil {
			return err
		}
	}
	return nil
}

// matchesAny reports whether name matches one of patterns (doublestar;
// a bad pattern matches everything: hidden rather than shown).
func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, err := doublestar.Match(p, name); ok || err != nil {
			return true
		}
	}
	return false
}

// resolvedParent is p with the symbolic links of its directory resolved
// (the part that exists), as the mounts at p were made.
func resolvedParent(p string) string {
	dir, base := filepath.Split(filepath.Clean(p))
	if base == "" {
		return "/"
	}
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(r, base)
	}
	return filepath.Join(resolvedParent(dir), base)
}

// readStampMargin is how much older than a prepared read ruleset the last
// change of every directory it lists must be for the ruleset to be used:
// file systems stamp changes with a coarse clock (a tick of a few
// milliseconds), so a change made just after a directory was listed could
// carry the stamp of one made just before.
const readStampMargin = 50 * time.Millisecond

// preparedRead is the read ruleset made before the command's call comes
// (while a warm sandbox waits), with the state of each directory whose
// entries it grants, taken just before they were listed. The call uses it
// only if none of them changed since: a file the host made or renamed
// there meanwhile (a ~/.gitconfig saved by rename) has no rule in it, and
// a directory renamed to a hidden path's name would keep its rule.
type preparedRead struct {
	fd   int
	err  error
	made time.Time
	dirs map[string]dirStamp
}

// dirStamp is a directory's identity and last changes (zero: it was not
// there).
type dirStamp struct {
	dev, ino     uint64
	mtime, ctime unix.StatxTimestamp
}

func stampDir(d string) dirStamp {
	var sx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, d, 0, unix.STATX_INO|unix.STATX_MTIME|unix.STATX_CTIME, &sx) != nil {
		return dirStamp{}
	}
	return dirStamp{unix.Mkdev(sx.Dev_major, sx.Dev_minor), sx.Ino, sx.Mtime, sx.Ctime}
}

// prepareRead makes the read ruleset of spec ahead of the call (an error
// is kept for the call, which then makes it again).
func prepareRead(spec *InitSpec) *preparedRead {
	p := &preparedRead{fd: -1, made: time.Now(), dirs: map[string]dirStamp{}}
	abi, err := LandlockABI()
	if err != nil {
		return p // no Landlock: the call's readRules finds none either
	}
	p.fd, p.err = readRuleset(abi, spec, func(d string) { p.dirs[d] = stampDir(d) })
	return p
}

// take returns the prepared ruleset if every directory it lists is as it
// was (and its entries had not changed within readStampMargin before the
// ruleset was made); otherwise it makes the ruleset again, now.
func (p *preparedRead) take(spec *InitSpec) (int, error) {
	if p.err == nil && p.unchanged() {
		return p.fd, nil
	}
	if p.fd >= 0 {
		unix.Close(p.fd)
	}
	return readRules(spec)
}

func (p *preparedRead) unchanged() bool {
	limit := p.made.Add(-readStampMargin).UnixNano()
	for d, was := range p.dirs {
		// An entry made, removed or renamed sets both times; a change of
		// the directory's own metadata, its change time.
		if stampDir(d) != was || was.mtime.Sec*1e9+int64(was.mtime.Nsec) >= limit {
			return false
		}
	}
	return true
}
