//go:build linux

package linux

import (
	"errors"
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

// emptyIndex is a git index of no entries: its header and its SHA-1.
const emptyIndex = "DIRC\x00\x00\x00\x02\x00\x00\x00\x00" +
	"\x39\xd8\x90\x13\x9e\xe5\x35\x6c\x7e\xf5\x72\x21\x6c\xeb\xcd\x27\xaa\x41\xf9\xdf"

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

// mergeEnv is a host directory, an upper layer, an outside directory and
// a state directory for one merge.
type mergeEnv struct {
	t                           *testing.T
	host, upper, outside, state string
}

func newMergeEnv(t *testing.T) *mergeEnv {
	root := t.TempDir()
	e := &mergeEnv{t, filepath.Join(root, "host"), filepath.Join(root, "upper"), filepath.Join(root, "outside"), filepath.Join(root, "state")}
	for _, d := range []string{e.host, e.upper, e.outside, e.state} {
		os.Mkdir(d, 0o755)
	}
	return e
}

// merge runs a merger over the whole upper layer.
func (e *mergeEnv) merge(pol *fsrules.Policy, start unix.Timespec, tweak func(*merger)) *MergeReport {
	e.t.Helper()
	m, up, host := e.merger(pol, start)
	if tweak != nil {
		tweak(m)
	}
	m.mergeRoot(up, host, e.host)
	return &m.rep
}

// merger makes a merger into the host directory and opens the upper and
// host directories (closed, with the merger, when the test ends).
func (e *mergeEnv) merger(pol *fsrules.Policy, start unix.Timespec) (m *merger, up, host int) {
	e.t.Helper()
	open := func(p string) int {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	host, up, stateFD := open(e.host), open(e.upper), open(e.state)
	if pol.Workspace == "" {
		pol.Workspace = e.host
	}
	m = &merger{pol: pol, start: start, saves: &saver{stateFD: stateFD, stateDir: e.state, runID: "run"},
		tmp: &tempNames{prefix: tempPrefix + "run-"}}
	e.t.Cleanup(m.close)
	return m, up, host
}

// TestMergeHostileUpper feeds the merge an upper layer a command could
// have shaped at will, and checks it never writes outside the host
// directory, never changes what the policy keeps, and keeps what changed on
// the host during the run.
func TestMergeHostileUpper(t *testing.T) {
	e := newMergeEnv(t)
	host, upper, outside, state := e.host, e.upper, e.outside, e.state
	write(t, filepath.Join(outside, "secret"), "outside\n")
	write(t, filepath.Join(host, ".bashrc"), "protected\n")
	write(t, filepath.Join(host, "locked/f"), "locked\n")
	write(t, filepath.Join(host, "repo/HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(host, "repo/config"), "[core]\n\tbare = true\n")
	os.MkdirAll(filepath.Join(host, "repo/objects"), 0o755)
	write(t, filepath.Join(host, "olddir/keep"), "old\n")
	write(t, filepath.Join(host, "racy.txt"), "before\n")
	write(t, filepath.Join(host, "racydel.txt"), "before\n")
	write(t, filepath.Join(host, "deltree/a"), "a\n")
	write(t, filepath.Join(host, "deltree/racy"), "before\n")
	for _, l := range []string{"link", "link2"} {
		if err := os.Symlink(outside, filepath.Join(host, l)); err != nil {
			t.Fatal(err)
		}
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
	u.file(".bashrc", "evil\n")                // protected
	u.file("deep/er/.vscode/tasks.json", "{}") // protected, nested and new
	u.whiteout("locked")                       // holds a denyWrite path
	u.file("link/secret", "through link\n")    // a plain (non-opaque) dir over a symlink
	u.opaqueDir("link2")
	u.file("link2/secret", "through link2\n")
	u.opaqueDir("olddir")
	u.file("olddir/new", "new\n")
	u.file("racy.txt", "sandbox\n")
	u.whiteout("racydel.txt")
	u.whiteout("deltree")
	u.file("fresh/deep/f", "fresh\n")
	u.file("repo/index", emptyIndex)                                     // git's data
	u.file("repo/sharedindex.1234", "not an index\n")                    // git's name, not its data
	u.file("repo/config", "[core]\n\tbare = true\n\tfsmonitor = evil\n") // a key that runs code
	u.file("repo/hooks/pre-commit", "evil\n")
	u.file("sub/.git", "gitdir: /etc\n") // a pointer appearing
	u.file("newbare/HEAD", "ref: refs/heads/main\n")
	u.file("newbare/objects/info/packs", "")
	u.file("newbare/hooks/post-receive", "evil\n") // a new repository's hook
	if err := os.Symlink("/etc", filepath.Join(upper, "sub2/.git")); err != nil {
		os.Mkdir(filepath.Join(upper, "sub2"), 0o755)
		if err := os.Symlink("/etc", filepath.Join(upper, "sub2/.git")); err != nil {
			t.Fatal(err)
		}
	}
	u.file("suid", "#!/bin/sh\n")
	if err := unix.Chmod(filepath.Join(upper, "suid"), 0o6755); err != nil {
		t.Fatal(err)
	}
	pol := &fsrules.Policy{DenyWrite: []fsrules.Path{{Path: filepath.Join(host, "locked/f"), Exists: true}}}
	rep := e.merge(pol, start, nil)

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
		{filepath.Join(host, "repo/index"), emptyIndex},
		{filepath.Join(host, "repo/config"), "[core]\n\tbare = true\n"},
		{filepath.Join(state, "conflicts/run", host, "racy.txt"), "sandbox\n"},
		{filepath.Join(state, "quarantine/run", host, ".bashrc"), "evil\n"},
		{filepath.Join(state, "quarantine/run", host, "repo/hooks/pre-commit"), "evil\n"},
		{filepath.Join(state, "quarantine/run", host, "deep/er/.vscode/tasks.json"), "{}"},
	}
	for _, c := range checks {
		if got := content(c.path); got != c.want {
			t.Errorf("%s: %q, want %q", c.path, got, c.want)
		}
	}
	for _, gone := range []string{"olddir/keep", "deltree/a", "repo/hooks/pre-commit", "deep/er/.vscode", "sub/.git", "sub2/.git", "newbare/hooks/post-receive"} {
		if _, err := os.Lstat(filepath.Join(host, gone)); !os.IsNotExist(err) {
			t.Errorf("%s should be absent: %v", gone, err)
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
	for _, c := range rep.Conflicts {
		conflicts = append(conflicts, strings.TrimPrefix(c.Path, host+"/"))
	}
	slices.Sort(conflicts)
	if want := []string{"deltree/racy", "racy.txt", "racydel.txt"}; !slices.Equal(conflicts, want) {
		t.Errorf("conflicts %q, want %q", conflicts, want)
	}
	var refused []string
	for _, r := range rep.Refused {
		refused = append(refused, strings.TrimPrefix(r.Path, host+"/")+" "+r.Rule)
	}
	slices.Sort(refused)
	want := []string{".bashrc protected", "deep/er/.vscode protected", "locked denyWrite",
		"newbare/hooks/post-receive git", "repo/config git", "repo/hooks/pre-commit git", "repo/sharedindex.1234 git", "sub/.git git", "sub2/.git git"}
	if !slices.Equal(refused, want) {
		t.Errorf("refused %q, want %q", refused, want)
	}
	if len(rep.Lost) > 0 {
		t.Errorf("lost: %q", rep.Lost)
	}
	assertNoTemps(t, host)
}

// assertNoTemps checks that no merge temporary is left below dir.
func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if d != nil && strings.HasPrefix(d.Name(), tempPrefix) {
			t.Errorf("temporary left on the host: %s", p)
		}
		return nil
	})
}

// TestMergeDeepAndUnreadable merges a chain of directories far deeper
// than PATH_MAX, and directories the command made unreadable.
func TestMergeDeepAndUnreadable(t *testing.T) {
	e := newMergeEnv(t)
	name := strings.Repeat("d", 200)
	fd, err := unix.Open(e.upper, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 40 { // 40 × 201 bytes: twice PATH_MAX
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := openDirAt(fd, name)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	wfd, err := unix.Openat(fd, ".bashrc", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(wfd, []byte("deep evil"))
	unix.Close(wfd)
	unix.Close(fd)
	write(t, filepath.Join(e.upper, "locked/inner/f"), "x")
	os.Chmod(filepath.Join(e.upper, "locked/inner"), 0o311)
	os.Chmod(filepath.Join(e.upper, "locked"), 0o311)
	rep := e.merge(&fsrules.Policy{}, coarseNow(), nil)
	if len(rep.Refused) != 1 || rep.Refused[0].Rule != "protected" || rep.Refused[0].Saved == "" {
		t.Errorf("the deep .bashrc was not refused and saved: %+v", rep.Refused)
	}
	if len(rep.Lost) > 0 {
		t.Errorf("lost: %q", rep.Lost)
	}
	assertContent(t, filepath.Join(e.host, "locked/inner/f"), "x")
	var st unix.Stat_t
	if unix.Stat(filepath.Join(e.host, "locked"), &st); st.Mode&0o777 != 0o311 {
		t.Errorf("locked has mode %o, want 311", st.Mode&0o777)
	}
	os.Chmod(filepath.Join(e.host, "locked/inner"), 0o755)
	os.Chmod(filepath.Join(e.host, "locked"), 0o755)
}

func assertContent(t *testing.T, p, want string) {
	t.Helper()
	if got := content(p); got != want {
		t.Errorf("%s = %q, want %q", p, got, want)
	}
}

// TestMergeInterruptedThenResumed stops a merge after each possible
// number of applied changes and runs it again: the result is always the
// complete merge, with nothing applied twice or lost.
func TestMergeInterruptedThenResumed(t *testing.T) {
	for stopAt := 1; stopAt <= 8; stopAt++ {
		for _, copyOnly := range []bool{false, true} {
			e := newMergeEnv(t)
			write(t, filepath.Join(e.host, "old/a"), "a")
			write(t, filepath.Join(e.host, "gone"), "g")
			time.Sleep(20 * time.Millisecond)
			start := coarseNow()
			u := upperTree{t, e.upper}
			u.opaqueDir("old")
			u.file("old/b", "b")
			u.file("new/c", "c")
			u.file("new/d", "d")
			u.whiteout("gone")
			u.file("e", "e")
			func() {
				defer func() { recover() }()
				e.merge(&fsrules.Policy{}, start, func(m *merger) {
					m.copyOnly = copyOnly
					m.afterEntry = func(n int) {
						if n == stopAt {
							panic("interrupted")
						}
					}
				})
			}()
			rep := e.merge(&fsrules.Policy{}, start, func(m *merger) { m.copyOnly = copyOnly })
			if len(rep.Conflicts)+len(rep.Lost) > 0 {
				t.Errorf("stop at %d (copy %v): conflicts %v lost %v", stopAt, copyOnly, rep.Conflicts, rep.Lost)
			}
			got := listing(e.host)
			if want := []string{"e", "new", "new/c", "new/d", "old", "old/b"}; !slices.Equal(got, want) {
				t.Errorf("stop at %d (copy %v): host holds %q, want %q", stopAt, copyOnly, got, want)
			}
		}
	}
}

func listing(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if p != dir {
			out = append(out, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// FuzzMerge merges an upper layer built from the fuzzer's bytes over a host
// tree, and checks what must hold whatever the upper layer: nothing outside
// the host directory changes, no protected or denied path changes on the
// host, no temporary is left, and every change is applied, refused,
// conflicting or named as lost.
func FuzzMerge(f *testing.F) {
	for _, s := range []string{"\x00a\x01b\x02.git\x03c", "\x04.bashrc\x05x\x06..", "\x00.git\x00hooks\x01pre-commit", "\x07\x07\x07d"} {
		f.Add([]byte(s))
	}
	names := []string{"a", "b", ".git", "hooks", "config", ".bashrc", ".vscode", "locked", "HEAD", "objects", "x", "link"}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			return
		}
		e := newMergeEnv(t)
		write(t, filepath.Join(e.outside, "secret"), "outside")
		write(t, filepath.Join(e.host, "locked"), "locked")
		write(t, filepath.Join(e.host, "a/.bashrc"), "rc")
		write(t, filepath.Join(e.host, ".git/HEAD"), "ref: refs/heads/main\n")
		write(t, filepath.Join(e.host, ".git/config"), "[core]\n")
		write(t, filepath.Join(e.host, ".git/hooks/pre-commit"), "hook")
		os.MkdirAll(filepath.Join(e.host, ".git/objects"), 0o755)
		os.Symlink(e.outside, filepath.Join(e.host, "link"))
		before := snapshot(e.host)
		dir := e.upper
		for i := 0; i+1 < len(ops); i += 2 {
			name := names[int(ops[i+1])%len(names)]
			p := filepath.Join(dir, name)
			switch ops[i] % 6 {
			case 0: // descend (a directory)
				if os.Mkdir(p, 0o755) == nil || isDir(p) {
					dir = p
				}
			case 1:
				os.WriteFile(p, []byte("evil"), 0o644)
			case 2:
				unix.Mknod(p, unix.S_IFCHR|0o600, 0)
			case 3:
				os.Symlink(e.outside, p)
			case 4:
				if isDir(p) {
					unix.Setxattr(p, "user.overlay.opaque", []byte("y"), 0)
				}
			case 5:
				dir = e.upper
			}
		}
		pol := &fsrules.Policy{DenyWrite: []fsrules.Path{{Path: filepath.Join(e.host, "locked"), Exists: true}}}
		rep := e.merge(pol, coarseNow(), nil)
		if got := content(filepath.Join(e.outside, "secret")); got != "outside" {
			t.Fatalf("outside changed: %q", got)
		}
		if ents, _ := os.ReadDir(e.outside); len(ents) != 1 {
			t.Fatalf("outside holds %d entries", len(ents))
		}
		for _, p := range []string{"locked", "a/.bashrc", ".git/hooks/pre-commit", ".git/config"} {
			if before[p] != "" && snapshot(e.host)[p] != before[p] {
				t.Fatalf("%s changed on the host: %q -> %q (refused %v)", p, before[p], snapshot(e.host)[p], rep.Refused)
			}
		}
		for p := range snapshot(e.host) {
			base := filepath.Base(p)
			if strings.HasPrefix(base, tempPrefix) {
				t.Fatalf("temporary left: %s", p)
			}
			if (base == ".bashrc" || base == ".vscode") && before[p] == "" {
				t.Fatalf("protected %s created on the host", p)
			}
		}
		if len(rep.Lost) > 0 {
			t.Fatalf("lost: %v", rep.Lost)
		}
	})
}

func isDir(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.IsDir()
}

// snapshot maps every path below dir to its type and content.
func snapshot(dir string) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel := strings.TrimPrefix(p, dir+"/")
		switch {
		case d.Type()&os.ModeSymlink != 0:
			t, _ := os.Readlink(p)
			out[rel] = "link:" + t
		case d.IsDir():
			out[rel] = "dir"
		default:
			out[rel] = "file:" + content(p)
		}
		return nil
	})
	return out
}

// FileClock is not before the ctime of any change made so far, a
// fine-grained one included (a file looked at, then changed again within
// the tick), and not after now; where it cannot make its file it is now.
func TestFileClockCoversEveryStamp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	ahead := 0
	for i := 0; i < 50; i++ {
		write(t, p, "a")
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		write(t, p, "b")
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		c := coarseNow()
		fc := FileClock(dir)
		if changed := time.Unix(st.Ctim.Unix()); fc.Before(changed) {
			t.Fatalf("FileClock %v is before a change stamped %v", fc, changed)
		}
		if now := time.Now(); fc.After(now) {
			t.Fatalf("FileClock %v is after now %v", fc, now)
		}
		if c.Sec < st.Ctim.Sec || c.Sec == st.Ctim.Sec && c.Nsec < st.Ctim.Nsec {
			ahead++
		}
	}
	t.Logf("%d of 50 changes were stamped ahead of the coarse clock (multigrain timestamps)", ahead)
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("FileClock left entries: %v", ents)
	}
	before := time.Now()
	if fc := FileClock(filepath.Join(dir, "missing")); fc.Before(before) {
		t.Errorf("FileClock of a missing dir %v is before now %v", fc, before)
	}
}

// renameUnchanged replaces a host entry only if it is still as the merge
// checked it, and never replaces one that appeared meanwhile: a host edit
// made while a large file was copied is kept.
func TestRenameUnchanged(t *testing.T) {
	dir := t.TempDir()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	host, tmp := filepath.Join(dir, "f"), filepath.Join(dir, "tmp")
	stat := func() *unix.Stat_t {
		var st unix.Stat_t
		if err := unix.Lstat(host, &st); err != nil {
			t.Fatal(err)
		}
		return &st
	}
	tests := []struct {
		name    string
		before  bool   // the host entry exists when checked
		between func() // the host's doing after the check
		want    error  // nil: replaced
		content string // the host file afterwards
	}{
		{"unchanged", true, func() {}, nil, "sandbox"},
		{"edited", true, func() { write(t, host, "host edit") }, errHostChanged, "host edit"},
		{"same size, old times", true, func() {
			write(t, host, "HOST")
			os.Chtimes(host, time.Unix(1e9, 0), time.Unix(1e9, 0))
		}, errHostChanged, "HOST"},
		{"replaced", true, func() { write(t, tmp+"2", "other"); os.Rename(tmp+"2", host) }, errHostChanged, "other"},
		{"still absent", false, func() {}, nil, "sandbox"},
		{"appeared", false, func() { write(t, host, "new on host") }, errHostChanged, "new on host"},
	}
	for _, tt := range tests {
		os.Remove(host)
		var hst *unix.Stat_t
		if tt.before {
			write(t, host, "host")
			hst = stat()
		}
		tt.between()
		write(t, tmp, "sandbox")
		err := renameUnchanged(fd, "tmp", fd, "f", hst)
		if !errors.Is(err, tt.want) && err != tt.want {
			t.Errorf("%s: err %v, want %v", tt.name, err, tt.want)
		}
		if b, _ := os.ReadFile(host); string(b) != tt.content {
			t.Errorf("%s: host holds %q, want %q", tt.name, b, tt.content)
		}
		os.Remove(tmp)
	}
}

// gitHolds names what a directory holds that git would run or follow once
// a new HEAD makes it a git directory.
func TestGitHolds(t *testing.T) {
	tests := []struct {
		files []string
		link  string
		want  string
	}{
		{files: []string{"README", "src/main.go"}, want: ""},
		{files: []string{"hooks/pre-commit.sample", "objects/ab/cd", "refs/heads/main", "info/exclude"}, want: ""},
		{files: []string{"hooks/reference-transaction"}, want: "hooks/reference-transaction"},
		{files: []string{"info/attributes"}, want: "info/attributes"},
		{files: []string{"objects/info/alternates"}, want: "objects/info/alternates"},
		{files: []string{"commondir"}, want: "commondir"},
		{files: []string{"rebase-merge/git-rebase-todo"}, want: "rebase-merge"},
		{link: "objects", want: "objects (a symbolic link)"},
		// An earlier run, before this was a git directory, linked it.
		{files: []string{"config"}, link: "=config", want: "config (a file with another name: a hard link)"},
		// An index an earlier run left, unchecked then: git would trust it.
		{files: []string{"index"}, want: "index (the index does not begin with DIRC)"},
		{files: []string{"refs/heads/main", "sharedindex.ab"}, want: "sharedindex.ab (the index does not begin with DIRC)"},
		{files: []string{"index=" + emptyIndex}, want: ""},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		for _, f := range tt.files {
			f, content, _ := strings.Cut(f, "=")
			p := filepath.Join(dir, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if l, hard := strings.CutPrefix(tt.link, "="); hard {
			if err := os.Link(filepath.Join(dir, l), filepath.Join(dir, "notes.txt")); err != nil {
				t.Fatal(err)
			}
		} else if tt.link != "" {
			if err := os.Symlink("/tmp", filepath.Join(dir, tt.link)); err != nil {
				t.Fatal(err)
			}
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := gitHolds(fd); got != tt.want {
			t.Errorf("%v %q: gitHolds = %q, want %q", tt.files, tt.link, got, tt.want)
		}
		unix.Close(fd)
	}
}

// TestMergeNeverLinksAGuardedFile: a hard link the command made to a file
// the policy guards (.git/config, .bashrc) must not come back as a second
// name of the host's file, whatever order the merge meets the names in,
// and whether the guarded file itself changed (harmlessly) or not: a
// later ordinary write on the host to a1.txt would rewrite the config
// unchecked.
func TestMergeNeverLinksAGuardedFile(t *testing.T) {
	for _, changed := range []bool{false, true} {
		e := newMergeEnv(t)
		config := "[core]\n\tbare = false\n"
		write(t, filepath.Join(e.host, ".git/HEAD"), "ref: refs/heads/main\n")
		write(t, filepath.Join(e.host, ".git/config"), config)
		write(t, filepath.Join(e.host, ".bashrc"), "rc\n")
		time.Sleep(20 * time.Millisecond) // past the coarse clock's tick
		start := coarseNow()
		u := upperTree{t, e.upper}
		newConfig := config
		if changed {
			newConfig += "[user]\n\tname = sandbox\n" // a harmless key: the change is applied
		}
		u.file(".git/config", newConfig)
		u.file(".bashrc", "rc\n")
		// Copied up, as overlayfs does before a link: times kept.
		for _, f := range []string{".git/config", ".bashrc"} {
			if fi, err := os.Stat(filepath.Join(e.host, f)); err == nil {
				os.Chtimes(filepath.Join(e.upper, f), fi.ModTime(), fi.ModTime())
			}
		}
		var names []string
		for i := range 12 {
			for _, src := range []string{".git/config", ".bashrc"} {
				n := fmt.Sprintf("%s%d.txt", strings.Trim(filepath.Base(src), "."), i)
				if err := os.Link(filepath.Join(e.upper, src), filepath.Join(e.upper, n)); err != nil {
					t.Fatal(err)
				}
				names = append(names, n)
			}
		}
		rep := e.merge(&fsrules.Policy{Home: "/nonexistent"}, start, nil)
		if len(rep.Lost)+len(rep.Refused)+len(rep.Conflicts) > 0 {
			t.Fatalf("lost %v, refused %+v, conflicts %+v", rep.Lost, rep.Refused, rep.Conflicts)
		}
		assertContent(t, filepath.Join(e.host, ".git/config"), newConfig)
		for _, guarded := range []string{".git/config", ".bashrc"} {
			var g unix.Stat_t
			if err := unix.Stat(filepath.Join(e.host, guarded), &g); err != nil {
				t.Fatal(err)
			}
			if g.Nlink != 1 {
				t.Errorf("changed=%v: host %s has %d names", changed, guarded, g.Nlink)
			}
		}
		for _, n := range names {
			want := "rc\n"
			if strings.HasPrefix(n, "config") {
				want = newConfig
			}
			assertContent(t, filepath.Join(e.host, n), want) // every name arrived
		}
	}
}

// A host entry that appeared during the run where the command made a
// directory is one conflict, the command's version saved: not a second
// one saying the command deleted it.
func TestMergeReplacedEntryIsOneConflict(t *testing.T) {
	e := newMergeEnv(t)
	start := coarseNow()
	time.Sleep(20 * time.Millisecond)
	if err := os.Symlink(e.outside, filepath.Join(e.host, "nl")); err != nil {
		t.Fatal(err)
	}
	u := upperTree{t, e.upper}
	u.file("nl/x", "CMD\n")
	rep := e.merge(&fsrules.Policy{Home: "/nonexistent"}, start, nil)
	if len(rep.Conflicts) != 1 || rep.Conflicts[0].Saved == "" {
		t.Errorf("conflicts: %+v", rep.Conflicts)
	}
	if _, err := os.Stat(filepath.Join(e.outside, "x")); err == nil {
		t.Error("written through the host's link")
	}
}

// linkedHost makes host files a, b and c one inode, stamped before the
// run starts, and returns the run's start.
func linkedHost(t *testing.T, e *mergeEnv, content string) unix.Timespec {
	write(t, filepath.Join(e.host, "a"), content)
	for _, n := range []string{"b", "c"} {
		if err := os.Link(filepath.Join(e.host, "a"), filepath.Join(e.host, n)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond) // past the coarse clock's tick
	return coarseNow()
}

// Removing or replacing several names of one host inode is no conflict:
// the merge's own unlink moves the other names' ctime (rm of a pnpm
// store's links, of a local clone's objects, reported as changed on the
// host and left behind).
func TestMergeOwnUnlinksAreNoConflict(t *testing.T) {
	e := newMergeEnv(t)
	start := linkedHost(t, e, "x\n")
	u := upperTree{t, e.upper}
	u.whiteout("a")
	u.whiteout("b")
	u.file("c", "new\n")
	rep := e.merge(&fsrules.Policy{Home: "/nonexistent"}, start, nil)
	if len(rep.Conflicts)+len(rep.Lost)+len(rep.Refused) > 0 {
		t.Fatalf("conflicts %+v lost %v refused %+v", rep.Conflicts, rep.Lost, rep.Refused)
	}
	assertContent(t, filepath.Join(e.host, "c"), "new\n")
	for _, n := range []string{"a", "b"} {
		if _, err := os.Lstat(filepath.Join(e.host, n)); err == nil {
			t.Errorf("%s was not removed", n)
		}
	}
}

// A mode or time change to one name of a host file with several names
// replaces that name, as the sandbox saw it: the other names (a denyWrite
// file, a file outside the writable root) keep theirs.
func TestMergeModeChangeStaysWithItsName(t *testing.T) {
	e := newMergeEnv(t)
	linkedHost(t, e, "x\n")
	os.Chmod(filepath.Join(e.host, "a"), 0o600) // moves the ctime: a new start after it
	time.Sleep(20 * time.Millisecond)
	start := coarseNow()
	u := upperTree{t, e.upper}
	u.file("b", "x\n")
	os.Chmod(filepath.Join(e.upper, "b"), 0o644)
	old := time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)
	u.file("c", "x\n")
	os.Chmod(filepath.Join(e.upper, "c"), 0o600)
	os.Chtimes(filepath.Join(e.upper, "c"), old, old)
	pol := &fsrules.Policy{Home: "/nonexistent", DenyWrite: []fsrules.Path{{Path: filepath.Join(e.host, "a"), Origin: "test"}}}
	rep := e.merge(pol, start, nil)
	if len(rep.Conflicts)+len(rep.Lost)+len(rep.Refused) > 0 {
		t.Fatalf("conflicts %+v lost %v refused %+v", rep.Conflicts, rep.Lost, rep.Refused)
	}
	var a, b, c unix.Stat_t
	unix.Stat(filepath.Join(e.host, "a"), &a)
	unix.Stat(filepath.Join(e.host, "b"), &b)
	unix.Stat(filepath.Join(e.host, "c"), &c)
	if a.Mode&0o777 != 0o600 || a.Mtim.Sec == old.Unix() {
		t.Errorf("the denyWrite name changed: mode %o mtime %d", a.Mode&0o777, a.Mtim.Sec)
	}
	if b.Mode&0o777 != 0o644 || c.Mtim.Sec != old.Unix() {
		t.Errorf("the command's names: b mode %o, c mtime %d", b.Mode&0o777, c.Mtim.Sec)
	}
	if a.Ino == b.Ino || a.Ino == c.Ino {
		t.Error("a changed name still shares the denyWrite file's inode")
	}
}

// A git directory or its config made writable by every user is refused
// (another user could plant a hook); group write follows the umask.
func TestMergeRefusesWorldWritableGitDir(t *testing.T) {
	e := newMergeEnv(t)
	write(t, filepath.Join(e.host, ".git/HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(e.host, ".git/config"), "[core]\n")
	os.MkdirAll(filepath.Join(e.host, ".git/hooks"), 0o755)
	os.Chmod(filepath.Join(e.host, ".git"), 0o755)
	for _, f := range []string{".git/HEAD", ".git/config"} {
		os.Chmod(filepath.Join(e.host, f), 0o644)
	}
	time.Sleep(20 * time.Millisecond)
	start := coarseNow()
	u := upperTree{t, e.upper}
	u.file(".git/config", "[core]\n")
	fi, _ := os.Stat(filepath.Join(e.host, ".git/config"))
	os.Chtimes(filepath.Join(e.upper, ".git/config"), fi.ModTime(), fi.ModTime())
	os.Chmod(filepath.Join(e.upper, ".git/config"), 0o666)
	os.MkdirAll(filepath.Join(e.upper, ".git/hooks"), 0o777)
	os.Chmod(filepath.Join(e.upper, ".git/hooks"), 0o777)
	os.Chmod(filepath.Join(e.upper, ".git"), 0o777)
	// New ones (git init under a umask of 000) arrive without the bit.
	u.file(".git/description", "d\n")
	os.Chmod(filepath.Join(e.upper, ".git/description"), 0o666)
	os.MkdirAll(filepath.Join(e.upper, ".git/refs"), 0o777)
	os.Chmod(filepath.Join(e.upper, ".git/refs"), 0o777)
	rep := e.merge(&fsrules.Policy{Home: "/nonexistent"}, start, nil)
	assertContent(t, filepath.Join(e.host, ".git/description"), "d\n")
	for _, f := range []string{".git", ".git/hooks", ".git/config", ".git/description", ".git/refs"} {
		if fi, err := os.Stat(filepath.Join(e.host, f)); err != nil || fi.Mode().Perm()&0o002 != 0 {
			t.Errorf("%s: %v %v", f, fi.Mode(), err)
		}
	}
	if len(rep.Refused) != 3 {
		t.Errorf("refused: %+v", rep.Refused)
	}
}

// A refused file that shares its inode with an applied one is saved as a
// copy: the saved evidence must not change with later writes to the
// workspace file.
func TestMergeSavesACopyOfALinkedRefusal(t *testing.T) {
	e := newMergeEnv(t)
	write(t, filepath.Join(e.host, ".git/HEAD"), "ref: refs/heads/main\n")
	time.Sleep(20 * time.Millisecond)
	start := coarseNow()
	u := upperTree{t, e.upper}
	u.file("n1", "n\n")
	os.MkdirAll(filepath.Join(e.upper, ".git/hooks"), 0o755)
	if err := os.Link(filepath.Join(e.upper, "n1"), filepath.Join(e.upper, ".git/hooks/pre-commit")); err != nil {
		t.Fatal(err)
	}
	rep := e.merge(&fsrules.Policy{Home: "/nonexistent"}, start, nil)
	var n1 unix.Stat_t
	if err := unix.Stat(filepath.Join(e.host, "n1"), &n1); err != nil {
		t.Fatal(err)
	}
	if len(rep.Refused) == 0 {
		t.Fatalf("nothing refused: %+v", rep)
	}
	for _, r := range rep.Refused {
		var sv unix.Stat_t
		if r.Saved == "" || unix.Stat(r.Saved, &sv) != nil {
			t.Errorf("%s: not saved (%q)", r.Path, r.Saved)
		} else if sv.Ino == n1.Ino {
			t.Errorf("%s is saved as another name of the workspace's n1", r.Path)
		}
	}
}

// A host edit made during the merge to another name of a file the merge
// took a name of away is still a conflict, even keeping the size and the
// mtime: only the merge's own step is forgiven.
func TestMergeHostEditAfterItsOwnStepIsAConflict(t *testing.T) {
	e := newMergeEnv(t)
	write(t, filepath.Join(e.host, "a"), "x\n")
	if err := os.Link(filepath.Join(e.host, "a"), filepath.Join(e.host, "b")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	start := coarseNow()
	u := upperTree{t, e.upper}
	u.whiteout("a")
	u.file("b", "y\n")
	edited := ""
	rep := e.merge(&fsrules.Policy{Home: "/nonexistent"}, start, func(m *merger) {
		m.afterEntry = func(n int) {
			if n != 1 {
				return
			}
			time.Sleep(20 * time.Millisecond) // past the step's clock tick
			for _, name := range []string{"a", "b"} {
				p := filepath.Join(e.host, name)
				var st unix.Stat_t
				if unix.Stat(p, &st) != nil || st.Nlink < 2 && name == "b" && content(p) == "y\n" {
					continue // gone, or already the command's
				}
				f, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err != nil {
					continue
				}
				f.WriteString("Z\n") // same size, in place
				f.Close()
				unix.UtimesNano(p, []unix.Timespec{st.Atim, st.Mtim})
				edited = p
				return
			}
		}
	})
	if edited == "" {
		t.Fatal("no name left to edit")
	}
	assertContent(t, edited, "Z\n")
	if len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != edited {
		t.Errorf("conflicts: %+v (edited %s)", rep.Conflicts, edited)
	}
}

// A file overlayfs copied up carries its own attribute (user.overlay.origin
// with userxattr): the merge drops it and moves the file by rename, the
// same inode, not a copy (a copy writes the whole file and syncs it: a
// line appended to a 200 MiB log cost 0.4 s). An attribute the command set
// (user.*, or user.overlay.* stored escaped) still has the file copied,
// and none reaches the host.
func TestMergeMovesACopiedUpFile(t *testing.T) {
	e := newMergeEnv(t)
	for _, n := range []string{"origin", "escaped", "both"} {
		write(t, filepath.Join(e.host, n), "host\n")
	}
	time.Sleep(20 * time.Millisecond)
	start := coarseNow()
	u := upperTree{t, e.upper}
	attrs := map[string][]string{
		"origin":  {"user.overlay.origin"},
		"escaped": {"user.overlay.overlay.whiteout"},
		"both":    {"user.overlay.origin", "user.mine"},
	}
	ino := map[string]uint64{}
	for n, names := range attrs {
		u.file(n, "command's "+n+"\n")
		for _, a := range names {
			if err := unix.Setxattr(filepath.Join(e.upper, n), a, nil, 0); err != nil {
				t.Skipf("no user xattrs here: %v", err)
			}
		}
		var st unix.Stat_t
		unix.Stat(filepath.Join(e.upper, n), &st)
		ino[n] = st.Ino
	}
	rep := e.merge(&fsrules.Policy{Home: "/nonexistent"}, start, nil)
	if len(rep.Conflicts)+len(rep.Lost)+len(rep.Refused) > 0 {
		t.Fatalf("conflicts %+v lost %v refused %+v", rep.Conflicts, rep.Lost, rep.Refused)
	}
	for n := range attrs {
		p := filepath.Join(e.host, n)
		assertContent(t, p, "command's "+n+"\n")
		buf := make([]byte, 1024)
		if k, err := unix.Llistxattr(p, buf); err != nil || k > 0 {
			t.Errorf("%s arrived with attributes %q (%v)", n, buf[:max(k, 0)], err)
		}
		var st unix.Stat_t
		unix.Stat(p, &st)
		if moved := st.Ino == ino[n]; moved != (n == "origin") {
			t.Errorf("%s: moved by rename %v, want %v", n, moved, n == "origin")
		}
	}
}

// A HEAD the command replaced by something that is not a file (a socket,
// a fifo, a whiteout) or by other text hides no repository from the
// merge: the host's HEAD still makes it one, for git and for the checks
// (a hook and an fsmonitor reached the host of a nested bare repository
// and of a linked worktree's common directory, and ran there).
func TestMergeSeesTheHostsHEAD(t *testing.T) {
	heads := map[string]func(p string) error{
		"socket": func(p string) error {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Bind(fd, &unix.SockaddrUnix{Name: p})
		},
		"fifo":     func(p string) error { return unix.Mkfifo(p, 0o644) },
		"whiteout": func(p string) error { return unix.Mknod(p, unix.S_IFCHR|0o600, 0) },
		"text":     func(p string) error { return os.WriteFile(p, []byte("not a ref\n"), 0o644) },
	}
	for kind, mk := range heads {
		for _, root := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/root=%v", kind, root), func(t *testing.T) {
				e := newMergeEnv(t)
				repo, up := filepath.Join(e.host, "srv"), filepath.Join(e.upper, "srv")
				if root {
					repo, up = e.host, e.upper
				}
				write(t, filepath.Join(repo, "HEAD"), "ref: refs/heads/main\n")
				write(t, filepath.Join(repo, "config"), "[core]\n\tbare = true\n")
				os.MkdirAll(filepath.Join(repo, "hooks"), 0o755)
				os.MkdirAll(up, 0o755)
				if err := mk(filepath.Join(up, "HEAD")); err != nil {
					t.Skipf("cannot make a %s HEAD here: %v", kind, err)
				}
				write(t, filepath.Join(up, "hooks/post-receive"), "#!/bin/sh\n")
				write(t, filepath.Join(up, "config"), "[core]\n\tbare = true\n\tfsmonitor = /tmp/evil\n")
				e.merge(&fsrules.Policy{Home: "/nonexistent"}, coarseNow(), nil)
				if _, err := os.Lstat(filepath.Join(repo, "hooks/post-receive")); err == nil {
					t.Error("the hook reached the host")
				}
				assertContent(t, filepath.Join(repo, "config"), "[core]\n\tbare = true\n")
			})
		}
	}
}

// A host entry that appears where the command made a new directory after
// the merge looked (a link, a directory) is a conflict: the command's tree
// is saved aside, nothing is written through the link, and the host's
// directory keeps its mode (it was reported lost, or took the command's
// mode).
func TestMergeNewDirectoryRacedByTheHost(t *testing.T) {
	for _, kind := range []string{"link", "dir"} {
		t.Run(kind, func(t *testing.T) {
			e := newMergeEnv(t)
			u := upperTree{t, e.upper}
			u.file("d/f", "command\n")
			os.Chmod(filepath.Join(e.upper, "d"), 0o777)
			var st unix.Stat_t
			unix.Lstat(filepath.Join(e.upper, "d"), &st)
			// The host's entry comes after the merge's look (hst nil).
			if kind == "link" {
				os.Symlink(e.outside, filepath.Join(e.host, "d"))
			} else {
				os.Mkdir(filepath.Join(e.host, "d"), 0o700)
			}
			m, up, host := e.merger(&fsrules.Policy{Home: "/nonexistent"}, coarseNow())
			s := scope{root: e.host, path: e.host}
			m.subdir(up, host, "d", &st, nil, s.child("d"))
			if len(m.rep.Conflicts) != 1 || m.rep.Conflicts[0].Saved == "" || len(m.rep.Lost) > 0 {
				t.Fatalf("conflicts %+v lost %q", m.rep.Conflicts, m.rep.Lost)
			}
			assertContent(t, filepath.Join(m.rep.Conflicts[0].Saved, "f"), "command\n")
			if ents, _ := os.ReadDir(e.outside); len(ents) > 0 {
				t.Error("written through the host's link")
			}
			if fi, err := os.Stat(filepath.Join(e.host, "d")); kind == "dir" && (err != nil || fi.Mode().Perm() != 0o700) {
				t.Errorf("the host's directory: %v %v", fi, err)
			}
		})
	}
}

// A linked worktree's common directory whose HEAD an earlier run removed
// is still a git directory (git reaches it by commondir and never wants its
// HEAD; its objects and refs say what it is), nested or as the root; and a
// root named like a bare repository is one, as a nested directory is (the
// name was checked for nested directories only, and a hook and an
// fsmonitor key reached both kinds of root and ran).
func TestMergeGitDirsWithoutHEAD(t *testing.T) {
	cases := []struct {
		name   string
		layout func(t *testing.T, repo string)
		root   string // the host root's name ("" for newMergeEnv's)
	}{
		{"common dir, nested", commonDirWithoutHEAD, ""},
		{"common dir, root", commonDirWithoutHEAD, ""},
		{"empty root named x.git", func(*testing.T, string) {}, "new.git"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newMergeEnv(t)
			if c.root != "" {
				e.host = filepath.Join(filepath.Dir(e.host), c.root)
				os.Mkdir(e.host, 0o755)
			}
			repo, up := filepath.Join(e.host, "common"), filepath.Join(e.upper, "common")
			if i > 0 {
				repo, up = e.host, e.upper
			}
			c.layout(t, repo)
			time.Sleep(20 * time.Millisecond)
			start := coarseNow()
			write(t, filepath.Join(up, "hooks/post-checkout"), "#!/bin/sh\n")
			write(t, filepath.Join(up, "config"), "[core]\n\tfsmonitor = /tmp/evil\n")
			e.merge(&fsrules.Policy{Home: "/nonexistent"}, start, nil)
			if _, err := os.Lstat(filepath.Join(repo, "hooks/post-checkout")); err == nil {
				t.Error("the hook reached the host")
			}
			if b, _ := os.ReadFile(filepath.Join(repo, "config")); strings.Contains(string(b), "fsmonitor") {
				t.Errorf("the config reached the host: %q", b)
			}
		})
	}
}

// commonDirWithoutHEAD lays out a linked worktree's common directory with
// no HEAD.
func commonDirWithoutHEAD(t *testing.T, repo string) {
	write(t, filepath.Join(repo, "config"), "[core]\n\tbare = true\n")
	write(t, filepath.Join(repo, "worktrees/wt/commondir"), "../..\n")
	write(t, filepath.Join(repo, "refs/heads/main"), "0123456789012345678901234567890123456789\n")
	os.MkdirAll(filepath.Join(repo, "objects/info"), 0o755)
	os.MkdirAll(filepath.Join(repo, "hooks"), 0o755)
}

// Two names of a file with the command's attribute arrive as two names of
// one copy without it (they arrived as two files).
func TestMergeKeepsTheNamesOfACopiedFile(t *testing.T) {
	e := newMergeEnv(t)
	u := upperTree{t, e.upper}
	u.file("a", "x\n")
	if err := unix.Setxattr(filepath.Join(e.upper, "a"), "user.mine", []byte("1"), 0); err != nil {
		t.Skipf("no user xattrs here: %v", err)
	}
	os.MkdirAll(filepath.Join(e.upper, "d"), 0o755)
	if err := os.Link(filepath.Join(e.upper, "a"), filepath.Join(e.upper, "d/b")); err != nil {
		t.Fatal(err)
	}
	rep := e.merge(&fsrules.Policy{Home: "/nonexistent"}, coarseNow(), nil)
	if len(rep.Lost)+len(rep.Conflicts)+len(rep.Refused) > 0 {
		t.Fatalf("%+v", rep)
	}
	var a, b unix.Stat_t
	unix.Lstat(filepath.Join(e.host, "a"), &a)
	unix.Lstat(filepath.Join(e.host, "d/b"), &b)
	buf := make([]byte, 256)
	if n, _ := unix.Llistxattr(filepath.Join(e.host, "a"), buf); a.Ino != b.Ino || n > 0 {
		t.Errorf("a and d/b: inodes %d and %d, attributes %q", a.Ino, b.Ino, buf[:max(n, 0)])
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

// A FIFO in a git directory is refused: git on the host, and sbx reading a
// git config for the next policy, would wait on it for good (a red-team
// pass hung every later run of the user on one, under the merge lock).
func TestMergeRefusesAFIFOInAGitDirectory(t *testing.T) {
	e := newMergeEnv(t)
	write(t, filepath.Join(e.host, ".git/HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(e.host, ".git/config"), "[core]\n\tbare = false\n")
	os.MkdirAll(filepath.Join(e.host, ".git/objects"), 0o755)
	os.MkdirAll(filepath.Join(e.host, ".git/refs"), 0o755)
	time.Sleep(20 * time.Millisecond)
	start := coarseNow()
	write(t, filepath.Join(e.upper, ".git/modules/x/HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(e.upper, "sub/.git/HEAD"), "ref: refs/heads/main\n")
	os.MkdirAll(filepath.Join(e.upper, "sub/.git/objects"), 0o755)
	os.MkdirAll(filepath.Join(e.upper, "sub/.git/refs"), 0o755)
	fifos := []string{".git/modules/x/config", ".git/index", "sub/.git/config", "plain/fifo"}
	for _, f := range fifos {
		os.MkdirAll(filepath.Dir(filepath.Join(e.upper, f)), 0o755)
		if err := unix.Mkfifo(filepath.Join(e.upper, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep := e.merge(&fsrules.Policy{Home: "/nonexistent"}, start, nil)
	for _, f := range fifos[:3] {
		if _, err := os.Lstat(filepath.Join(e.host, f)); err == nil {
			t.Errorf("%s reached the host", f)
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(e.host, "plain/fifo"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		t.Errorf("a FIFO outside git directories did not arrive: %v", err)
	}
	if len(rep.Refused) < 3 {
		t.Errorf("refusals: %+v", rep.Refused)
	}
}

// A huge file of the same size on both sides (a sparse one costs the
// command nothing) is not compared byte for byte: its comparison held the
// user-wide merge lock for hours (a red-team pass).
func TestMergeDoesNotCompareAHugeFile(t *testing.T) {
	e := newMergeEnv(t)
	const size = 1 << 40
	for _, d := range []string{e.host, e.upper} {
		if err := os.Truncate(filepath.Join(d, "huge"), 0); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(d, "huge"))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Skipf("no sparse file of 1 TiB here: %v", err)
		}
		f.Close()
	}
	start := coarseNow()
	done := make(chan *MergeReport, 1)
	go func() { done <- e.merge(&fsrules.Policy{Home: "/nonexistent"}, start, nil) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the merge still compares the file after 30 s")
	}
	if fi, err := os.Stat(filepath.Join(e.host, "huge")); err != nil || fi.Size() != size {
		t.Errorf("the host's file: %v %v", fi, err)
	}
}

// The object names' length an index is checked with is the repository's
// format as it stands after the merge: a linked worktree's is its common
// directory's (the worktree's own config is never read for it), an
// existing config's stays (a change to it is refused), a new repository's
// is the command's config if the merge takes it (red-team findings: each
// of these let an index that git reads as .git/hooks/… through).
func TestIndexSHA256(t *testing.T) {
	sha256cfg := "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha256\n"
	tests := []struct {
		name                 string
		host, up, commonConf map[string]string
		want, known          bool
	}{
		{"new repository", nil, map[string]string{"config": sha256cfg}, nil, true, true},
		{"new repository, config refused", nil, map[string]string{"config": sha256cfg + "[core]\n\tfsmonitor = x\n"}, nil, false, true},
		{"existing repository keeps its format", map[string]string{"config": "[core]\n\tbare = false\n"}, map[string]string{"config": sha256cfg}, nil, false, true},
		{"existing SHA-256 repository", map[string]string{"config": sha256cfg}, nil, nil, true, true},
		{"worktree of a SHA-256 repository", map[string]string{"commondir": "../..\n"}, map[string]string{"config": "[core]\n"}, map[string]string{"config": sha256cfg}, true, true},
		{"worktree, own config says SHA-256", map[string]string{"commondir": "../..\n", "config": sha256cfg}, map[string]string{"config": sha256cfg}, map[string]string{"config": "[core]\n"}, false, true},
		{"worktree, no common config", map[string]string{"commondir": "../..\n"}, nil, nil, false, false},
	}
	for _, tt := range tests {
		root := t.TempDir()
		common := filepath.Join(root, "common")
		g := filepath.Join(common, "worktrees", "wt")
		up := filepath.Join(root, "up")
		for dir, files := range map[string]map[string]string{g: tt.host, up: tt.up, common: tt.commonConf} {
			os.MkdirAll(dir, 0o755)
			for name, content := range files {
				os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
			}
		}
		hostFD, _ := unix.Open(g, unix.O_DIRECTORY|unix.O_RDONLY, 0)
		upFD, _ := unix.Open(up, unix.O_DIRECTORY|unix.O_RDONLY, 0)
		got, known := indexSHA256(upFD, hostFD, g)
		unix.Close(hostFD)
		unix.Close(upFD)
		if got != tt.want || known != tt.known {
			t.Errorf("%s: sha256 %v known %v, want %v %v", tt.name, got, known, tt.want, tt.known)
		}
	}
}
