package fsrules

import (
	"crypto/sha1"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// indexEntry is one entry for makeIndex: a path and its mode.
type indexEntry struct {
	path string
	mode uint32
}

// makeIndex encodes entries as git writes a version 2 or 4 index with
// SHA-1 object names and a checksum (TestGitIndexBuilderAsGitReadsIt
// checks it against git).
func makeIndex(version uint32, entries ...indexEntry) []byte {
	out := []byte("DIRC")
	out = binary.BigEndian.AppendUint32(out, version)
	out = binary.BigEndian.AppendUint32(out, uint32(len(entries)))
	prev := ""
	for _, e := range entries {
		start := len(out)
		out = append(out, make([]byte, 24)...) // ctime, mtime, dev, ino
		out = binary.BigEndian.AppendUint32(out, e.mode)
		out = append(out, make([]byte, 12)...)                                                    // uid, gid, size
		out = append(out, 0xe6, 0x9d, 0xe2, 0x9b, 0xb2, 0xd1, 0xd6, 0x43, 0x4b, 0x8b, 0x29, 0xae, // the empty blob
			0x77, 0x5a, 0xd8, 0xc2, 0xe4, 0x8c, 0x53, 0x91)
		out = binary.BigEndian.AppendUint16(out, uint16(min(len(e.path), 0xfff)))
		if version == 4 {
			common := 0
			for common < len(prev) && common < len(e.path) && prev[common] == e.path[common] {
				common++
			}
			out = append(out, byte(len(prev)-common)) // one varint byte: paths under 128 bytes
			out = append(append(out, e.path[common:]...), 0)
		} else {
			out = append(out, e.path...)
			out = append(out, make([]byte, 8-(len(out)-start)%8)...)
		}
		prev = e.path
	}
	sum := sha1.Sum(out)
	return append(out, sum[:]...)
}

func file(path string) indexEntry { return indexEntry{path, 0o100644} }

func TestGitIndexSafe(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"ordinary", makeIndex(2, file("a"), file("b/c"), file("src/.gitignore"), file("x.git/y")), true},
		{"ordinary v4", makeIndex(4, file("a"), file("src/a.go"), file("src/b.go"), file("src/bb/c.go")), true},
		{"empty", makeIndex(2), true},
		{"a hook", makeIndex(2, file("a"), file(".git/hooks/pre-commit")), false},
		{"a hook in v4", makeIndex(4, file(".g"), file(".git/hooks/pre-commit")), false},
		{"a nested repository's hook", makeIndex(2, file("sub/.git/hooks/post-checkout")), false},
		{"case", makeIndex(2, file(".GIT/config")), false},
		{"NTFS trailing dot", makeIndex(2, file(".git./hooks/x")), false},
		{"NTFS short name", makeIndex(2, file("GIT~1/hooks/x")), false},
		{"NTFS stream", makeIndex(2, file(".git::$INDEX_ALLOCATION/hooks/x")), false},
		{"backslash", makeIndex(2, file(`a\.git\hooks\x`)), false},
		{"HFS ignorable", makeIndex(2, file(".g\u200cit/hooks/x")), false},
		{"dot dot", makeIndex(2, file("../../.bashrc")), false},
		{"dot", makeIndex(2, file("./a")), false},
		{"absolute", makeIndex(2, file("/etc/x")), false},
		{"double slash", makeIndex(2, file("a//b")), false},
		{"symlinked .gitmodules", makeIndex(2, indexEntry{".gitmodules", 0o120000}), false},
		{".gitmodules file", makeIndex(2, file(".gitmodules")), true},
		{"split index replacement", makeIndex(2, file("")), true},
		{"split index replacement by a link", makeIndex(2, indexEntry{"", 0o120000}), false},
		{"not an index", []byte("new index\n"), false},
		{"nothing", nil, false},
		{"truncated", makeIndex(2, file("a"), file("b"))[:70], false},
		{"version 5", func() []byte { b := makeIndex(2, file("a")); b[7] = 5; return b }(), false},
		{"more entries than there are", func() []byte { b := makeIndex(2, file("a")); b[11] = 9; return b }(), false},
	}
	for _, tt := range tests {
		ok, why := GitIndexSafe(tt.data, false)
		if ok != tt.ok || !ok && why == "" {
			t.Errorf("%s: ok = %v (%s), want %v", tt.name, ok, why, tt.ok)
		}
	}
	// A version 4 entry's name is the previous one's, stripped, plus its
	// own; git's threaded reader reads each block an IEOT extension names
	// from its first entry with no previous name: then only its own part.
	v4 := makeIndex(4, file("x"), file("x.git/hooks/y"))
	if ok, why := GitIndexSafe(v4, false); !ok {
		t.Errorf("v4 x, x.git/hooks/y refused: %s", why)
	}
	second := 12 + 62 + 3 // the first entry: fixed fields, flags, strip, "x\0"
	if ok, why := GitIndexSafe(withIEOT(v4, [2]uint32{12, 1}, [2]uint32{uint32(second), 1}), false); ok || !strings.Contains(why, "IEOT") {
		t.Errorf("an IEOT block beginning at .git/hooks/y: ok = %v (%s)", ok, why)
	}
	if ok, why := GitIndexSafe(withIEOT(v4, [2]uint32{12, 2}), false); !ok {
		t.Errorf("one IEOT block of both entries refused: %s", why)
	}
}

