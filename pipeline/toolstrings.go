package pipeline

import (
	"path/filepath"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// npmStrings reads the commands npm runs from its own arguments: npm exec
// and npx-style calls (npm exec -- rm x, npm exec -c 'rm x', npm x
// --call=…), npm explore's command, and a script set with npm pkg set
// (then run by npm run): deny and ask rules see them, and allow rules must
// cover them. A script shell or node options chosen on the command line
// make it Unseen.
func (sp *splitter) npmStrings(sc SimpleCommand) {
	if !slices.ContainsFunc(sc.Args[1:], npmMayRun) {
		return // npm test, npm run build: nothing here runs a command
	}
	vals := staticValues(sc.Words[1:])
	sub, rest := "", []string(nil)
	// An option's value may be a separate word (--prefix dir): the
	// subcommands that run code are taken wherever they come first.
	if i := slices.IndexFunc(vals, func(v string) bool { return slices.Contains(npmRunning, v) }); i >= 0 {
		sub = vals[i]
	}
	for j := 0; j < len(vals); j++ {
		v := vals[j]
		switch {
		case v == "-c" || v == "--call":
			if j+1 < len(vals) {
				j++
				sp.inner(sc, vals[j], "npm --call")
			}
		case strings.HasPrefix(v, "--call="):
			sp.inner(sc, v[len("--call="):], "npm --call")
		case npmRiskyOpt(v) || v == "--shell":
			sp.unseen = "npm " + v + ": the shell or node options its scripts run with (or a config file that sets them) are chosen on the command line"
		case v == "--":
			if sub != "" {
				rest = vals[j+1:]
				j = len(vals)
			}
		case !strings.HasPrefix(v, "-") && sub == "":
			sub = v
		case v == sub:
		case !strings.HasPrefix(v, "-") && rest == nil && (sub == "exec" || sub == "x") && slices.Index(vals, sub) < j:
			rest = vals[j:] // npm exec rm x: the first operand is the command
			j = len(vals)
		}
	}
	switch sub {
	case "exec", "x":
		if len(rest) > 0 {
			sp.inner(sc, quoteWords(rest), "npm "+sub)
		}
	case "explore":
		if len(rest) > 0 {
			sp.inner(sc, strings.Join(rest, " "), "npm explore")
		}
	case "pkg", "set-script", "config", "set":
		sp.npmSet(sc, sub, vals)
	}
}

// npmRunning are npm's subcommands whose arguments hold code it runs.
var npmRunning = []string{"exec", "x", "explore", "pkg", "set-script", "config", "set"}

// npmMayRun reports whether an npm argument is one npmStrings reads.
func npmMayRun(a string) bool {
	return slices.Contains(npmRunning, a) || a == "-c" || a == "--shell" || strings.HasPrefix(a, "--call") ||
		npmRiskyOpt(a) || a == ""
}

// npmRiskyOpts choose the shell and node options npm's scripts run with,
// or a config file that may (script-shell=./evil.sh in --userconfig).
var npmRiskyOpts = []string{"--script-shell", "--node-options", "--userconfig", "--globalconfig"}

// npmRiskyOpt reports whether a is one of npmRiskyOpts, also abbreviated
// as npm's option parser expands it (--userc, --script-sh), with or
// without =VALUE; --global, an option of its own, is not.
func npmRiskyOpt(a string) bool {
	name, _, _ := strings.Cut(a, "=")
	return name != "--global" && slices.ContainsFunc(npmRiskyOpts, func(o string) bool {
		return name == o || len(name) >= 5 && strings.HasPrefix(o, name)
	})
}

// npmSet reads npm pkg set scripts.NAME=CODE (and npm set-script NAME
// CODE): the code npm run will run; npm config set of the script shell
// makes the command Unseen.
func (sp *splitter) npmSet(sc SimpleCommand, sub string, vals []string) {
	var ops []string
	for _, v := range vals {
		if !strings.HasPrefix(v, "-") {
			ops = append(ops, v)
		}
	}
	switch {
	case sub == "set-script" && len(ops) >= 3:
		sp.inner(sc, ops[2], "npm set-script")
	case sub == "pkg" && len(ops) >= 2 && ops[1] == "set":
		for _, kv := range ops[2:] {
			if k, code, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "scripts.") {
				sp.inner(sc, code, "npm pkg set "+k)
			}
		}
	case slices.ContainsFunc(ops, func(o string) bool {
		return strings.HasPrefix(o, "script-shell") || strings.HasPrefix(o, "node-options") || strings.HasPrefix(o, "shell")
	}):
		sp.unseen = "npm sets the shell or node options its scripts run with"
	}
}

