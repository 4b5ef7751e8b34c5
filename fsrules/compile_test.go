package fsrules

import (
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestAnchor(t *testing.T) {
	tests := []struct {
		pattern, base, want, err string
	}{
		{pattern: "/abs/x", want: "/abs/x"},
		{pattern: "//abs/x", want: "/abs/x"},
		{pattern: "///abs//x/", want: "/abs/x"},
		{pattern: "~/.ssh", want: "/home/u/.ssh"},
		{pattern: "~", want: "/home/u"},
		{pattern: "./build", base: "/proj", want: "/proj/build"},
		{pattern: "build/**", base: "/proj", want: "/proj/build"},
		{pattern: "build/", base: "/proj", want: "/proj/build"},
		{pattern: "../up", base: "/proj/sub", want: "/proj/up"},
		{pattern: "/a/../../b", want: "/b"},
		{pattern: "/", want: "/"},
		{pattern: "~bob/x", err: "~user"},
		{pattern: "", err: "empty"},
		{pattern: "a\x00b", base: "/p", err: "NUL"},
		{pattern: "rel", base: "", err: "no absolute base"},
	}
	for _, tt := range tests {
		got, err := Anchor(tt.pattern, tt.base, "/home/u")
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Anchor(%q) err = %v, want %q", tt.pattern, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Anchor(%q, %q) = %q, %v; want %q", tt.pattern, tt.base, got, err, tt.want)
		}
	}
}

func FuzzAnchor(f *testing.F) {
	for _, s := range []string{"/a", "//a", "~/x", "./x", "x/**", "../../..", "~", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		got, err := Anchor(pattern, "/base", "/home/u")
		if err != nil {
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got || strings.Contains(got, "\x00") {
			t.Fatalf("Anchor(%q) = %q: not absolute and clean", pattern, got)
		}
	})
}

// fakeHost is a file system of dirs, files and symlinks.
type fakeHost struct {
	dirs, files map[string]bool
	links       map[string]string
	content     map[string]string // files with content (also files)
}

type fakeInfo struct {
	name string
	mode fs.FileMode
}

func (i fakeInfo) Name() string       { return i.name }
func (i fakeInfo) Size() int64        { return 0 }
func (i fakeInfo) Mode() fs.FileMode  { return i.mode }
func (i fakeInfo) ModTime() time.Time { return time.Time{} }
func (i fakeInfo) IsDir() bool        { return i.mode.IsDir() }
func (i fakeInfo) Sys() any           { return nil }

func (h *fakeHost) lstat(p string) (fs.FileInfo, error) {
	switch {
	case h.dirs[p]:
		return fakeInfo{filepath.Base(p), fs.ModeDir}, nil
	case h.files[p] || h.content[p] != "":
		return fakeInfo{filepath.Base(p), 0}, nil
	case h.links[p] != "":
		return fakeInfo{filepath.Base(p), fs.ModeSymlink}, nil
	}
	return nil, fs.ErrNotExist
}

func (h *fakeHost) readlink(p string) (string, error) {
	if t, ok := h.links[p]; ok {
		return t, nil
	}
	return "", fs.ErrInvalid
}

func (h *fakeHost) eval(p string) (string, error) {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for i, part := range parts {
		if part == "" {
			continue
		}
		next := filepath.Join(cur, part)
		if t, ok := h.links[next]; ok {
			rest := filepath.Join(append([]string{t}, parts[i+1:]...)...)
			return h.eval(rest)
		}
		if !h.dirs[next] && !h.files[next] && h.content[next] == "" {
			return "", &fs.PathError{Op: "lstat", Path: next, Err: fs.ErrNotExist}
		}
		cur = next
	}
	return cur, nil
}

func (h *fakeHost) host() Host {
	return Host{Home: "/home/u", EvalSymlinks: h.eval, Lstat: h.lstat, ReadFile: h.readFile, Readlink: h.readlink, Glob: func(pattern string) ([]string, error) {
		var out []string
		for p := range h.files {
			if ok, _ := filepath.Match(pattern, p); ok {
				out = append(out, p)
			}
		}
		return out, nil
	}}
}

func (h *fakeHost) readFile(p string) ([]byte, error) {
	r, err := h.eval(p)
	if err != nil {
		return nil, err
	}
	if c, ok := h.content[r]; ok {
		return []byte(c), nil
	}
	if h.files[r] {
		return nil, nil
	}
	return nil, fs.ErrNotExist
}