// Git reads the object names' length from the repository's format: the
// last extensions.objectFormat, only with repositoryFormatVersion 1 or
// more (a first line saying sha1 above git's own sha256 misled sbx).
func TestGitUsesSHA256(t *testing.T) {
	for cfg, want := range map[string]bool{
		"[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha256\n":                        true,
		"[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha1\n\tobjectformat = sha256\n": true,
		"[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha256\n\tobjectformat = sha1\n": false,
		"[core]\n\trepositoryformatversion = 0\n[extensions]\n\tobjectformat = sha256\n":                        false,
		"[extensions]\n\tobjectformat = sha256\n":                                                               false,
		"": false,
	} {
		if got := GitUsesSHA256([]byte(cfg)); got != want {
			t.Errorf("%q: %v, want %v", cfg, got, want)
		}
	}
}

// A version 4 name's prefix length that overflows git's varint is read by
// git as 0 with its bytes left to the name (here three U+200C, which
// HFS+ ignores, before .git).
func TestGitIndexVarintOverflow(t *testing.T) {
	name := "\u200c\u200c\u200c.git/hooks/pre-commit"
	data := makeIndex(4, file(name))
	at := strings.Index(string(data), "\x00"+name) // the one-byte prefix length
	data = append(append([]byte{}, data[:at]...), data[at+1:len(data)-sha1.Size]...)
	sum := sha1.Sum(data)
	if ok, _ := GitIndexSafe(append(data, sum[:]...), false); ok {
		t.Error("a name behind an overflowing prefix length passed")
	}
}

// Git 2.39's EOIE holds a 20-byte hash in a SHA-256 repository's index too.
func TestIEOTOfSHA256Index(t *testing.T) {
	out := []byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x00")
	out = append(out, "IEOT\x00\x00\x00\x0c\x00\x00\x00\x01\x00\x00\x00\x40\x00\x00\x00\x01"...)
	out = append(out, "EOIE\x00\x00\x00\x18\x00\x00\x00\x0c"...)
	out = append(out, make([]byte, sha1.Size+32)...)
	if got := ieotBlocks(out, 32); len(got) != 1 || got[0] != [2]uint32{0x40, 1} {
		t.Errorf("blocks %v", got)
	}
}

// withIEOT adds to an index of makeIndex the IEOT extension naming blocks
// (offset, entries) and the EOIE extension that leads git to it.
func withIEOT(index []byte, blocks ...[2]uint32) []byte {
	out := append([]byte{}, index[:len(index)-sha1.Size]...)
	extAt := uint32(len(out))
	out = append(out, "IEOT"...)
	out = binary.BigEndian.AppendUint32(out, uint32(4+8*len(blocks)))
	out = binary.BigEndian.AppendUint32(out, 1)
	for _, b := range blocks {
		out = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(out, b[0]), b[1])
	}
	out = append(out, "EOIE"...)
	out = binary.BigEndian.AppendUint32(out, 4+sha1.Size)
	out = binary.BigEndian.AppendUint32(out, extAt)
	out = append(out, make([]byte, sha1.Size)...) // git checks this hash; sbx does not need to
	sum := sha1.Sum(out)
	return append(out, sum[:]...)
}

