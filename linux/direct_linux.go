//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// directCommand is what `bash -c S` would exec when S is a command of
// plain words (`git status`, `ls -la src`, `go test ./...`): bash would
// start (~2 ms here, most of a short command's time in the sandbox), find
// the program along PATH and exec it in its own place, with PWD, SHLVL
// and _ set and a stale OLDPWD dropped. The command gets the same program,
// arguments and environment without bash's start (the environment's order
// aside: bash reorders it). ok is false, and bash runs S as it would, for
// anything bash could treat otherwise: a shell other than the system's
// bash, a word with a character bash expands or interprets (quotes, $,
// globs, ~, {}, #, ;, |, &, <, >, ( …), a first word that is an
// assignment, a path, an option (-, +), a job (%), a builtin or a
// keyword, a program not found or found through a link of /proc that
// names the process looking, an environment that bash reads at start-up
// or sets itself (exported functions, BASH_ENV, SHELLOPTS, RANDOM, IFS,
// an LC_ALL it may warn about …) or would rewrite in a way not modelled
// here. The caller execs bash when the exec of the result fails (a script
// without #!, a denied exec): bash then reports or handles it as it would
// have.
func directCommand(path string, argv, env []string) (prog string, args, newEnv []string, ok bool) {
	if path != "/bin/bash" && path != "/usr/bin/bash" || len(argv) != 3 || argv[1] != "-c" {
		return "", nil, nil, false // not the system's bash (whose ways these are)
	}
	words, ok := plainWords(argv[2])
	if !ok || !plainEnv(env) {
		return "", nil, nil, false
	}
	prog, ok = searchPath(words[0], envValue(env, "PATH"))
	if !ok || !sameInEveryProcess(prog) {
		return "", nil, nil, false
	}
	newEnv, ok = bashEnv(env, prog)
	return prog, words, newEnv, ok
}

// plainWords splits s into its words when every byte of it is a letter, a
// digit, one of _-./:@%+,= or a blank, and the first word names a program
// bash would look up along PATH.
func plainWords(s string) ([]string, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("_-./:@%+,= \t", c) >= 0:
		default:
			return nil, false
		}
	}
	words := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' })
	// A first word of - or + is an option of bash's, % a job (fg).
	if len(words) == 0 || strings.ContainsAny(words[0], "=/") || strings.ContainsAny(words[0][:1], "-+%") || bashOwn(words[0]) {
		return nil, false
	}
	return words, true
}

// bashOwn reports whether name is a bash keyword or builtin (bash 5.2's
// list; a word outside plainWords' characters cannot name one).
func bashOwn(name string) bool {
	const own = " if then else elif fi case esac for select while until do done in function time coproc" +
		" . : alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs" +
		" disown echo enable eval exec exit export false fc fg getopts hash help history jobs kill let local" +
		" logout mapfile popd printf pushd pwd read readarray readonly return set shift shopt source suspend" +
		" test times trap true type typeset ulimit umask unalias unset wait "
	return strings.Contains(own, " "+name+" ")
}

// bashReads are variables bash acts on at start-up, changes or drops
// (its own: `compgen -v` of bash 5.2, interactive or not, less those it
// passes on as they came), or that change how it finds or runs a program:
// with one of them set, bash runs the command. Names that begin with BASH
// or COMP_ are bash's too. TestBashOwnVariables holds the list to the
// host's bash.
var bashReads = []string{"ENV", "SHELLOPTS", "POSIXLY_CORRECT", "EXECIGNORE", "DIRSTACK", "EPOCHREALTIME", "EPOCHSECONDS",
	"EUID", "GROUPS", "HISTCMD", "HOSTTYPE", "IFS", "LINENO", "MACHTYPE", "OPTARG", "OPTERR", "OPTIND", "OSTYPE", "PPID",
	"PS1", "PS2", "PS3", "PS4", "RANDOM", "SECONDS", "SRANDOM", "UID", "FUNCNAME", "PIPESTATUS"}

// plainLocales are the values of LC_ALL that every system has: with
// another, bash warns on stderr when the locale is missing, which only
// setlocale can tell.
var plainLocales = []string{"", "C", "POSIX", "C.UTF-8", "C.utf8"}

// plainEnv reports whether env is one bash passes on unchanged but for
// PWD, OLDPWD, SHLVL and _: every entry NAME=VALUE, no name twice, no
// exported function, none of bashReads, a PATH of absolute directories in
// canonical form.
func plainEnv(env []string) bool {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		name, val, found := strings.Cut(kv, "=")
		if !found || name == "" || strings.HasPrefix(name, "BASH") || strings.HasPrefix(name, "COMP_") || slices.Contains(bashReads, name) ||
			name == "LC_ALL" && !slices.Contains(plainLocales, val) {
			return false
		}
		names = append(names, name)
	}
	slices.Sort(names)
	if len(slices.Compact(names)) != len(env) {
		return false
	}
	path, ok := lookupEnv(env, "PATH")
	if !ok || path == "" {
		return false
	}
	for _, dir := range strings.Split(path, ":") {
		if !canonical(dir) || dir == "/" {
			return false // bash's name for a program there is not Join's
		}
	}
	return true
}

