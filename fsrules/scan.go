package fsrules

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Entry is a protected path found on disk, or one to be covered before it
// exists.
type Entry struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir"`
	// ID identifies a regular file's content at scan time (inode, size,
	// modification time), so that a file replaced during a run is noticed.
	ID string `json:"id,omitempty"`
}

// Snapshot is what [Scan] found in the writable roots.
type Snapshot struct {
	// Existing protected entries, at any depth.
	Existing []Entry `json:"existing"`
	// Missing protected names at the top of each writable root and in each
	// git directory: a backend covers them so they cannot be created.
	Missing []Entry `json:"missing"`
	// GitDirs are the git directories found.
	GitDirs []string `json:"gitDirs"`
}

// skipTrees are never walked: they are not host files.
var skipTrees = []string{"/proc", "/sys", "/dev"}

// Scan walks every writable root of pol and lists the protected entries it
// holds. Subtrees hidden by denyRead and protected directories themselves are
// not descended into. Paths in pol.ExactAllow are left out.
func Scan(pol *Policy) (*Snapshot, error) {
	roots := make([]string, 0, len(pol.Writable))
	for _, w := range pol.Writable {
		if w.Dir {
			roots = append(roots, w.Path)
		}
	}
	roots = outermost(roots)
	w := &walker{pol: pol, sem: make(chan struct{}, 4*runtime.GOMAXPROCS(0))}
	for _, r := range roots {
		if isGitDir(r) {
			// A worktree's git directory (or the common one) made writable:
			// protect its hooks and config like any other.
			w.gitDir(r)
			continue
		}
		w.wg.Add(1)
		go w.dir(r, true)
		w.topMissing(r)
	}
	w.wg.Wait()
	if len(w.errs) > 0 {
		return nil, errors.Join(w.errs...)
	}
	s := &w.snap
	for _, l := range [][]Entry{s.Existing, s.Missing} {
		slices.SortFunc(l, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	}
	slices.Sort(s.GitDirs)
	s.Existing = slices.DeleteFunc(s.Existing, func(e Entry) bool { return slices.Contains(pol.ExactAllow, e.Path) })
	s.Missing = slices.DeleteFunc(s.Missing, func(e Entry) bool { return slices.Contains(pol.ExactAllow, e.Path) })
	return s, nil
}

// outermost drops roots nested in another root.
func outermost(roots []string) []string {
	slices.Sort(roots)
	var out []string
	for _, r := range roots {
		if len(out) > 0 && Within(r, out[len(out)-1]) {
			continue
		}
		out = append(out, r)
	}
	return out
}

type walker struct {
	pol  *Policy
	sem  chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	snap Snapshot
	errs []error
}

func (w *walker) add(list *[]Entry, e Entry) {
	if list == &w.snap.Existing && !e.Dir {
		e.ID = FileID(e.Path)
	}
	w.mu.Lock()
	*list = append(*list, e)
	w.mu.Unlock()
}

func (w *walker) fail(err error) {
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
}

// topMissing records the protected names absent at the top of a root.
func (w *walker) topMissing(root string) {
	for _, n := range protectedFiles {
		w.coverIfMissing(filepath.Join(root, n), false)
	}
	for _, n := range protectedDirs {
		w.coverIfMissing(filepath.Join(root, n), true)
	}
	for _, n := range protectedNested {
		if fi, err := os.Lstat(filepath.Join(root, n[0])); err == nil && fi.IsDir() {
			w.coverIfMissing(filepath.Join(root, n[0], n[1]), true)
		}
	}
}

func (w *walker) coverIfMissing(p string, dir bool) {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		w.add(&w.snap.Missing, Entry{Path: p, Dir: dir})
	}
}

func (w *walker) hidden(p string) bool {
	for _, s := range skipTrees {
		if Within(p, s) {
			return true
		}
	}
	for _, d := range w.pol.DenyRead {
		if d.Dir && Within(p, d.Path) && !slices.ContainsFunc(w.pol.AllowRead, func(a Path) bool { return Within(a.Path, p) }) {
			return true
		}
	}
	return false
}

// dir walks one directory; it runs in its own goroutine.
func (w *walker) dir(p string, root bool) {
	defer w.wg.Done()
	if w.hidden(p) {
		return
	}
	w.sem <- struct{}{}
	ents, err := os.ReadDir(p)
	<-w.sem
	if err != nil {
		if !root && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)) {
			return // vanished or unreadable: nothing the sandbox could write either
		}
		w.fail(err)
		return
	}
	for _, e := range ents {
		name := e.Name()
		child := filepath.Join(p, name)
		isDir := e.IsDir()
		if name == ".git" {
			if isDir {
				w.gitDir(child)
			} else if e.Type().IsRegular() {
				// A gitdir pointer: rewriting it would point git at hooks elsewhere.
				w.add(&w.snap.Existing, Entry{Path: child})
			}
			continue
		}
		if prot, _ := isProtectedName(name); prot {
			w.add(&w.snap.Existing, Entry{Path: child, Dir: isDir})
			continue
		}
		for _, n := range protectedNested {
			if name == n[0] && isDir {
				if fi, err := os.Lstat(filepath.Join(child, n[1])); err == nil {
					w.add(&w.snap.Existing, Entry{Path: filepath.Join(child, n[1]), Dir: fi.IsDir()})
				}
			}
		}
		if isDir {
			w.wg.Add(1)
			go w.dir(child, false)
		}
	}
}

