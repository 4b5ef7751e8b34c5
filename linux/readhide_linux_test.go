package linux

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestReadRoots(t *testing.T) {
	d := t.TempDir()
	for _, f := range []string{"home/.npmrc", "home/plain", "home/sub/x", "home/.ssh/id", "home/.config/gh/hosts", "home/.config/other", "w/a",
		"up/.env", "up/.env.local", "up/keep", "up/secret", "up2/.env", "up2/keep"} {
		mkfile(t, filepath.Join(d, f), "x")
	}
	os.Symlink(filepath.Join(d, "home/.ssh"), filepath.Join(d, "home/link"))
	os.Symlink(filepath.Join(d, "home"), filepath.Join(d, "via"))
	hidden := []string{filepath.Join(d, "via/.npmrc"), filepath.Join(d, "home/.ssh"), filepath.Join(d, "home/.config"), filepath.Join(d, "up/secret")}
	readable := []string{filepath.Join(d, "home/.config/gh")}
	var roots []string
	// A name pattern applies where something else is hidden (up), not
	// where nothing is (up2: the whole folder stays readable, as its
	// files the host saves during a run).
	names := []HiddenName{{Dir: filepath.Join(d, "up"), Name: ".env*"}, {Dir: filepath.Join(d, "up2"), Name: ".env*"}}
	err := readRoots(hidden, names, readable, func(dirfd int, dir, name string) error {
		if dirfd != unix.AT_FDCWD {
			name = filepath.Join(dir, name)
		}
		roots = append(roots, name)
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"home/plain", "home/sub", "home/.config/gh", "w", "up/keep", "up2"} {
		if !slices.Contains(roots, filepath.Join(d, want)) {
			t.Errorf("%s not a root: %q", want, roots)
		}
	}
	// Neither the hidden paths, nor the directories that hold them, nor
	// links (the link through which a hidden path was named included).
	for _, not := range []string{"home/.npmrc", "home/.ssh", "home", "home/link", "via", "home/.config", "", "up", "up/.env", "up/.env.local", "up/secret"} {
		if slices.Contains(roots, filepath.Join(d, not)) {
			t.Errorf("%s is a root: %q", not, roots)
		}
	}
	for _, r := range roots {
		for _, h := range []string{"home/.npmrc", "home/.ssh"} {
			if strings.HasPrefix(filepath.Join(d, h), r+"/") {
				t.Errorf("root %s holds %s", r, h)
			}
		}
	}
}

func mkfile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const restrictSpecEnv = "SBX_TEST_RESTRICT_SPEC"

// helperSpec is the InitSpec a test's helper process gets in the
// environment variable env; it skips the helper when run as a test of its
// own (the variable unset).
func helperSpec(t *testing.T, env, of string) InitSpec {
	t.Helper()
	raw := os.Getenv(env)
	if raw == "" {
		t.Skip("the helper of " + of)
	}
	var spec InitSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

// requireLandlock skips a test where the kernel has no Landlock, and fails
// it in CI.
func requireLandlock(t *testing.T) {
	t.Helper()
	if _, err := LandlockABI(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Landlock: %v", err)
		}
		t.Skipf("no Landlock: %v", err)
	}
}

// On this host's kernel: with paths hidden, the restricted process reads
// the files around them and a mask still in place, but not a hidden path,
// a mask that is not the file sbx bound, nor a file the host puts beside
// them (or over a mask) after the rules were made.
func TestRestrictKeepsReplacedFilesUnreadable(t *testing.T) {
	requireLandlock(t)
	d := t.TempDir()
	home, w := filepath.Join(d, "home"), filepath.Join(d, "w")
	for _, f := range []string{"home/.npmrc", "home/other-mask", "home/plain", "home/sub/x", "home/.ssh/id", "w/a"} {
		mkfile(t, filepath.Join(d, f), "content")
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(home, ".npmrc"), &st); err != nil {
		t.Fatal(err)
	}
	spec := InitSpec{
		Writable: []string{w},
		Hidden:   []string{filepath.Join(home, ".npmrc"), filepath.Join(home, "other-mask"), filepath.Join(home, ".ssh")},
		Masks: []MaskFile{{Path: filepath.Join(home, ".npmrc"), Dev: uint64(st.Dev), Ino: st.Ino},
			{Path: filepath.Join(home, "other-mask"), Dev: uint64(st.Dev), Ino: st.Ino}},
	}
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRestrictHelper$")
	cmd.Env = append(os.Environ(), restrictSpecEnv+"="+string(b))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	sc := bufio.NewScanner(out)
	// Renames and links into another writable directory still work: a
	// domain that does not grant LANDLOCK_ACCESS_FS_REFER refuses them
	// (EXDEV: cargo's and git's renames failed).
	if !sc.Scan() || sc.Text() != "refer ok" {
		t.Errorf("a rename or link into another directory of a writable root: %q", sc.Text())
	}
	read := func(paths ...string) map[string]bool {
		fmt.Fprintln(in, strings.Join(paths, "\x00"))
		got := map[string]bool{}
		for range paths {
			if !sc.Scan() {
				t.Fatalf("helper: no answer")
			}
			p, res, _ := strings.Cut(sc.Text(), "\x00")
			got[p] = res == "ok"
		}
		return got
	}
	check := func(got map[string]bool, rel string, want bool) {
		t.Helper()
		if got[filepath.Join(d, rel)] != want {
			t.Errorf("%s readable = %v, want %v", rel, !want, want)
		}
	}
	p := func(rel string) string { return filepath.Join(d, rel) }
	got := read(p("home/.npmrc"), p("home/other-mask"), p("home/plain"), p("home/sub/x"), p("home/.ssh/id"), p("w/a"))
	check(got, "home/.npmrc", true)
	check(got, "home/other-mask", false)
	check(got, "home/plain", true)
	check(got, "home/sub/x", true)
	check(got, "home/.ssh/id", false)
	check(got, "w/a", true)
	// The host replaces the mask's path and puts a new file beside it.
	mkfile(t, p("home/.npmrc.new"), "SECRET")
	if err := os.Rename(p("home/.npmrc.new"), p("home/.npmrc")); err != nil {
		t.Fatal(err)
	}
	mkfile(t, p("home/new"), "SECRET")
	got = read(p("home/.npmrc"), p("home/new"), p("home/plain"))
	check(got, "home/.npmrc", false)
	check(got, "home/new", false)
	check(got, "home/plain", true)
	in.Close()
}

// TestRestrictHelper is TestRestrictKeepsReplacedFilesUnreadable's
// restricted process: it reads the NUL-separated paths of each line of
// stdin and answers one line per path.
func TestRestrictHelper(t *testing.T) {
	spec := helperSpec(t, restrictSpecEnv, "TestRestrictKeepsReplacedFilesUnreadable")
	runtime.LockOSThread() // the rules hold for this thread only
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	abi, err := LandlockABI()
	if err != nil {
		t.Fatal(err)
	}
	if err := restrictWrites(abi, spec.Writable); err != nil {
		t.Fatal(err)
	}
	fd, err := readRuleset(abi, &spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := restrictSelf(fd); err != nil {
		t.Fatal(err)
	}
	w := spec.Writable[0]
	res := "refer ok"
	if err := os.MkdirAll(filepath.Join(w, "sub"), 0o755); err != nil {
		res = err.Error()
	} else if err := os.Rename(filepath.Join(w, "a"), filepath.Join(w, "sub", "a")); err != nil {
		res = err.Error()
	} else if err := os.Link(filepath.Join(w, "sub", "a"), filepath.Join(w, "b")); err != nil {
		res = err.Error()
	} else if err := os.Rename(filepath.Join(w, "sub", "a"), filepath.Join(w, "a")); err != nil {
		res = err.Error()
	}
	fmt.Println(res)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		for _, p := range strings.Split(sc.Text(), "\x00") {
			res := "ok"
			if _, err := os.ReadFile(p); err != nil {
				res = err.Error()
			}
			fmt.Printf("%s\x00%s\n", p, res)
		}
	}
}

// Name patterns alone (.env* above a workspace with nothing hidden near
// it) make no read domain: one would hold no rule for the rest of the
// file system, and the command could read nothing. (An earlier commit
// of this session did that: /bin/bash was refused.)
func TestNoReadRulesForNamesAlone(t *testing.T) {
	requireLandlock(t)
	fd, err := readRuleset(7, &InitSpec{Writable: []string{"/tmp"}, HiddenNames: []HiddenName{{Dir: "/", Name: ".env*"}}}, nil)
	if err != nil || fd != -1 {
		t.Errorf("readRuleset = %d, %v; want no ruleset", fd, err)
	}
}

// A read ruleset made before the call is used only if no directory it
// lists changed since, nor within readStampMargin before it was made: a
// file the host saves by rename in the home while a warm sandbox waits
// would have no rule in it.
func TestPreparedReadOnlyWhileUnchanged(t *testing.T) {
	requireLandlock(t)
	d := t.TempDir()
	home := filepath.Join(d, "home")
	mkfile(t, filepath.Join(home, ".ssh", "id"), "x")
	mkfile(t, filepath.Join(home, "plain"), "x")
	spec := &InitSpec{Hidden: []string{filepath.Join(home, ".ssh")}, Writable: []string{filepath.Join(d, "w")}}
	os.MkdirAll(spec.Writable[0], 0o755)
	old := time.Now().Add(-time.Hour)
	age := func() {
		for _, p := range []string{home, d} {
			os.Chtimes(p, old, old)
		}
	}
	tests := []struct {
		name   string
		before func() // before the ruleset is made
		after  func() // between it and the call
		reused bool
	}{
		{"nothing changed", age, func() {}, true},
		{"a file saved by rename in the home", age, func() {
			mkfile(t, filepath.Join(home, ".gitconfig.lock"), "x")
			os.Rename(filepath.Join(home, ".gitconfig.lock"), filepath.Join(home, ".gitconfig"))
		}, false},
		{"a directory changed just before", func() { age(); mkfile(t, filepath.Join(home, "recent"), "x") }, func() {}, false},
	}
	for _, tt := range tests {
		tt.before()
		p := prepareRead(spec)
		if p.err != nil || p.fd < 0 {
			t.Fatalf("%s: prepared %d, %v", tt.name, p.fd, p.err)
		}
		if _, ok := p.dirs[home]; !ok {
			t.Fatalf("%s: the home's state was not taken: %v", tt.name, p.dirs)
		}
		for dir := range p.dirs {
			if !strings.HasPrefix(dir, d) {
				delete(p.dirs, dir) // /tmp and above change as other tests run
			}
		}
		tt.after()
		if got := p.unchanged(); got != tt.reused {
			t.Errorf("%s: unchanged = %v, want %v", tt.name, got, tt.reused)
		}
		fd, err := p.take(spec)
		if err != nil || fd < 0 {
			t.Errorf("%s: take = %d (%v)", tt.name, fd, err)
		}
		unix.Close(fd)
	}
}
