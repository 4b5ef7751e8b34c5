//go:build linux

package linux

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// directCommand's program, arguments and environment are what bash -c
// gives the program it execs, compared with this host's bash: `env` (not
// a builtin) prints what it got.
func TestDirectCommandMatchesBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	link := filepath.Join(dir, "link")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	base := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C", "TERM=xterm"}
	cases := []struct {
		name, cwd, cmd string
		env            []string
	}{
		{"plain", ws, "env", nil},
		{"arguments, blanks", ws, "env  \t-u   HOME", nil},
		{"SHLVL set", ws, "env", []string{"SHLVL=3"}},
		{"SHLVL with zeros", ws, "env", []string{"SHLVL=007"}},
		{"SHLVL 0", ws, "env", []string{"SHLVL=0"}},
		{"SHLVL 998", ws, "env", []string{"SHLVL=998"}},
		{"PWD the directory", ws, "env", []string{"PWD=" + ws}},
		{"PWD a link to it", link, "env", []string{"PWD=" + link}},
		{"PWD elsewhere", ws, "env", []string{"PWD=/tmp"}},
		{"PWD of nothing", ws, "env", []string{"PWD=/nonexistent/x"}},
		{"cwd through a link, no PWD", link, "env", nil},
		{"OLDPWD a directory", ws, "env", []string{"OLDPWD=/tmp"}},
		{"OLDPWD of nothing", ws, "env", []string{"OLDPWD=/nonexistent"}},
		{"OLDPWD empty", ws, "env", []string{"OLDPWD="}},
		{"_ inherited", ws, "env", []string{"_=/usr/bin/sbx"}},
		{"odd names and values", ws, "env", []string{"FOO-BAR=1", "é=2", "EMPTY=", "SPACES= a  b "}},
		{"LC_ALL C.UTF-8, SHELL, TERM", ws, "env", []string{"LC_ALL=C.UTF-8", "SHELL=/bin/zsh", "HOSTNAME=h"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Chdir(c.cwd)
			env := append(slices.Clone(base), c.env...)
			prog, args, got, ok := directCommand(bash, []string{"bash", "-c", c.cmd}, env)
			if !ok {
				t.Fatalf("not direct: %q with %q", c.cmd, c.env)
			}
			if want := strings.Fields(c.cmd); prog != "/usr/bin/env" && prog != "/bin/env" || !slices.Equal(args, want) {
				t.Errorf("exec %s %q, want env %q", prog, args, want)
			}
			cmd := exec.Command(bash, "-c", c.cmd) // no Dir: Go would set PWD
			cmd.Env = env
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			viaBash := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			direct := exec.Command(prog, args[1:]...)
			direct.Env = got
			out, err = direct.Output()
			if err != nil {
				t.Fatal(err)
			}
			viaDirect := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			slices.Sort(viaBash)
			slices.Sort(viaDirect)
			if !slices.Equal(viaBash, viaDirect) {
				t.Errorf("environment:\nbash   %q\ndirect %q", viaBash, viaDirect)
			}
		})
	}
}