// makeLongOpts are GNU make's long options, for abbreviations (make
// takes any unique prefix: --ev for --eval, --fil for --file).
var makeLongOpts = []string{"--always-make", "--directory", "--debug", "--environment-overrides", "--eval", "--file",
	"--makefile", "--help", "--ignore-errors", "--include-dir", "--jobs", "--keep-going", "--load-average",
	"--check-symlink-times", "--just-print", "--dry-run", "--recon", "--output-sync", "--old-file", "--assume-old",
	"--print-data-base", "--question", "--no-builtin-rules", "--no-builtin-variables", "--silent", "--quiet",
	"--no-silent", "--stop", "--no-keep-going", "--touch", "--trace", "--version", "--print-directory",
	"--no-print-directory", "--what-if", "--new-file", "--assume-new", "--warn-undefined-variables", "--shuffle"}

// makeValued are make's short options that take a value (glued or the
// next word).
const makeValued = "CfIoWE"

// makeStrings reads the recipes make runs from its own arguments: text
// given with --eval (-E), a makefile read from a here-string or
// here-document (make -f -, /dev/stdin …), and the values of variables
// defined on the command line (x:=$(shell …) and x!=cmd run as make reads
// them): their recipes and $(shell …) calls are shell code. A makefile
// from a process substitution, and a SHELL, .SHELLFLAGS or MAKEFLAGS
// given on the command line, make it Unseen.
func (sp *splitter) makeStrings(sc SimpleCommand, rs []*syntax.Redirect) {
	for j := 1; j < len(sc.Words); j++ {
		w := sc.Words[j]
		if w.Dynamic {
			switch prev := sc.Words[j-1]; {
			case j > 1 && !prev.Dynamic && makeTakesValue(prev.Values[0]):
				sp.unseen = "make reads a makefile known only when it runs"
			case makeSafePrefix(w.Prefix):
			case j == 1 || prev.Dynamic || !makeValuedOption(prev.Values[0]):
				// An option, or a variable definition, known only when it
				// runs: it could be --eval or x:=$(shell …).
				sp.unseen = "make has an argument known only when it runs"
			}
			continue
		}
		v := w.Values[0]
		next := func() (string, bool) {
			if j+1 < len(sc.Words) && !sc.Words[j+1].Dynamic {
				j++
				return sc.Words[j].Values[0], true
			}
			return "", false
		}
		switch opt, val, glued := strings.Cut(v, "="); {
		case strings.HasPrefix(v, "--"):
			long := longOption(opt, makeLongOpts)
			if long != "--eval" && long != "--file" && long != "--makefile" {
				continue
			}
			if !glued {
				if val, glued = next(); !glued {
					continue
				}
			}
			sp.makeValue(sc, rs, long == "--eval", val)
		case len(v) > 1 && v[0] == '-':
			// A cluster of short options: the first that takes a value
			// takes the rest of the word, or the next word.
			for k := 1; k < len(v); k++ {
				if !strings.ContainsRune(makeValued, rune(v[k])) {
					continue
				}
				val, ok := v[k+1:], k+1 < len(v)
				if !ok {
					val, ok = next()
				}
				if ok && (v[k] == 'E' || v[k] == 'f') {
					sp.makeValue(sc, rs, v[k] == 'E', val)
				}
				break
			}
		case makeControlVar(v):
			sp.unseen = "make " + v[:strings.IndexByte(v, '=')] + ": its recipes run with a shell, flags or makefiles chosen on the command line"
		case strings.Contains(v, "="):
			sp.makeVariable(sc, v)
		}
	}
}

// makeValuedOption reports whether a make option word takes the next
// word as a value that is no code: a directory, a job count, a file name
// (-C DIR, -j N, -o FILE, --directory DIR …).
func makeValuedOption(v string) bool {
	if strings.HasPrefix(v, "--") {
		l := longOption(v, makeLongOpts)
		return !strings.Contains(v, "=") && slices.Contains([]string{"--directory", "--include-dir", "--jobs", "--load-average",
			"--old-file", "--assume-old", "--what-if", "--new-file", "--assume-new"}, l)
	}
	return len(v) > 1 && v[0] == '-' && strings.ContainsRune("CIoWjl", rune(v[len(v)-1]))
}