// gitDir records a git directory's protected entries, and those of the
// repositories nested in modules/ and worktrees/.
func (w *walker) gitDir(g string) {
	w.mu.Lock()
	w.snap.GitDirs = append(w.snap.GitDirs, g)
	w.mu.Unlock()
	for _, n := range gitDirProtected {
		p := filepath.Join(g, n)
		fi, err := os.Lstat(p)
		switch {
		case err == nil:
			w.add(&w.snap.Existing, Entry{Path: p, Dir: fi.IsDir()})
		case errors.Is(err, fs.ErrNotExist):
			w.add(&w.snap.Missing, Entry{Path: p, Dir: n == "hooks"})
		default:
			w.fail(err)
		}
	}
	for _, sub := range []string{"modules", "worktrees"} {
		w.nestedGitDirs(filepath.Join(g, sub))
	}
}

func (w *walker) nestedGitDirs(d string) {
	ents, err := os.ReadDir(d)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(d, e.Name())
		if _, err := os.Lstat(filepath.Join(p, "HEAD")); err == nil {
			w.gitDir(p)
		} else {
			w.nestedGitDirs(p) // submodule names may contain slashes
		}
	}
}

// Created lists the protected entries in after that were not in before:
// files that appeared during a run where no mechanism could cover them. In a
// git directory that is itself new, sample hooks and a config holding only
// harmless keys are not counted, so that git init and git clone inside the
// sandbox keep working.
func Created(before, after *Snapshot) []Entry {
	had := map[string]string{}
	for _, e := range before.Existing {
		had[e.Path] = e.ID
	}
	oldGit := map[string]bool{}
	for _, g := range before.GitDirs {
		oldGit[g] = true
	}
	var out []Entry
	for _, e := range after.Existing {
		if id, ok := had[e.Path]; ok && id == e.ID {
			continue
		}
		parent, base := filepath.Dir(e.Path), filepath.Base(e.Path)
		if !oldGit[parent] && slices.Contains(after.GitDirs, parent) {
			switch base {
			case "hooks":
				for _, h := range activeHooks(e.Path) {
					out = append(out, Entry{Path: h})
				}
				continue
			case "config":
				if SafeGitConfig(e.Path) {
					continue
				}
			}
		}
		out = append(out, e)
	}
	return out
}

// activeHooks lists the files of a hooks directory that git would run.
func activeHooks(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return []string{dir}
	}
	var out []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".sample") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// safeGitKeys are the git config keys that git init and git clone write and
// that run nothing. Subsection names are replaced by "*".
var safeGitKeys = []string{
	"core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates",
	"core.ignorecase", "core.precomposeunicode", "core.symlinks",
	"remote.*.url", "remote.*.fetch", "remote.*.pushurl", "remote.*.tagopt",
	"branch.*.remote", "branch.*.merge", "branch.*.rebase",
	"extensions.objectformat", "init.defaultbranch", "user.name", "user.email",
}

// SafeGitConfig reports whether a git config file holds only keys from a
// short list that runs nothing. Anything it cannot read or parse is unsafe.
func SafeGitConfig(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil || len(data) > 1<<20 {
		return false
	}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 || strings.TrimSpace(line[end+1:]) != "" {
				return false
			}
			head := strings.TrimSpace(line[1:end])
			name, sub, hasSub := strings.Cut(head, " ")
			section = strings.ToLower(name)
			if hasSub {
				if !strings.HasPrefix(strings.TrimSpace(sub), `"`) {
					return false
				}
				section += ".*"
			} else if strings.Contains(name, ".") {
				return false // [section.sub] legacy form: keep it simple
			}
			continue
		}
		if section == "" || strings.ContainsAny(line, "\\") {
			return false
		}
		key, _, _ := strings.Cut(line, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		if !slices.Contains(safeGitKeys, section+"."+key) {
			return false
		}
	}
	return sc.Err() == nil
}

// FileID returns the inode, size and modification time of a file, or "" if
// it cannot be read: enough to tell whether a file was replaced or changed.
func FileID(p string) string {
	fi, err := os.Lstat(p)
	if err != nil {
		return ""
	}
	ino := uint64(0)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = uint64(st.Ino)
	}
	return fmt.Sprintf("%d:%d:%d", ino, fi.Size(), fi.ModTime().UnixNano())
}

// isGitDir reports whether dir is itself a git directory (has HEAD and
// objects, or is a linked worktree's entry with a commondir file).
func isGitDir(dir string) bool {
	if _, err := os.Lstat(filepath.Join(dir, "HEAD")); err != nil {
		return false
	}
	for _, n := range []string{"objects", "commondir"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	return false
}
