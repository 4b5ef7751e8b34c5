package darwin

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFindUserDirs(t *testing.T) {
	conf := map[string]string{"DARWIN_USER_TEMP_DIR": "/var/folders/ab/cd/T/\n", "DARWIN_USER_CACHE_DIR": "/var/folders/ab/cd/C/\n"}
	getconf := func(name string) (string, error) { return conf[name], nil }
	failing := func(string) (string, error) { return "", errors.New("exit status 1") }
	relative := func(string) (string, error) { return "T/\n", nil }
	tests := []struct {
		name, tmpdir string
		getconf      func(string) (string, error)
		want         UserDirs
		err          string
	}{
		{"TMPDIR is the per-user dir", "/var/folders/xy/zz/T/", failing, UserDirs{"/var/folders/xy/zz/T", "/var/folders/xy/zz/C"}, ""},
		{"through /private", "/private/var/folders/xy/zz/T", failing, UserDirs{"/private/var/folders/xy/zz/T", "/private/var/folders/xy/zz/C"}, ""},
		{"TMPDIR set elsewhere", "/tmp", getconf, UserDirs{"/var/folders/ab/cd/T", "/var/folders/ab/cd/C"}, ""},
		{"a folder below T is not T", "/var/folders/xy/zz/T/sub", getconf, UserDirs{"/var/folders/ab/cd/T", "/var/folders/ab/cd/C"}, ""},
		{"no TMPDIR", "", getconf, UserDirs{"/var/folders/ab/cd/T", "/var/folders/ab/cd/C"}, ""},
		{"getconf fails", "/tmp", failing, UserDirs{}, "getconf DARWIN_USER_TEMP_DIR: exit status 1"},
		{"getconf relative", "/tmp", relative, UserDirs{}, "not an absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindUserDirs(tt.tmpdir, tt.getconf)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// The run's folders are made private, named alike, resolved, put in the
// environment and removed with what the command left; a failure leaves
// nothing behind.
func TestRunDirs(t *testing.T) {
	base := t.TempDir()
	u := UserDirs{Temp: filepath.Join(base, "T"), Cache: filepath.Join(base, "C")}
	os.Mkdir(u.Temp, 0o755)
	os.Mkdir(u.Cache, 0o755)
	d, err := NewRunDirs(u, filepath.EvalSymlinks)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(d.Temp) != d.Suffix || filepath.Base(d.Cache) != d.Suffix || !strings.HasPrefix(d.Suffix, "sbx-run-") {
		t.Fatalf("folders %+v", d)
	}
	for _, p := range []string{d.Temp, d.Cache} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v", p, fi, err)
		}
	}
	want := []string{"TMPDIR=" + d.Temp + "/", "DIRHELPER_USER_DIR_SUFFIX=" + d.Suffix}
	if got := d.Env(); !slices.Equal(got, want) {
		t.Fatalf("env %q, want %q", got, want)
	}
	os.WriteFile(filepath.Join(d.Cache, "x.pcm"), []byte("x"), 0o600)
	d.Remove()
	for _, p := range []string{d.Temp, d.Cache} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left: %v", p, err)
		}
	}
	// No cache directory: the temp folder made first is removed again.
	if _, err := NewRunDirs(UserDirs{Temp: u.Temp, Cache: filepath.Join(base, "missing")}, filepath.EvalSymlinks); err == nil {
		t.Fatal("no error without a cache directory")
	}
	if left, _ := os.ReadDir(u.Temp); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if got := (&RunDirs{Temp: "/t"}).Env(); !slices.Equal(got, []string{"TMPDIR=/t/"}) {
		t.Fatalf("env without suffix %q", got)
	}
}