// What bash could treat otherwise runs through bash.
func TestDirectCommandLeavesTheRestToBash(t *testing.T) {
	t.Chdir(t.TempDir())
	cases := []struct {
		name, shell, cmd string
		env              []string
	}{
		{"sh, not bash", "/bin/sh", "env", nil},
		{"a quote", "", "env 'a b'", nil},
		{"a variable", "", "env $HOME", nil},
		{"a glob", "", "ls *", nil},
		{"a tilde", "", "ls ~", nil},
		{"braces", "", "echo{1,2}", nil},
		{"a comment", "", "env #x", nil},
		{"a list", "", "env; env", nil},
		{"a pipe", "", "env | cat", nil},
		{"a redirection", "", "env >x", nil},
		{"a newline", "", "env\nenv", nil},
		{"a backslash", "", `env \a`, nil},
		{"an assignment", "", "A=1 env", nil},
		{"a builtin", "", "true", nil},
		{"echo", "", "echo hi", nil},
		{"a keyword", "", "time env", nil},
		{"a path", "", "/usr/bin/env", nil},
		{"not found", "", "no-such-program-sbx", nil},
		{"empty", "", "  ", nil},
		{"an exported function", "", "env", []string{"BASH_FUNC_env%%=() { :; }"}},
		{"BASH_ENV", "", "env", []string{"BASH_ENV=/etc/x"}},
		{"SHELLOPTS", "", "env", []string{"SHELLOPTS=xtrace"}},
		{"a name twice", "", "env", []string{"HOME=/x"}},
		{"an entry without =", "", "env", []string{"JUNK"}},
		{"a relative PATH", "", "env", []string{"PATH=bin:/usr/bin"}},
		{"a PATH not canonical", "", "env", []string{"PATH=/usr//bin:/bin"}},
		{"a PATH with a trailing slash", "", "env", []string{"PATH=/usr/bin/:/bin"}},
		{"a PATH with the root", "", "env", []string{"PATH=/:/usr/bin"}},
		{"SHLVL bash warns about", "", "env", []string{"SHLVL=999"}},
		{"SHLVL not a number", "", "env", []string{"SHLVL=3x"}},
		{"OLDPWD relative", "", "env", []string{"OLDPWD=x"}},
		{"OLDPWD not canonical", "", "env", []string{"OLDPWD=/tmp/"}},
		{"another bash", "/tmp/bin/bash", "env", nil},
		{"a job", "", "%1 x", nil},
		{"an option", "", "-x arg", nil},
		{"a + option", "", "+x", nil},
		{"a locale that may be missing", "", "env", []string{"LC_ALL=en_US.UTF-8"}},
		{"bash's own variable", "", "env", []string{"BASH=/x"}},
		{"bash's own variable, not BASH", "", "env", []string{"RANDOM=4"}},
		{"the looking process's executable", "", "exe", []string{"PATH=/proc/self:/usr/bin"}},
		{"the looking process's descriptor", "", "0", []string{"PATH=/dev/fd:/usr/bin"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			shell := c.shell
			if shell == "" {
				shell = "/bin/bash"
			}
			env := append([]string{"HOME=/root"}, c.env...)
			if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
				env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
			}
			if _, args, _, ok := directCommand(shell, []string{"bash", "-c", c.cmd}, env); ok {
				t.Errorf("%q with %q would run without bash as %q", c.cmd, c.env, args)
			}
		})
	}
}

// FuzzPlainWords: what plainWords takes for plain words, bash splits into
// the same words, and bash would look its first word up along PATH (no
// builtin, keyword, alias or function of that name).
func FuzzPlainWords(f *testing.F) {
	for _, s := range []string{"git status", "ls  -la\tsrc", "go test ./...", "x,y:z@w%v+u a=b", "-n x", "if", "true", "[[", "declare", "."} {
		f.Add(s)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		f.Skip("no bash")
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, ok := plainWords(s)
		if !ok {
			return
		}
		out, err := exec.Command(bash, "-c", "type -t -- "+words[0]+"; set -- "+s+"; printf '%s\\0' \"$@\"").Output()
		if err != nil {
			t.Fatalf("bash on %q: %v", s, err)
		}
		kind, rest, _ := strings.Cut(string(out), "\n")
		if !strings.Contains(string(out), "\n") {
			kind, rest = "", string(out) // not found: type prints nothing
		}
		if kind != "" && kind != "file" {
			t.Errorf("%q: bash takes %q for a %s", s, words[0], kind)
		}
		if got := strings.Split(strings.TrimSuffix(rest, "\x00"), "\x00"); !slices.Equal(got, words) {
			t.Errorf("%q: bash's words %q, plainWords' %q", s, got, words)
		}
	})
}