// makeSafePrefix reports whether a make argument whose value is known only
// at run time starts as no code can: an option whose value follows
// (-j$(nproc), -C"$DIR") or a plain variable definition (V=$X, not :=,
// != or a control variable).
func makeSafePrefix(p string) bool {
	if strings.HasPrefix(p, "-") && !strings.HasPrefix(p, "--") {
		return strings.ContainsRune("CIoWjl", rune(p[len(p)-1])) && !strings.ContainsAny(p, "fE")
	}
	name, ok := strings.CutSuffix(p, "=")
	return ok && name != "" && strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == "" && !makeControlVar(p)
}

// makeControlVar reports whether a command-line variable definition sets
// what make runs recipes with or reads (SHELL, .SHELLFLAGS, MAKEFLAGS,
// MAKEFILES …), under any assignment operator or override.
func makeControlVar(v string) bool {
	name, _, _ := strings.Cut(v, "=")
	name = strings.TrimRight(strings.TrimPrefix(strings.TrimSpace(name), "override "), ":!+?")
	switch strings.TrimSpace(name) {
	case "SHELL", ".SHELLFLAGS", "MAKEFLAGS", "GNUMAKEFLAGS", "MAKEFILES", "MAKESHELL", ".DEFAULT_GOAL", "MAKE":
		return true
	}
	return false
}

// makeTakesValue reports whether a make option word takes the next word
// as a makefile or text to evaluate (-f, -E, --file, --makefile, --eval;
// -C DIR does not: a directory known at run time is no makefile).
func makeTakesValue(v string) bool {
	if strings.HasPrefix(v, "--") {
		l := longOption(v, makeLongOpts)
		return !strings.Contains(v, "=") && (l == "--eval" || l == "--file" || l == "--makefile")
	}
	if len(v) < 2 || v[0] != '-' {
		return false
	}
	i := strings.IndexAny(v[1:], makeValued) + 1
	return i > 0 && i == len(v)-1 && (v[i] == 'f' || v[i] == 'E')
}

// makeValue reads an --eval text, or the makefile of -f when it is
// standard input.
func (sp *splitter) makeValue(sc SimpleCommand, rs []*syntax.Redirect, eval bool, val string) {
	fd := descriptorPath(val)
	switch {
	case eval:
		sp.makefile(sc, val)
	case filepath.Clean(val) == "-" || fd == "0":
		// make takes ./- for standard input too (it drops a leading ./).
		sp.makefileFromInput(sc, rs)
	case fd != "" || strings.HasPrefix(filepath.Clean(val), "/proc/"):
		sp.unseen = "make reads a makefile from a descriptor"
	}
}

// makeVariable reads a variable defined on make's command line: a value
// expanded when it is read (:=, ::=, :::=, !=, and override) runs its
// $(shell …) calls; != runs the value itself.
func (sp *splitter) makeVariable(sc SimpleCommand, v string) {
	if i := strings.Index(v, "!="); i >= 0 {
		sp.inner(sc, v[i+2:], "make !=")
		return
	}
	sp.makefile(sc, v)
}

func (sp *splitter) makefileFromInput(sc SimpleCommand, rs []*syntax.Redirect) {
	if text, _, ok := sp.staticInput(rs, "0"); ok {
		sp.makefile(sc, text)
	} else {
		sp.unseen = "make reads a makefile from its input"
	}
}

// makefile reads the shell code of makefile text: each recipe line (after
// a tab, or after ";" on a rule line) and each $(shell …) call.
func (sp *splitter) makefile(sc SimpleCommand, text string) {
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "\t"):
			sp.inner(sc, strings.TrimLeft(line[1:], "@-+"), "make recipe")
		case strings.Contains(line, ":"):
			if _, after, ok := strings.Cut(line[strings.IndexByte(line, ':'):], ";"); ok {
				sp.inner(sc, strings.TrimLeft(strings.TrimSpace(after), "@-+"), "make recipe")
			}
		}
		for rest := line; ; {
			i := strings.Index(rest, "$(shell ")
			if i < 0 {
				break
			}
			rest = rest[i+len("$(shell "):]
			end := strings.LastIndexByte(rest, ')')
			if end < 0 {
				end = len(rest)
			}
			sp.inner(sc, rest[:end], "make $(shell)")
			rest = rest[end:]
		}
	}
}