// The paths git reads from makeIndex's output are the ones it was given,
// and an index git wrote passes in every layout it writes (versions 2 to
// 4, split, SHA-256); the attack shape (an entry's bytes edited after git
// added it) is read by git as the hook path it names, and refused.
func TestGitIndexBuilderAsGitReadsIt(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is needed")
		}
		t.Skip("no git")
	}
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	for _, v := range []uint32{2, 4} {
		dir := t.TempDir()
		git(dir, "init", "-q")
		os.WriteFile(filepath.Join(dir, ".git", "index"), makeIndex(v, file("a"), file("src/a.go"), file("src/b.go")), 0o644)
		if got := git(dir, "ls-files"); got != "a\nsrc/a.go\nsrc/b.go\n" {
			t.Errorf("v%d: git reads %q", v, got)
		}
	}
	for _, layout := range [][]string{{"--index-version", "2"}, {"--index-version", "3"}, {"--index-version", "4"}, {"--split-index"}} {
		dir := t.TempDir()
		git(dir, "init", "-q")
		for _, f := range []string{"a", "src/a.go", "src/b.go", "src/deep/c.go"} {
			os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
			os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644)
		}
		git(dir, "add", ".")
		git(dir, append([]string{"update-index"}, layout...)...)
		if layout[0] == "--index-version" && layout[1] == "3" {
			git(dir, "update-index", "--skip-worktree", "a") // an extended flag
		}
		files, _ := filepath.Glob(filepath.Join(dir, ".git", "*index*"))
		for _, f := range files {
			data, _ := os.ReadFile(f)
			if ok, why := GitIndexSafe(data, false); !ok {
				t.Errorf("%v: git's own %s refused: %s", layout, filepath.Base(f), why)
			}
		}
	}
	dir := t.TempDir()
	git(dir, "init", "-q", "--object-format=sha256")
	os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644)
	git(dir, "add", "a")
	cfg, _ := os.ReadFile(filepath.Join(dir, ".git", "config"))
	data, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if ok, why := GitIndexSafe(data, GitUsesSHA256(cfg)); !ok || !GitUsesSHA256(cfg) {
		t.Errorf("a SHA-256 repository's index refused: %s", why)
	}

	dir = t.TempDir()
	git(dir, "init", "-q")
	os.MkdirAll(filepath.Join(dir, "Xgit", "hooks"), 0o755)
	os.WriteFile(filepath.Join(dir, "Xgit", "hooks", "pre-commit"), []byte("#!/bin/sh\n"), 0o755)
	git(dir, "add", ".")
	idx := filepath.Join(dir, ".git", "index")
	data, _ = os.ReadFile(idx)
	data = []byte(strings.Replace(string(data[:len(data)-20]), "Xgit/", ".git/", 1))
	sum := sha1.Sum(data)
	data = append(data, sum[:]...)
	os.WriteFile(idx, data, 0o644)
	if got := git(dir, "ls-files"); got != ".git/hooks/pre-commit\n" {
		t.Fatalf("git reads the edited index as %q", got)
	}
	if ok, _ := GitIndexSafe(data, false); ok {
		t.Error("an index naming .git/hooks/pre-commit passed")
	}
}

func FuzzGitIndexSafe(f *testing.F) {
	f.Add(makeIndex(2, file("a"), file("b/c")))
	f.Add(makeIndex(4, file("a"), file("a/b"), file(".git")))
	f.Add(makeIndex(3, file("x")))
	f.Fuzz(func(t *testing.T, data []byte) {
		ok, why := GitIndexSafe(data, false)
		if !ok && why == "" {
			t.Error("refused with no reason")
		}
		GitIndexSafe(data, true)
	})
}