// searchPath finds name as bash does: the first file along path, not a
// directory, that this process may execute (a FIFO too: its exec then
// fails, and bash, run instead, reports it).
func searchPath(name, path string) (string, bool) {
	for _, dir := range strings.Split(path, ":") {
		p := dir + "/" + name
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
			continue
		}
		if unix.Faccessat(unix.AT_FDCWD, p, unix.X_OK, unix.AT_EACCESS) == nil {
			return p, true
		}
	}
	return "", false
}

// sameInEveryProcess reports whether prog names the same file whichever
// process looks it up: its path, links followed one by one, never enters
// /proc (procfs), whose links can name the process looking
// (/proc/self/exe, /dev/fd/N), which bash, looking itself, would resolve
// to bash or to nothing. (openat2's RESOLVE_NO_MAGICLINKS would say it at
// once, but the seccomp filter refuses openat2.)
func sameInEveryProcess(prog string) bool {
	dir, todo := "/", prog
	for links := 0; ; {
		var fs unix.Statfs_t
		if unix.Statfs(dir, &fs) != nil || fs.Type == unix.PROC_SUPER_MAGIC {
			return false
		}
		var name string
		name, todo, _ = strings.Cut(strings.TrimLeft(todo, "/"), "/")
		switch name {
		case "":
			return true
		case ".":
			continue
		case "..":
			dir = filepath.Dir(dir)
			continue
		}
		next := filepath.Join(dir, name)
		var st unix.Stat_t
		if unix.Lstat(next, &st) != nil {
			return false
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			dir = next
			continue
		}
		target, err := os.Readlink(next)
		if links++; err != nil || links > 40 {
			return false
		}
		if filepath.IsAbs(target) {
			dir = "/"
		}
		todo = target + "/" + todo
	}
}

// bashEnv is env as bash passes it to a program it execs for `bash -c`:
// PWD names the working directory (kept as given when it is an absolute,
// canonical name of it, else the physical path), OLDPWD is dropped when
// it names no directory, SHLVL is the caller's (0 when unset), and _ is
// the program's path. ok is false for what bash would treat in a way not
// modelled here (a SHLVL bash would warn about or reset, an OLDPWD or PWD
// not in canonical form).
func bashEnv(env []string, prog string) ([]string, bool) {
	cwd, err := unix.Getwd()
	if err != nil {
		return nil, false
	}
	pwd, ok := lookupEnv(env, "PWD")
	switch {
	case !ok || !sameDir(pwd, "."):
		pwd = cwd
	case !canonical(pwd):
		return nil, false
	}
	shlvl, ok := lookupEnv(env, "SHLVL")
	switch n, err := strconv.Atoi(shlvl); {
	case !ok:
		shlvl = "0"
	case err != nil || len(shlvl) > 3 || n < 0 || n >= 999 || shlvl[0] == '+' || shlvl[0] == '-':
		return nil, false
	default:
		shlvl = strconv.Itoa(n)
	}
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		switch name {
		case "PWD", "SHLVL", "_":
			continue
		case "OLDPWD":
			keep, ok := oldPWD(val)
			if !ok {
				return nil, false
			}
			if !keep {
				continue
			}
		}
		out = append(out, kv)
	}
	return append(out, "PWD="+pwd, "SHLVL="+shlvl, "_="+prog), true
}

// oldPWD says whether bash keeps OLDPWD=val (an absolute canonical
// directory) or drops it (an absolute name of nothing, or empty); ok is
// false for the rest.
func oldPWD(val string) (keep, ok bool) {
	if val == "" {
		return false, true
	}
	if !canonical(val) {
		return false, false
	}
	var st unix.Stat_t
	switch err := unix.Stat(val, &st); {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return true, true
	case err == unix.ENOENT:
		return false, true
	}
	return false, false
}

// canonical reports whether p is an absolute path with no empty, . or ..
// component and no trailing slash.
func canonical(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p
}

// sameDir reports whether a and b name the same directory.
func sameDir(a, b string) bool {
	var sa, sb unix.Stat_t
	return unix.Stat(a, &sa) == nil && unix.Stat(b, &sb) == nil &&
		sa.Mode&unix.S_IFMT == unix.S_IFDIR && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// lookupEnv is the value of name in env (the last one, as a process's
// getenv would see it after bash).
func lookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// envValue is name's value in env, "" when unset.
func envValue(env []string, name string) string {
	v, _ := lookupEnv(env, name)
	return v
}
