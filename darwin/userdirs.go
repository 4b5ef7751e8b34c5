package darwin

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// userTempRE matches a per-user temporary directory as confstr(3) names
// it (_CS_DARWIN_USER_TEMP_DIR): /var/folders/XX/YYYY/T, also through
// /private.
var userTempRE = regexp.MustCompile(`^(/private)?/var/folders/[^/]+/[^/]+/T$`)

// UserDirs are the per-user temporary and cache directories of the
// caller (confstr's DARWIN_USER_TEMP_DIR and DARWIN_USER_CACHE_DIR), where
// Apple's tools write whatever TMPDIR says: the xcrun shims behind
// /usr/bin/git, python3 and clang keep their xcrun_db there, clang and
// Swift their module caches, Foundation its atomic writes' staging
// folders.
type UserDirs struct{ Temp, Cache string }

// FindUserDirs finds the caller's per-user directories: from TMPDIR when
// it is the per-user temporary directory (the default in a user's
// session), else from getconf (which runs `getconf NAME`).
func FindUserDirs(tmpdir string, getconf func(name string) (string, error)) (UserDirs, error) {
	t := filepath.Clean(tmpdir)
	if tmpdir != "" && userTempRE.MatchString(t) {
		return UserDirs{Temp: t, Cache: filepath.Join(filepath.Dir(t), "C")}, nil
	}
	var d UserDirs
	for _, v := range []struct {
		name string
		dst  *string
	}{{"DARWIN_USER_TEMP_DIR", &d.Temp}, {"DARWIN_USER_CACHE_DIR", &d.Cache}} {
		out, err := getconf(v.name)
		if err != nil {
			return UserDirs{}, fmt.Errorf("getconf %s: %w", v.name, err)
		}
		p := strings.TrimSpace(out)
		if !filepath.IsAbs(p) || strings.ContainsAny(p, "\n\x00") {
			return UserDirs{}, fmt.Errorf("getconf %s: not an absolute path: %q", v.name, out)
		}
		*v.dst = filepath.Clean(p)
	}
	return d, nil
}

// RunDirs are one run's own folders in the per-user directories, both
// named Suffix: DIRHELPER_USER_DIR_SUFFIX=Suffix makes confstr(3) name
// them to the command, so what Apple's tools put in the per-user
// directories goes to folders of the run's own (the rest of T and C,
// which every process of the user shares, stays read-only).
type RunDirs struct {
	Suffix, Temp, Cache string
}

// NewRunDirs makes the run's folders (mode 0700) and returns them with
// their links resolved. On error nothing is left behind.
func NewRunDirs(u UserDirs, resolve func(string) (string, error)) (*RunDirs, error) {
	if u.Temp == "" || u.Cache == "" {
		return nil, errors.New("no per-user directories")
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	r := &RunDirs{Suffix: "sbx-run-" + hex.EncodeToString(b)}
	var made []string
	for _, v := range []struct {
		parent string
		dst    *string
	}{{u.Temp, &r.Temp}, {u.Cache, &r.Cache}} {
		p := filepath.Join(v.parent, r.Suffix)
		if err := os.Mkdir(p, 0o700); err != nil {
			removeAll(made)
			return nil, err
		}
		made = append(made, p)
		real, err := resolve(p)
		if err != nil {
			removeAll(made)
			return nil, err
		}
		*v.dst = real
	}
	return r, nil
}

// Remove deletes the run's folders and what the command left in them.
func (r *RunDirs) Remove() { removeAll([]string{r.Temp, r.Cache}) }

// Env is what the command's environment gains: TMPDIR and the suffix
// (when the run has folders in the per-user directories).
func (r *RunDirs) Env() []string {
	env := []string{"TMPDIR=" + r.Temp + "/"}
	if r.Suffix != "" {
		env = append(env, "DIRHELPER_USER_DIR_SUFFIX="+r.Suffix)
	}
	return env
}

func removeAll(paths []string) {
	for _, p := range paths {
		if p != "" {
			os.RemoveAll(p)
		}
	}
}