// searchPath picks what bash picks: it passes over directories and files
// it may not execute, and takes any other file it may execute, a FIFO too.
func TestSearchPathAsBash(t *testing.T) {
	dir := t.TempDir()
	mk := func(sub, name string, mode os.FileMode, fifo bool) {
		p := filepath.Join(dir, sub, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		var err error
		switch {
		case fifo:
			err = unix.Mkfifo(p, 0o755)
		case mode&os.ModeDir != 0:
			err = os.Mkdir(p, 0o755)
		default:
			err = os.WriteFile(p, []byte("#!/bin/sh\n"), mode)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	mk("a", "tool", os.ModeDir, false)
	mk("b", "tool", 0o644, false)
	mk("c", "tool", 0o755, false)
	mk("a", "pipe", 0, true)
	mk("c", "pipe", 0o755, false)
	path := strings.Join([]string{filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")}, ":")
	for name, want := range map[string]string{"tool": "c/tool", "pipe": "a/pipe", "none": ""} {
		got, ok := searchPath(name, path)
		if want == "" && ok || want != "" && got != filepath.Join(dir, want) {
			t.Errorf("%s: got %q (%v), want %q", name, got, ok, want)
		}
	}
}

// Every variable that plainEnv lets through, bash passes on as it came:
// checked for bash's own (compgen -v, interactive or not) and the others
// its manual names.
func TestBashOwnVariables(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	var names []string
	for _, args := range [][]string{{"-c", "compgen -v"}, {"--norc", "-i", "-c", "compgen -v"}} {
		cmd := exec.Command(bash, args...)
		cmd.Env = []string{}
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.Fields(string(out))...)
	}
	names = append(names, "CDPATH", "GLOBIGNORE", "HISTFILE", "HISTSIZE", "HISTCONTROL", "MAIL", "MAILPATH", "MAILCHECK",
		"OPTARG", "PS3", "FUNCNAME", "PIPESTATUS", "COPROC", "READLINE_LINE", "INPUTRC", "TMOUT", "TIMEFORMAT", "FIGNORE",
		"HOSTFILE", "IGNOREEOF", "PROMPT_COMMAND", "CHILD_MAX", "COLUMNS", "LINES", "auto_resume", "histchars", "EMACS",
		"INSIDE_EMACS", "LANG", "LC_CTYPE", "LC_MESSAGES", "TEXTDOMAIN", "TEXTDOMAINDIR", "ENV", "POSIXLY_CORRECT", "EXECIGNORE")
	t.Chdir(t.TempDir())
	for _, name := range names {
		if name == "PATH" || name == "PWD" || name == "SHLVL" || name == "_" {
			continue // modelled (TestDirectCommandMatchesBash)
		}
		env := []string{"PATH=/usr/bin:/bin", name + "=sbx value 1"}
		_, _, _, ok := directCommand(bash, []string{"bash", "-c", "env"}, env)
		if !ok {
			continue // bash runs the command
		}
		cmd := exec.Command(bash, "-c", "env")
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(strings.Split(string(out), "\n"), name+"=sbx value 1") {
			t.Errorf("bash changes or drops %s, which plainEnv lets through", name)
		}
	}
}

// sameInEveryProcess follows links one by one and refuses a path that
// enters /proc, directly or through a link.
func TestSameInEveryProcess(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(prog, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"rel": "prog", "abs": prog, "self": "/proc/self/exe", "fd": "/dev/fd/0", "loop": "loop"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for p, want := range map[string]bool{
		prog: true, filepath.Join(dir, "rel"): true, filepath.Join(dir, "abs"): true, filepath.Join(dir, "..", filepath.Base(dir), "prog"): true,
		"/bin/sh": true, "/proc/self/exe": false, "/dev/fd/0": false, "/proc/1/exe": false,
		filepath.Join(dir, "self"): false, filepath.Join(dir, "fd"): false, filepath.Join(dir, "loop"): false, filepath.Join(dir, "none"): false,
	} {
		if got := sameInEveryProcess(p); got != want {
			t.Errorf("%s: %v, want %v", p, got, want)
		}
	}
}
