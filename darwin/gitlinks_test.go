package darwin

import (
	"crypto/sha1"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// The links a run leaves in a git directory (a directory holding them
// renamed in, which the profile cannot refuse) are removed after it, and
// said (under objects/ too); the user's own links are left alone.
func TestRemoveNewGitLinks(t *testing.T) {
	ws := t.TempDir()
	g := filepath.Join(ws, ".git")
	for _, d := range []string{"logs/refs/heads", "objects/ab", "rr-cache/x", "scripts"} {
		os.MkdirAll(filepath.Join(g, d), 0o755)
	}
	os.MkdirAll(filepath.Join(ws, "scripts/hooks"), 0o755)
	link := func(target, p string) {
		t.Helper()
		os.Remove(filepath.Join(g, p))
		if err := os.Symlink(target, filepath.Join(g, p)); err != nil {
			t.Fatal(err)
		}
	}
	link("../scripts/hooks", "hooks")
	link("/elsewhere/a", "info-link")
	dirs := gitLinkDirs(&fsrules.Policy{Writable: []fsrules.Path{{Path: ws, Dir: true}}})
	if len(dirs) != 1 || dirs[0] != g {
		t.Fatalf("git directories: %v", dirs)
	}
	before, _ := linksIn(dirs)
	link("/home/u/.zshenv", "logs/refs/heads/main")
	link("/home/u/.local/lib/z.pth", "rr-cache/x/preimage")
	link("/elsewhere/b", "info-link") // re-pointed
	link("../../x", "objects/ab/cd")
	warns := removeNewGitLinks(dirs, before)
	for _, p := range []string{"logs/refs/heads/main", "rr-cache/x/preimage", "info-link", "objects/ab/cd"} {
		if _, err := os.Lstat(filepath.Join(g, p)); err == nil {
			t.Errorf("%s stayed", p)
		}
	}
	for _, p := range []string{"hooks"} {
		if _, err := os.Lstat(filepath.Join(g, p)); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if len(warns) != 4 || !strings.Contains(strings.Join(warns, "\n"), ".zshenv") {
		t.Errorf("warnings: %q", warns)
	}
}

// oneEntryIndex is a version 2 git index holding one file named path.
func oneEntryIndex(path string) []byte {
	out := append([]byte("DIRC"), 0, 0, 0, 2, 0, 0, 0, 1)
	entry := make([]byte, 62)
	binary.BigEndian.PutUint32(entry[24:], 0o100644)
	binary.BigEndian.PutUint16(entry[60:], uint16(len(path)))
	entry = append(entry, path...)
	entry = append(entry, make([]byte, 8-len(entry)%8)...)
	out = append(out, entry...)
	sum := sha1.Sum(out)
	return append(out, sum[:]...)
}

// An index the command changed so that it names a path git never writes
// (.git/hooks/…: the host's git restore would write the hook) is set
// aside after the run, and said; an index it changed as git does, and
// one it did not touch, stay.
func TestSetAsideBadIndexes(t *testing.T) {
	ws := t.TempDir()
	g := filepath.Join(ws, ".git")
	os.MkdirAll(filepath.Join(g, "worktrees", "wt"), 0o755)
	write := func(p string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(g, p), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("index", oneEntryIndex("a"))
	write("worktrees/wt/index", oneEntryIndex("b"))
	dirs := []string{g}
	before := gitIndexes(dirs)
	time.Sleep(10 * time.Millisecond)
	write("index", oneEntryIndex("src/main.go"))
	write("worktrees/wt/index", oneEntryIndex(".git/hooks/pre-commit"))
	write("sharedindex.0123", []byte("junk"))
	warns := setAsideBadIndexes(dirs, before)
	if _, err := os.Stat(filepath.Join(g, "index")); err != nil {
		t.Errorf("a good index was set aside: %v", err)
	}
	for _, p := range []string{"worktrees/wt/index", "sharedindex.0123"} {
		if _, err := os.Lstat(filepath.Join(g, p)); err == nil {
			t.Errorf("%s stayed", p)
		}
		if _, err := os.Lstat(filepath.Join(g, p+".sbx-refused")); err != nil {
			t.Errorf("%s was not set aside: %v", p, err)
		}
	}
	if len(warns) != 2 || !strings.Contains(warns[1], ".git/hooks/pre-commit") {
		t.Errorf("warnings: %q", warns)
	}
}