// goStrings reads the commands go runs from its own flags: -exec (go run
// and go test run the binary through it) and -toolexec (every compiler
// and linker step): deny and ask rules see them, and allow rules must
// cover them (Bash(go test:*) does not vouch for go test -exec 'rm x').
func (sp *splitter) goStrings(sc SimpleCommand) {
	vals := staticValues(sc.Words[1:])
	for j := 0; j < len(vals); j++ {
		name, val, glued := strings.Cut(strings.TrimPrefix(vals[j], "-"), "=")
		if name != "-exec" && name != "exec" && name != "-toolexec" && name != "toolexec" {
			continue
		}
		if !glued {
			if j++; j >= len(vals) {
				return
			}
			val = vals[j]
		}
		sp.inner(sc, val, "go -"+strings.TrimPrefix(name, "-"))
	}
}

// cargoStrings: configuration given on cargo's command line (--config
// 'target.x.runner="…"', -Z unstable options) can name programs cargo
// runs, which no rule sees.
func (sp *splitter) cargoStrings(sc SimpleCommand) {
	for _, v := range staticValues(sc.Words[1:]) {
		if v == "--config" || strings.HasPrefix(v, "--config=") || v == "-Z" || strings.HasPrefix(v, "-Z") && len(v) > 2 {
			sp.unseen = "cargo " + v + ": configuration given on the command line can name programs cargo runs"
			return
		}
	}
}

// runners run a command given as their operands, after options of their
// own that sbx does not parse (taskset 1 rm x, chrt -f 10 rm x, busybox
// rm x, strace -f rm x …).
var runners = []string{"chrt", "taskset", "unshare", "setpriv", "runuser", "setsid", "pkexec", "chroot", "prlimit",
	"numactl", "strace", "ltrace", "valgrind", "fakeroot", "systemd-run", "busybox", "ionice", "flock", "watch",
	"nsenter", "firejail", "proot", "torsocks", "torify", "proxychains", "proxychains4", "xvfb-run",
	"dbus-run-session", "unbuffer", "catchsegv", "sg", "su", "script", "ssh-agent", "chronic", "cgexec", "schedtool",
	"setarch", "linux32", "linux64", "i386", "x86_64", "eatmydata", "faketime", "gdb", "bwrap", "ld.so",
	"ld-linux.so.2", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "parallel", "capsh", "start-stop-daemon",
	"cpulimit", "trickle", "rlwrap", "chpst", "perf", "entr", "expect", "nocache", "run0", "npx", "pipx", "uvx"}

// runnerSet is runners for lookups (read only): the check runs for every
// command of every decision.
var runnerSet = setOf(runners)

// setOf makes a lookup set of names.
func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// stringRunner reports whether the runner takes its command as the string
// of -c (also at the end of an option cluster: su -lc, script -qc).
func stringRunner(name string) bool {
	return name == "su" || name == "runuser" || name == "script" || name == "flock" || name == "sg"
}

// runnerCode is the command a runner's operands make: watch joins them
// into a string it hands to sh -c, the others run them as words.
func runnerCode(name string, ops []string) string {
	if name == "watch" {
		return strings.Join(ops, " ")
	}
	return quoteWords(ops)
}

// maxRunnerGuesses bounds the operands read as the start of a runner's
// command.
const maxRunnerGuesses = 6

// runnerStrings reads what a runner may run: every operand after its
// options could start the command (its own options' values are not told
// apart), so each is read as the start of one, and the strings of -c /
// --command (su, runuser, script, flock, sg) and watch's joined operands
// as shell code. Deny and ask rules then see the command; allow rules
// must cover every guess, so a runner is approved only by a rule that
// covers what it runs too.
func (sp *splitter) runnerStrings(sc SimpleCommand, name string) {
	vals := staticValues(sc.Words[1:])
	if len(vals) < len(sc.Words)-1 {
		sp.unseen = name + " runs a command whose words are known only when it runs"
	}
	guesses := 0
	for j := 0; j < len(vals) && guesses < maxRunnerGuesses; j++ {
		v := vals[j]
		long, val, glued := strings.Cut(v, "=")
		switch {
		case v == "--":
			// The rest is the command (watch joins it into a string).
			if j+1 < len(vals) {
				sp.inner(sc, runnerCode(name, vals[j+1:]), name)
			}
			return
		case long == "--command" || long == "--session-command":
			if !glued && j+1 < len(vals) {
				j++
				val = vals[j]
			}
			sp.inner(sc, val, name+" "+long)
			guesses++
		case stringRunner(name) && len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.Contains(v, "c"):
			// -c STRING, -lc STRING, or the string glued: -c'rm x'.
			if code := v[strings.IndexByte(v, 'c')+1:]; code != "" {
				sp.inner(sc, code, name+" -c")
			} else if j+1 < len(vals) {
				j++
				sp.inner(sc, vals[j], name+" "+v)
			}
			guesses++
		case v != "" && !strings.HasPrefix(v, "-"):
			sp.inner(sc, runnerCode(name, vals[j:]), name)
			guesses++
		}
	}
}