func newFakeHost() *fakeHost {
	h := &fakeHost{dirs: map[string]bool{}, files: map[string]bool{}, links: map[string]string{}}
	for _, d := range []string{"/", "/home", "/home/u", "/home/u/.ssh", "/home/u/proj", "/home/u/proj/build",
		"/home/u/proj/secrets", "/home/u/proj/secrets/public", "/home/u/proj/vendor", "/data", "/etc"} {
		h.dirs[d] = true
	}
	for _, f := range []string{"/home/u/.ssh/id_ed25519", "/home/u/.ssh/known_hosts", "/home/u/proj/.env",
		"/home/u/proj/secrets/key.pem", "/home/u/.bashrc", "/home/u/proj/a.log", "/home/u/proj/b.log", "/etc/passwd"} {
		h.files[f] = true
	}
	h.links["/home/u/ws"] = "/home/u/proj"
	h.links["/home/u/proj/out"] = "/data"
	return h
}

func rules(base string, ps ...string) []Rule {
	var rs []Rule
	for i, p := range ps {
		rs = append(rs, Rule{Pattern: p, BaseDir: base, Origin: "settings.json:" + string(rune('1'+i))})
	}
	return rs
}

func TestCompileGolden(t *testing.T) {
	tests := []struct {
		name string
		in   Input
	}{
		{"default", Input{Workspace: "/home/u/proj"}},
		{"workspace-symlink", Input{Workspace: "/home/u/ws"}},
		{"every-key", Input{
			Workspace:  "/home/u/ws",
			AllowWrite: rules("/home/u/proj", "./out", "/data", "missing-dir", "~/.bashrc", "vendor/**", "*.tmp"),
			DenyWrite:  rules("/home/u/proj", "vendor", "new-file", "/etc/passwd", "*.log", "/data"),
			DenyRead:   rules("/home/u/proj", "secrets", "~/.ssh", ".env", "nonexistent"),
			AllowRead:  rules("/home/u/proj", "secrets/public", "~/.ssh/known_hosts", "gone"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHost()
			pol, err := Compile(tt.in, h.host())
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.MarshalIndent(pol, "", "  ")
			golden := filepath.Join("testdata", "compile", tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if diff := cmp.Diff(strings.TrimSpace(string(want)), strings.TrimSpace(string(got))); diff != "" {
				t.Errorf("policy mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A deny rule naming a file whose name holds wildcard characters denies
// that file, not only what the pattern would match.
func TestDenyLiteralWithGlobCharacters(t *testing.T) {
	h := newFakeHost()
	h.files["/home/u/proj/secret[1].txt"] = true
	h.files["/home/u/proj/secret1.txt"] = true
	pol, err := Compile(Input{Workspace: "/home/u/proj", DenyRead: rules("/home/u/proj", "secret[1].txt"),
		DenyWrite: rules("/home/u/proj", "secret[1].txt")}, h.host())
	if err != nil {
		t.Fatal(err)
	}
	for name, list := range map[string][]Path{"denyRead": pol.DenyRead, "denyWrite": pol.DenyWrite} {
		var got []string
		for _, p := range list {
			got = append(got, p.Path)
		}
		if !slices.Contains(got, "/home/u/proj/secret[1].txt") || !slices.Contains(got, "/home/u/proj/secret1.txt") {
			t.Errorf("%s = %v, want the literal file and the match", name, got)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	h := newFakeHost()
	h.links["/home/u/proj/dangling"] = "/nowhere"
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{"relative workspace", Input{Workspace: "proj"}, "not absolute"},
		{"missing workspace", Input{Workspace: "/nope"}, "does not exist"},
		{"bad anchor", Input{Workspace: "/home/u/proj", DenyRead: rules("/home/u/proj", "~root/x")}, "settings.json:1: \"~root/x\""},
		{"dangling symlink", Input{Workspace: "/home/u/proj", DenyWrite: rules("/home/u/proj", "dangling")}, "dangling symbolic link"},
	}
	for _, tt := range tests {
		_, err := Compile(tt.in, h.host())
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
	var pe *PatternError
	_, err := Compile(tests[2].in, h.host())
	if !errors.As(err, &pe) {
		t.Errorf("err = %T, want *PatternError", err)
	}
}
