package pipeline

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// wrapper describes a command that runs the rest of its words as another
// command: how many of its own words (options and their arguments) to
// skip, and what running through it means.
type wrapper struct {
	skip       func(args []string) int
	privileged bool // sudo, doas
	stdin      bool // xargs: more arguments from standard input
	env        bool // env: NAME=VALUE words are assignments
}

// wrappers are stripped before matching, with the options they take.
var wrappers = map[string]wrapper{
	"timeout": {skip: func(a []string) int { return skipOpts(a, []string{"-k", "--kill-after", "-s", "--signal"}) + 1 }},
	"time":    {skip: func(a []string) int { return skipOpts(a, nil) }},
	"nice":    {skip: func(a []string) int { return skipOpts(a, []string{"-n", "--adjustment"}) }},
	"nohup":   {skip: func(a []string) int { return 0 }},
	"stdbuf":  {skip: func(a []string) int { return skipOpts(a, []string{"-i", "-o", "-e"}) }},
	"command": {skip: func(a []string) int { return skipOpts(a, nil) }},
	"builtin": {skip: func(a []string) int { return 0 }},
	"noglob":  {skip: func(a []string) int { return 0 }},
	"exec":    {skip: func(a []string) int { return skipOpts(a, []string{"-a"}) }},
	// time -- rm x, eval -- 'rm x', nohup -- rm x: bash's time keyword,
	// eval and nohup take the end of options; a "--" left in front of a
	// command is stripped as they strip it.
	"--": {skip: func(a []string) int { return 0 }},
	"env": {skip: func(a []string) int {
		start, _, _ := envArgs(a)
		return start
	}, env: true},
	"sudo": {skip: func(a []string) int {
		return skipOpts(a, []string{"-u", "--user", "-g", "--group", "-C", "--close-from", "-D", "--chdir", "-h", "--host", "-p", "--prompt", "-r", "--role", "-t", "--type", "-T", "--command-timeout", "-U", "--other-user"})
	}, privileged: true},
	"doas": {skip: func(a []string) int { return skipOpts(a, []string{"-u", "-C"}) }, privileged: true},
	"xargs": {skip: func(a []string) int {
		// -e, -i and -l take their argument glued only (-i{}), never apart.
		return skipOpts(a, []string{"-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "-n", "--max-args", "-P", "--max-procs", "-s", "--max-chars", "--process-slot-var"})
	}, stdin: true},
}

// skipOpts counts leading options; those in withArg take the next word
// (unless glued to it: -n5, --max-args=5), also at the end of a cluster
// (-rn 1, -vs KILL) and abbreviated as getopt_long allows (--sig KILL).
func skipOpts(a []string, withArg []string) int {
	i := 0
	for i < len(a) && strings.HasPrefix(a[i], "-") && a[i] != "-" {
		if a[i] == "--" {
			return i + 1
		}
		if takesNext(a[i], withArg) {
			i++
		}
		i++
	}
	return i
}

// takesNext reports whether option word o leaves its argument to the next
// word: it is one of withArg, a long one's abbreviation without "=", or a
// cluster whose first letter that takes an argument is its last.
func takesNext(o string, withArg []string) bool {
	if slices.Contains(withArg, o) {
		return true
	}
	if strings.HasPrefix(o, "--") {
		return !strings.Contains(o, "=") && slices.ContainsFunc(withArg, func(w string) bool {
			return strings.HasPrefix(w, "--") && strings.HasPrefix(w, o)
		})
	}
	for k := 1; k < len(o); k++ {
		if slices.Contains(withArg, "-"+o[k:k+1]) {
			return k == len(o)-1
		}
	}
	return false
}

var execWrappers = []string{"watch", "setsid", "ionice", "flock"}

// shells run the string after -c as commands of their own.
var shells = []string{"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "yash", "posh", "lksh", "sh.distrib", "ksh93", "pdksh", "oksh", "loksh", "bash5"}

// foreignShells run a string of a language sbx does not read: what they
// run is Unseen.
var foreignShells = []string{"fish", "csh", "tcsh", "xonsh", "nu", "elvish", "rc", "es", "ion", "pwsh", "powershell"}

// systemDirs are where a program named by path is the same program as by
// its name.
var systemDirs = []string{"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"}

// progName is the name rules and checks know a program by: the base name
// of a path (/bin/rm is rm), and whether that path is a system directory's
// (so the program is the one of that name).
func progName(arg string) (name string, system bool) {
	if !strings.Contains(arg, "/") {
		return arg, true
	}
	return filepath.Base(arg), slices.Contains(systemDirs, filepath.Dir(arg))
}

func (sp *splitter) simple(ce *syntax.CallExpr, rs []*syntax.Redirect) SimpleCommand {
	sc := SimpleCommand{Redirects: sp.redirects(rs), Dynamic: sp.hasSubst(ce), Dirs: sp.dirs, UnsafeEnv: sp.tainted}
	// Words that expand to nothing ({,}) vanish, as in bash.
	n := len(ce.Args)
	words, first := sp.wordSlices(n) // first: each word's first value
	args := make([]*syntax.Word, 0, n)
	for _, w := range ce.Args {
		if v, ok := plainWord(w); ok {
			// The common case, without an allocation: the value is
			// first's, which only grows.
			first, args = append(first, v), append(args, w)
			words = append(words, Word{Values: first[len(first)-1 : len(first) : len(first)]})
			continue
		}
		ew := expandWord(w, sp.home, sp.dir())
		// Each value of a brace expansion is an argument of its own:
		// {rm,ls} -rf ~ runs rm.
		for i, v := range ew.Values {
			words = append(words, Word{Values: ew.Values[i : i+1 : i+1], Dynamic: ew.Dynamic, Glob: ew.Glob, Prefix: ew.Prefix})
			first, args = append(first, v), append(args, w)
		}
	}
	tainted := sc.UnsafeEnv
	sp.envNames = sp.envNames[:0]
	start := sp.stripWrappers(&sc, words, first)
	// env NAME=VALUE with a name off the safe list: allow rules see the
	// command with its wrappers, as they see a leading assignment.
	envUnsafe := sc.UnsafeEnv && !tainted
	wargs := args[start:]
	sc.Words = words[start:]
	if start < len(first) {
		sc.Args = first[start:len(first):len(first)]
	}
	if len(wargs) > 0 {
		sc.Text = sp.src[wargs[0].Pos().Offset():wargs[len(wargs)-1].End().Offset()]
		// A glob names the program only when it runs (/bin/r? x).
		sc.DynamicName = sc.Words[0].Dynamic || sc.Words[0].Glob
	}
	sc.Norm = norm(sc.Words, wargs, sp.src, sc.Text)
	sc.AllowText = sc.Text
	if envUnsafe {
		sc.AllowText = src(sp.src, ce)
	}
	sp.assigns(&sc, ce, wargs, start)
	sp.subscripts(&sc, ce.Assigns)
	if len(sc.Args) > 0 {
		sp.builtinVars(&sc)
		sc.Linked = sp.linked
		if makesLink(sc.Args) {
			sp.linked = true
		}
		sp.nameOperands(&sc, wargs)
		name, _ := progName(sc.Args[0])
		sc.ExecWrapper = slices.Contains(execWrappers, name) || name == "find" && slices.ContainsFunc(sc.Args[1:], func(a string) bool {
			return a == "-exec" || a == "-execdir" || a == "-ok" || a == "-okdir" || a == "-delete"
		})
		sp.shellString(sc, rs)
		sp.renamed(&sc, name)
	}
	sc.Unseen, sp.unseen = sp.unseen, ""
	if sc.FromStdin && len(sc.Args) > 0 && stdinProgram(&sc) {
		sc.Unseen = "xargs gives it, from its input, the program or the code it runs"
	}
	return sc
}

// assigns reads the command's leading assignments: their names (for
// git), their values bash runs as code, and whether one is off the safe
// list (then allow rules match the command with them).
func (sp *splitter) assigns(sc *SimpleCommand, ce *syntax.CallExpr, wargs []*syntax.Word, start int) {
	for _, a := range ce.Assigns {
		if a.Name == nil {
			continue
		}
		sp.envNames = append(sp.envNames, a.Name.Value)
		if a.Value != nil {
			if w := expandWord(a.Value, sp.home, sp.dir()); !w.Dynamic && len(w.Values) == 1 {
				sp.envCode(*sc, a.Name.Value, w.Values[0])
			}
		}
	}
	for _, a := range ce.Assigns {
		if a.Name == nil || !slices.Contains(safeEnvVars, a.Name.Value) {
			sc.UnsafeEnv = true
			if len(wargs) > 0 && start == 0 {
				sc.AllowText = sp.src[ce.Assigns[0].Pos().Offset():wargs[len(wargs)-1].End().Offset()]
			} else {
				sc.AllowText = src(sp.src, ce)
			}
			return
		}
	}
}

// envCode reads an assignment that bash runs as code: an exported
// function (BASH_FUNC_f%%='() { rm x; }') is read as its definition is;
// BASH_ENV and ENV name a file a shell reads first, which no rule sees.
func (sp *splitter) envCode(sc SimpleCommand, name, val string) {
	switch {
	case strings.HasPrefix(name, "BASH_FUNC_") && strings.HasPrefix(val, "()"):
		sp.inner(sc, "f"+val, "an exported function")
	case name == "BASH_ENV" || name == "ENV":
		sp.unseen = name + " names a file the shell reads first"
	}
}

// stripWrappers skips wrappers (timeout 30 npm test → npm test) and
// returns where the command proper starts. `command -v` is a lookup, not a
// wrapper.
func (sp *splitter) stripWrappers(sc *SimpleCommand, words []Word, first []string) int {
	start := 0
	for start < len(words) {
		name, _ := progName(first[start])
		wr, ok := wrappers[name]
		if !ok || words[start].Dynamic || (name == "command" && start+1 < len(first) && (first[start+1] == "-v" || first[start+1] == "-V")) {
			break
		}
		if _, _, split := envArgs(first[start+1:]); name == "env" && split {
			break // env -S: its string is the command (shellString)
		}
		n := 1 + wr.skip(first[start+1:])
		if wr.env {
			for start+n < len(first) && strings.Contains(first[start+n], "=") {
				k, v, _ := strings.Cut(first[start+n], "=")
				if !slices.Contains(safeEnvVars, k) {
					sc.UnsafeEnv = true
				}
				sp.envNames = append(sp.envNames, k)
				if !words[start+n].Dynamic {
					sp.envCode(*sc, k, v)
				}
				n++
			}
		}
		if start+n >= len(words) {
			break // a wrapper with nothing to run
		}
		switch name {
		case "exec":
			sp.argv0, sp.argv0Dynamic = execName(first[start+1:start+n], words[start+1:start+n])
		case "env":
			sp.argv0, sp.argv0Dynamic = envName(first[start+1:start+n], words[start+1:start+n])
		}
		sc.Privileged = sc.Privileged || wr.privileged
		sc.FromStdin = sc.FromStdin || wr.stdin
		sc.Wrappers = append(sc.Wrappers, name)
		start += n
	}
	return start
}

// norm joins the expanded words with single spaces, the program by its
// base name; a dynamic word stays as written.
func norm(words []Word, raw []*syntax.Word, source, text string) string {
	// The common case: the words are written as bash runs them, one space
	// apart, so the normal form is the text itself.
	off := 0
	if normPieces(words, raw, source, func(p string) bool {
		if off > 0 {
			if off >= len(text) || text[off] != ' ' {
				return false
			}
			off++
		}
		if !strings.HasPrefix(text[off:], p) {
			return false
		}
		off += len(p)
		return true
	}) && off == len(text) {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	normPieces(words, raw, source, func(p string) bool {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p)
		return true
	})
	return b.String()
}

// normPieces gives add the pieces of the normal form in order, until add
// returns false; it reports whether every piece was taken.
func normPieces(words []Word, raw []*syntax.Word, source string, add func(string) bool) bool {
	for i, w := range words {
		switch {
		case w.Dynamic:
			if !add(src(source, raw[i])) {
				return false
			}
		case i == 0:
			name, _ := progName(w.Values[0])
			if !add(name) {
				return false
			}
			for _, v := range w.Values[1:] {
				if !add(v) {
					return false
				}
			}
		default:
			for _, v := range w.Values {
				if !add(v) {
					return false
				}
			}
		}
	}
	return true
}

// wordSlices returns empty slices with room for n words and their first
// values, cut from blocks the splitter shares among its commands (a
// command's slices never grow into another's: their capacity is n).
func (sp *splitter) wordSlices(n int) ([]Word, []string) {
	if cap(sp.words)-len(sp.words) < n {
		sp.words = make([]Word, 0, max(n, 32))
		sp.firsts = make([]string, 0, max(n, 32))
	}
	l := len(sp.words)
	sp.words, sp.firsts = sp.words[:l+n], sp.firsts[:l+n]
	return sp.words[l : l : l+n], sp.firsts[l : l : l+n]
}

// shellString adds the commands of sh -c 'STRING' (and bash, zsh …) as
// commands of their own, so every rule and check sees them.
func (sp *splitter) shellString(sc SimpleCommand, rs []*syntax.Redirect) {
	name, _ := progName(sc.Args[0])
	switch name {
	case "git":
		sp.gitStrings(sc) // at any depth: inner refuses what is too deep
		return
	case "npm":
		sp.npmStrings(sc)
		return
	case "make", "gmake":
		sp.makeStrings(sc, rs)
		return
	case "go":
		sp.goStrings(sc)
		return
	case "cargo":
		sp.cargoStrings(sc)
		return
	case "tar", "gtar", "sort", "less":
		sp.programOptions(sc, name)
		return
	}
	if runnerSet[name] {
		sp.runnerStrings(sc, name)
		return
	}
	if sp.depth > 4 {
		if name == "trap" || name == "eval" || name == "env" || slices.Contains(shells, name) {
			// Deeper strings are not read: no rule may vouch for them,
			// and deny and ask rules cannot be shown to miss them.
			sp.pc.Unparseable, sp.pc.Reason = true, "shell code nested more than 5 levels deep"
		}
		return
	}
	if name == "trap" {
		ops, _ := operands(sc.Words[1:])
		if len(ops) > 1 && !ops[0].Dynamic && ops[0].Values[0] != "-" {
			sp.inner(sc, ops[0].Values[0], "trap")
		}
		return
	}
	if name == "eval" && len(sc.Words) > 1 {
		var parts []string
		for _, w := range sc.Words[1:] {
			if w.Dynamic {
				return // computed: the eval itself asks
			}
			parts = append(parts, w.Values...)
		}
		sp.inner(sc, strings.Join(parts, " "), name)
		return
	}
	if name == "env" {
		// Left unstripped only when it has -S (or nothing to run).
		if code, ok := splitString(sc.Words[1:]); ok {
			sp.inner(sc, code, "env -S")
		}
		return
	}
	switch {
	case slices.Contains(shells, name):
		sp.shellArgs(sc, rs, name)
	case slices.Contains(foreignShells, name) && len(sc.Words) > 1:
		sp.unseen = name + " runs code of a language sbx does not read"
	case name == "source" || name == ".":
		sp.sourceArgs(sc, rs, name)
	case name == "mapfile" || name == "readarray":
		sp.mapfileCallback(sc, name)
	}
}

// sourceArgs reads the script that source (or .) runs in this shell when
// it is a descriptor with static content (source /dev/stdin <<< 'rm x');
// a script that a process substitution makes (. <(…)) is Unseen; a script
// file is not read (an allow rule for source vouches for it).
func (sp *splitter) sourceArgs(sc SimpleCommand, rs []*syntax.Redirect, name string) {
	if len(sc.Words) < 2 {
		return
	}
	w := sc.Words[1]
	if w.Dynamic {
		sp.unseen = name + " runs a script known only when it runs"
		return
	}
	if a := w.Values[0]; a == "--" && len(sc.Words) > 2 && !sc.Words[2].Dynamic {
		w = sc.Words[2] // source -- FILE
	}
	switch fd := descriptorPath(w.Values[0]); {
	case w.Values[0] == "-":
		sp.fdScript(sc, rs, name, "0")
	case fd == "?":
		sp.unseen = name + " runs a script from another process's descriptor"
	case fd != "":
		sp.fdScript(sc, rs, name, fd)
	}
}

// mapfileCallback reads the callback mapfile -C runs every -c lines as
// shell code.
func (sp *splitter) mapfileCallback(sc SimpleCommand, name string) {
	vals := staticValues(sc.Words[1:])
	if len(vals) < len(sc.Words)-1 {
		sp.unseen = name + " has options known only when it runs (-C runs code)"
		return
	}
	for j := 0; j < len(vals); j++ {
		v := vals[j]
		i := strings.IndexByte(v, 'C')
		if len(v) < 2 || v[0] != '-' || v == "--" || i < 0 {
			continue
		}
		// -C CODE, -C'CODE', or C ending a cluster (-tC CODE): what
		// follows it is the callback (read as code even where an earlier
		// letter took it as its value: stricter).
		if code := v[i+1:]; code != "" {
			sp.inner(sc, code, name+" -C")
		} else if j+1 < len(vals) {
			j++
			sp.inner(sc, vals[j], name+" -C")
		}
	}
}

// shellArgs reads a shell's arguments as bash reads them: the string of
// -c, or the script read from standard input or a descriptor.
func (sp *splitter) shellArgs(sc SimpleCommand, rs []*syntax.Redirect, name string) {
	// With -c, the string is the first operand after every option (bash
	// -c -o pipefail 'STRING', sh -c -- 'STRING'); without, a script file,
	// or, with no operand or with -s, standard input.
	withC, withS := false, false
	for i := 1; i < len(sc.Words); i++ {
		a := sc.Words[i].Values[0]
		switch {
		case sc.Words[i].Dynamic:
			return // computed options or string: the outer command asks
		case a == "--" || a == "-":
			switch {
			case withC && i+1 < len(sc.Words) && !sc.Words[i+1].Dynamic:
				sp.inner(sc, sc.Words[i+1].Values[0], name+" -c")
			case !withC && (withS || i+1 == len(sc.Words)):
				sp.stdinScript(sc, rs, name)
			}
			return
		case strings.HasPrefix(a, "--") || slices.Contains(shellLongOpts, a):
			// --norc, --login, and bash's single-dash spellings (-rcfile)
			if o := strings.TrimLeft(a, "-"); o == "rcfile" || o == "init-file" {
				i++
			}
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			// A cluster (-euo pipefail, +c): c reads the string, o and O
			// take the next word each.
			for _, ch := range a[1:] {
				switch ch {
				case 'c':
					withC = true
				case 's':
					withS = true
				case 'o', 'O':
					i++
				}
			}
		default:
			switch {
			case withC:
				sp.inner(sc, a, name+" -c")
			case withS:
				sp.stdinScript(sc, rs, name) // the operands are $1 …
			case descriptorPath(a) == "?":
				sp.unseen = name + " reads its script from another process's descriptor"
			case descriptorPath(a) != "":
				sp.fdScript(sc, rs, name, descriptorPath(a))
			}
			return // else a script file: not a string we can read
		}
	}
	if !withC {
		sp.stdinScript(sc, rs, name)
	}
}

// stdinScript reads, as the commands of a shell that reads them from its
// standard input, a here-string or here-document given to it with static
// content (bash <<< 'rm -rf x', sh <<'EOF'): deny and ask rules see them as
// they see sh -c's string. Input from a file or a pipe is not read.
func (sp *splitter) stdinScript(sc SimpleCommand, rs []*syntax.Redirect, name string) {
	sp.fdScript(sc, rs, name, "0")
}

// fdScript is stdinScript for the script a shell reads from descriptor fd
// (bash /dev/stdin, bash 3<<< 'rm x' /dev/fd/3).
func (sp *splitter) fdScript(sc SimpleCommand, rs []*syntax.Redirect, name, fd string) {
	if code, how, ok := sp.staticInput(rs, fd); ok {
		sp.inner(sc, code, name+" "+how)
	}
}

// staticInput returns what descriptor fd reads when a here-string or a
// here-document with static content gives it, and which of the two.
func (sp *splitter) staticInput(rs []*syntax.Redirect, fd string) (text, how string, ok bool) {
	var in *syntax.Redirect
	for _, r := range rs {
		if r.N == nil && fd == "0" && (r.Op == syntax.RdrIn || r.Op == syntax.RdrInOut || r.Op == syntax.DplIn || r.Op == syntax.Hdoc ||
			r.Op == syntax.DashHdoc || r.Op == syntax.WordHdoc) || r.N != nil && r.N.Value == fd {
			in = r // the last one wins
		}
	}
	switch {
	case in == nil:
	case in.Op == syntax.WordHdoc:
		w := expandWord(in.Word, sp.home, sp.dir())
		if !w.Dynamic && len(w.Values) == 1 {
			return w.Values[0] + "\n", "<<<", true
		}
	case (in.Op == syntax.Hdoc || in.Op == syntax.DashHdoc) && in.Hdoc != nil:
		var b strings.Builder
		for _, p := range in.Hdoc.Parts {
			lit, ok := p.(*syntax.Lit)
			if !ok {
				return "", "", false // an expansion: known only when it runs
			}
			b.WriteString(lit.Value)
		}
		if code := b.String(); !strings.Contains(code, "\\") || quotedDelim(in.Word) {
			return code, "<<", true
		}
	}
	return "", "", false
}

// quotedDelim reports whether a here-document's delimiter is quoted (its
// body is then taken as written, backslashes too).
func quotedDelim(w *syntax.Word) bool {
	return slices.ContainsFunc(w.Parts, func(p syntax.WordPart) bool {
		switch p := p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			return true
		case *syntax.Lit:
			return strings.Contains(p.Value, "\\")
		}
		return false
	})
}

// shellLongOpts are bash's long options as it also takes them, after one
// dash.
var shellLongOpts = []string{"-rcfile", "-init-file", "-norc", "-noprofile", "-login", "-posix", "-verbose", "-debugger",
	"-noediting", "-restricted", "-dump-strings", "-dump-po-strings", "-help", "-version", "-pretty-print"}

// envArgs reads env's options (args after its name) as env's getopt_long
// does: clusters (-iu NAME), abbreviations (--chd DIR, --split=…), a lone
// "-" (-i). It returns where the command (or its assignments) starts and,
// for -S/--split-string, the string, whose words env reads as its own
// arguments.
func envArgs(args []string) (start int, split string, hasSplit bool) {
	i := 0
	for i < len(args) {
		a := args[i]
		switch {
		case a == "--":
			return i + 1, "", false
		case a == "-":
			i++
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			switch {
			case strings.HasPrefix("split-string", name):
				if hasVal {
					return i + 1, val, true
				}
				if i+1 < len(args) {
					return i + 2, args[i+1], true
				}
				return len(args), "", false
			case !hasVal && (strings.HasPrefix("unset", name) || strings.HasPrefix("chdir", name) || strings.HasPrefix("argv0", name)):
				i += 2
			default:
				i++
			}
		case strings.HasPrefix(a, "-"):
			i++
			for k := 1; k < len(a); k++ {
				switch a[k] {
				case 'S':
					if k+1 < len(a) {
						return i, a[k+1:], true
					}
					if i < len(args) {
						return i + 1, args[i], true
					}
					return i, "", false
				case 'u', 'C', 'a':
					if k+1 == len(a) {
						i++ // the argument is the next word
					}
					k = len(a) // else the rest of the word is
				}
			}
		default:
			return i, "", false
		}
	}
	return i, "", false
}

// splitString is the command env -S runs: env again, with the words of
// the string (env splits them much as a shell would) and the operands
// after it as its arguments.
func splitString(words []Word) (string, bool) {
	args := make([]string, len(words))
	for i, w := range words {
		if w.Dynamic {
			return "", false
		}
		args[i] = w.Values[0]
	}
	start, code, ok := envArgs(args)
	if !ok {
		return "", false
	}
	// env splits the string into its own arguments (not shell code), and
	// reads them before the operands after it, which are words as they are.
	split, ok := envSplit(code)
	if !ok {
		return "", false
	}
	return strings.TrimSpace("env " + quoteWords(split) + " " + quoteWords(args[start:])), true
}

// quoteWords quotes each word for the shell, so it is read back as it is;
// a word of plain characters stays as it is (allow rules match the text).
func quoteWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+:,./-") == "" {
			q[i] = w
			continue
		}
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// inner adds the commands of a string that sc runs as shell code.
func (sp *splitter) inner(sc SimpleCommand, code, what string) {
	if sp.depth > 4 || sp.root.budget <= 0 {
		// Not read: no rule may vouch for it, and deny and ask rules
		// cannot be shown to miss it.
		sp.pc.Unparseable, sp.pc.Reason = true, fmt.Sprintf("shell code nested more than 5 levels deep, or more than %d strings of shell code", maxStrings)
		return
	}
	sp.root.budget--
	sub := &splitter{src: code, home: sp.home, dirs: sp.dirs, tainted: sp.tainted || sc.UnsafeEnv, depth: sp.depth + 1, pc: &ParsedCommand{}, root: sp.root}
	f, err := parseBash(code)
	if err != nil {
		sp.pc.Pieces = append(sp.pc.Pieces, pieces(code)...)
		sp.pc.Unparseable, sp.pc.Reason = true, "the string of "+what+" cannot be parsed: "+err.Error()
		return
	}
	sub.walk(f)
	if what == "eval" || what == "trap" {
		// They run in this shell: their cd and assignments reach the
		// commands after them (sh -c's stay in its own process).
		for _, d := range sub.dirs {
			sp.dirs = appendDir(sp.dirs, d)
		}
		sp.tainted = sp.tainted || sub.tainted
	}
	for _, c := range sub.pc.Commands {
		c.Privileged = c.Privileged || sc.Privileged
		sp.pc.Commands = append(sp.pc.Commands, c)
	}
	sp.pc.Pieces = append(sp.pc.Pieces, sub.pc.Pieces...)
	if sub.pc.Unparseable {
		sp.pc.Unparseable, sp.pc.Reason = true, sub.pc.Reason
	}
}

// follow tracks cd and pushd: later commands may run in the new
// directory, or, when the string is not that simple (a subshell, a
// condition), still in the old one; both stay candidates. A target that
// cannot be known makes the directory unknown.
func (sp *splitter) follow(sc SimpleCommand) {
	if len(sc.Args) == 0 {
		return
	}
	switch sc.Args[0] {
	case "cd", "pushd":
	case "popd":
		sp.dirs = appendDir(sp.dirs, "")
		return
	default:
		return
	}
	var target *Word
	for i := 1; i < len(sc.Words); i++ {
		if v := sc.Words[i].Values[0]; strings.HasPrefix(v, "-") && v != "-" && !sc.Words[i].Dynamic {
			continue
		}
		target = &sc.Words[i]
		break
	}
	next := slices.Clone(sp.dirs)
	switch {
	case target == nil:
		next = appendDir(next, sp.home)
	case target.Dynamic || target.Glob || target.Values[0] == "-" || len(target.Values) != 1:
		next = appendDir(next, "")
	default:
		for _, d := range sp.dirs {
			switch {
			case filepath.IsAbs(target.Values[0]):
				next = appendDir(next, filepath.Clean(target.Values[0]))
			case d == "":
				next = appendDir(next, "")
			default:
				next = appendDir(next, filepath.Join(d, target.Values[0]))
			}
		}
	}
	sp.dirs = next
}

func appendDir(dirs []string, d string) []string {
	if slices.Contains(dirs, d) {
		return dirs
	}
	return append(slices.Clone(dirs), d)
}

// builtinVars flags the builtins that assign or test a variable named by
// an argument: a name with a subscript (a[$(cmd)]) runs cmd, and an
// unsafe name (printf -v PATH .) changes what later commands run.
func (sp *splitter) builtinVars(sc *SimpleCommand) {
	name, _ := progName(sc.Args[0])
	if name == "hash" && slices.ContainsFunc(sc.Args[1:], func(a string) bool { return strings.HasPrefix(a, "-") && strings.Contains(a, "p") }) {
		sp.tainted = true // hash -p /bin/rm ls: a later ls runs rm
		return
	}
	if name != "test" && name != "[" && name != "printf" && name != "read" && name != "mapfile" && name != "readarray" {
		return
	}
	for i, a := range sc.Args[1:] {
		if strings.Contains(a, "[") && (name == "read" || name == "mapfile" || name == "readarray" || i > 0 && sc.Args[i] == "-v") {
			sc.Arith = true
		}
		if name == "printf" && a == "-v" && i+2 < len(sc.Args) {
			if v := sc.Args[i+2]; !slices.Contains(safeEnvVars, v) {
				sp.tainted, sc.UnsafeEnv = true, true
			}
		}
		if name == "printf" && strings.HasPrefix(a, "-v") && len(a) > 2 && !slices.Contains(safeEnvVars, a[2:]) {
			sp.tainted, sc.UnsafeEnv = true, true // printf -vPATH …: the name glued
		}
	}
	if name == "read" || name == "mapfile" || name == "readarray" {
		sp.tainted = true // it assigns what it reads: PATH, IFS …
	}
}

// descriptorPath returns the descriptor of this process that a path opens
// in any spelling (/dev/stdin, /dev/./stdin, //dev/stdin, /dev/fd/N,
// /proc/self/fd/N, /proc/thread-self/fd/N, through /proc/self/root), "?"
// for another process's descriptor (/proc/PID/fd/N), and "" for a path
// that names none.
func descriptorPath(v string) string {
	c := filepath.Clean(v)
	for _, root := range []string{"/proc/self/root/", "/proc/thread-self/root/"} {
		for strings.HasPrefix(c, root) {
			c = filepath.Clean("/" + c[len(root):])
		}
	}
	if c == "/dev/stdin" {
		return "0"
	}
	for _, dir := range []string{"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"} {
		if n, ok := strings.CutPrefix(c, dir); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return n
		}
	}
	if strings.HasPrefix(c, "/proc/") && strings.Contains(c, "/fd/") || c == "/dev/fd" {
		return "?"
	}
	return ""
}

// makesLink reports whether a command makes a link another command could
// write or read through: ln (symbolic or hard), cp -s/-l/--symbolic-link/
// --link.
func makesLink(args []string) bool {
	name, _ := progName(args[0])
	switch name {
	case "ln", "link", "symlink":
		return true
	case "cp":
		return slices.ContainsFunc(args[1:], func(a string) bool {
			return strings.HasPrefix(a, "--sym") || strings.HasPrefix(a, "--li") ||
				len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsAny(a, "sl")
		})
	}
	return false
}