// programFlags are options whose value is a command the program runs
// (through sh -c, or a program with its arguments): read as shell code.
var programFlags = map[string][]string{
	"tar":  {"--use-compress-program", "--to-command", "--info-script", "--new-volume-script", "--rsh-command", "--checkpoint-action"},
	"gtar": {"--use-compress-program", "--to-command", "--info-script", "--new-volume-script", "--rsh-command", "--checkpoint-action"},
	"sort": {"--compress-program"},
}

// unseenFlags are options that make a program run what sbx cannot read
// (less's lesskey sources set LESSOPEN), long ones and the letters that
// stand for them in a cluster of short options (tar -I PROG, -F SCRIPT).
var unseenFlags = map[string]struct {
	long    []string
	letters string
}{
	"tar":  {nil, "IF"},
	"gtar": {nil, "IF"},
	"less": {[]string{"--lesskey-file", "--lesskey-src", "--lesskey-content", "--log-file", "--LOG-FILE"}, "kOo"},
}

// programOptions reads the commands a program's own options run (tar
// --use-compress-program, --checkpoint-action=exec=…, sort
// --compress-program …) as shell code, under any unique abbreviation of
// the long option; an option that runs what sbx cannot read makes the
// command Unseen.
func (sp *splitter) programOptions(sc SimpleCommand, name string) {
	vals := make([]string, 0, len(sc.Words)-1)
	for j, w := range sc.Words[1:] {
		if !w.Dynamic {
			vals = append(vals, w.Values...)
			continue
		}
		vals = append(vals, "") // keeps the positions
		if prev := sc.Words[j]; (name == "tar" || name == "gtar") && (j == 0 || prev.Dynamic || !tarValuedOption(prev.Values[0], j == 1)) {
			sp.unseen = name + " has an argument known only when it runs (it could be an option that runs a command)"
		}
	}
	for j := 0; j < len(vals); j++ {
		v := vals[j]
		opt, val, glued := strings.Cut(v, "=")
		if name == "less" {
			opt = strings.ToLower(opt) // less takes its long options in any case
		}
		if long := longOption(opt, programFlags[name]); long != "" {
			if !glued {
				if j++; j >= len(vals) {
					return
				}
				val = vals[j]
			}
			if long == "--checkpoint-action" {
				code, ok := strings.CutPrefix(val, "exec=")
				if !ok {
					continue
				}
				val = code
			}
			sp.inner(sc, val, name+" "+long)
			continue
		}
		u := unseenFlags[name]
		cluster := len(v) > 1 && v[0] == '-' && v[1] != '-' || j == 0 && (name == "tar" || name == "gtar") && !strings.HasPrefix(v, "-")
		if longOption(opt, u.long) != "" || cluster && strings.ContainsAny(v, u.letters) && u.letters != "" {
			sp.unseen = name + " " + v + ": it runs what sbx cannot read"
		}
	}
}

// tarValuedOption reports whether a tar option word takes the next word
// as a value that is no command (an archive, a directory, a list file):
// a short option or an old-style first word ending in one of those
// letters, or such a long option.
func tarValuedOption(v string, first bool) bool {
	if strings.HasPrefix(v, "--") {
		return !strings.Contains(v, "=") && longOption(v, []string{"--file", "--directory", "--files-from", "--exclude-from",
			"--listed-incremental", "--label", "--newer", "--after-date", "--owner", "--group", "--mode", "--exclude"}) != ""
	}
	return (strings.HasPrefix(v, "-") || first) && len(v) > 1 && strings.ContainsRune("fCTXgbHLK", rune(v[len(v)-1]))
}

// longOption returns the option of longs that opt spells, whole or as an
// abbreviation of at least "--" and two letters ("" if none).
func longOption(opt string, longs []string) string {
	if len(opt) < 4 || !strings.HasPrefix(opt, "--") {
		return ""
	}
	for _, l := range longs {
		if strings.HasPrefix(l, opt) {
			return l
		}
	}
	return ""
}
