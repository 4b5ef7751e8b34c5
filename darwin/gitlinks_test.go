package darwin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
