package pipeline

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// MaxCommandLen is the length past which a command always needs approval.
const MaxCommandLen = 10000

// SimpleCommand is one command a shell string would run: every command of
// a compound (&&, ||, ;, |, |&, &, newlines), and those nested in
// subshells, $(…), backticks, process substitutions, loops, conditionals
// and function bodies, and in the string of sh -c / bash -c.
type SimpleCommand struct {
	// Text is the command as written, wrappers (timeout, nice, env, exec,
	// sudo, xargs …) and leading variable assignments stripped.
	Text string
	// Norm is the command as bash will run it: its expanded words joined
	// by single spaces, redirections left out, the program named by its
	// base name. Deny and ask rules match Text and Norm.
	Norm string
	// AllowText is what allow rules match: Text, unless a leading assignment
	// is not on the safe list, in which case it keeps the assignments.
	AllowText string
	// Args are the expanded words after wrapper stripping: a brace
	// expansion gives several, a dynamic word gives "".
	Args []string
	// Words are the same words with what the expansion found out, in
	// order (Args flattens their Values).
	Words []Word
	// Dynamic is set when a word holds a command or process substitution:
	// no rule can vouch for what it expands to.
	Dynamic bool
	// DynamicName is set when the program name itself is computed at run
	// time ($X, $(…), ~- …).
	DynamicName bool
	// ExecWrapper is set for watch, setsid, ionice, flock and find with
	// -exec/-delete: only exact rules may approve them.
	ExecWrapper bool
	// Privileged is set when sudo or doas runs the command.
	Privileged bool
	// FromStdin is set when xargs runs the command: more arguments come
	// from standard input.
	FromStdin bool
	// Wrappers are the programs stripped in front of it (sudo, env …).
	Wrappers []string
	// UnsafeEnv is set when an assignment not on the safe list applies
	// (a prefix, env NAME=VALUE, or an earlier statement of the string):
	// it may change what runs (PATH, LD_PRELOAD, GIT_*, BASH_ENV …).
	UnsafeEnv bool
	// Linked: an earlier command of the string made a link (ln, cp -s,
	// cp -l): a path of this one may go through it to another file, so
	// its files are not known statically.
	Linked bool
	// Unseen, when set, says why what the command runs is known only when
	// it runs (git configuration from the environment or a file, a file a
	// shell reads first): no allow rule can vouch for it.
	Unseen string
	// Arith is set for [[ ]], (( )) and let with arithmetic on anything but
	// integer literals: bash evaluates array subscripts in it, which can
	// run commands.
	Arith bool
	// Dirs are the working directories the command may run in: the cwd,
	// and the targets of cd/pushd before it ("" when one is unknown).
	Dirs []string
	// Redirects are the targets of redirections, with their direction.
	Redirects []Redirect
	// paths caches what the gate found the command reads and writes, once
	// pathsFound.
	paths      bashPaths
	pathsFound bool
}

// Redirect is one file redirection of a command.
type Redirect struct {
	Path   string // the expanded path; empty when not static
	Word   Word   // the target word, expanded
	Output bool   // > >> &> >& <> (checked as an edit); false for < <& (a read)
	Raw    string
}

// ParsedCommand is a shell string split into simple commands.
type ParsedCommand struct {
	Commands []SimpleCommand
	// Unparseable is set for input the parser rejects, an operator with
	// nothing after it (npm test &&), or input over MaxCommandLen: no rule
	// may allow it.
	Unparseable bool
	Reason      string
	// Pieces are, for an unparseable command, the parts between
	// separators, for deny and ask rules to try.
	Pieces []string
}

// safeEnvVars are assignments that may precede a command an allow rule
// approves (NODE_ENV=test npm test), and that keep a command read-only.
var safeEnvVars = []string{"NODE_ENV", "RUST_BACKTRACE", "RUST_LOG", "LANG", "LC_ALL", "TZ", "NO_COLOR", "FORCE_COLOR", "CI", "DEBUG", "PYTHONUNBUFFERED", "CGO_ENABLED"}

// SplitCommand parses a Bash command string with mvdan.cc/sh, with no
// working directory or home known (tildes stay as written, cd targets are
// unknown).
func SplitCommand(cmd string) *ParsedCommand { return SplitCommandAt(cmd, "", "~") }

// SplitCommandAt parses a Bash command string that runs in cwd with home
// as the home directory: tildes, brace expansions, quotes and escapes are
// expanded as bash would, and cd/pushd are followed.
func SplitCommandAt(cmd, cwd, home string) *ParsedCommand {
	pc := &ParsedCommand{}
	if len(cmd) > MaxCommandLen {
		pc.Unparseable, pc.Reason, pc.Pieces = true, "longer than 10,000 characters", pieces(cmd)
		return pc
	}
	f, err := parseBash(cmd)
	if err != nil {
		pc.Unparseable, pc.Reason, pc.Pieces = true, "cannot be parsed: "+err.Error(), pieces(cmd)
		return pc
	}
	// Room for a command per separator, so the list seldom grows.
	pc.Commands = make([]SimpleCommand, 0, min(1+separators(cmd), 32))
	sp := &splitter{src: cmd, home: home, dirs: []string{cwd}, pc: pc, budget: maxStrings}
	sp.root = sp
	sp.walk(f)
	return pc
}

// maxStrings bounds the strings read as shell code in one command (sh -c's,
// exported functions, git's …): with brace expansion, a few bytes can make
// a thousand such words, each holding more.
const maxStrings = 64

// separators counts the runs of ; & | and newlines in s (&& and || are
// one each): about how many commands it holds.
func separators(s string) int {
	n, in := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ';', '&', '|', '\n':
			if !in {
				n++
			}
			in = true
		default:
			in = false
		}
	}
	return n
}

// splitter walks one parsed string in source order.
type splitter struct {
	src, home string
	dirs      []string // where the next command may run; "" is unknown
	tainted   bool     // an earlier statement assigned an unsafe variable
	linked    bool     // an earlier command made a link (SimpleCommand.Linked)
	unseen    string   // the command being read runs what no rule sees: SimpleCommand.Unseen
	// argv0 is the name exec -a gives the command being read (dynamic:
	// known only at run time).
	argv0        string
	argv0Dynamic bool
	envNames     []string  // the variables set for the command being read (prefix, env NAME=VALUE)
	root         *splitter // the outermost splitter, whose budget the nested ones share
	budget       int       // in root: strings left to read as shell code (maxStrings)
	depth        int       // sh -c nesting
	pc           *ParsedCommand
	// words and firsts are blocks the commands' word slices are cut from.
	words  []Word
	firsts []string
}

func (sp *splitter) walk(f syntax.Node) {
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			sp.stmt(n)
		case *syntax.DeclClause:
			// declare/export/local/readonly: their own command; an
			// assignment in them taints what follows.
			sc := SimpleCommand{Text: src(sp.src, n), AllowText: src(sp.src, n), Args: []string{n.Variant.Value}, Dynamic: hasSubst(n), Dirs: sp.dirs}
			sc.Norm = sc.Text
			for _, a := range n.Args {
				if a.Name != nil && !slices.Contains(safeEnvVars, a.Name.Value) {
					sp.tainted = true
				}
			}
			sp.subscripts(&sc, n.Args)
			sc.Arith = sp.quotedCode(n, false) || sc.Arith
			sp.pc.Commands = append(sp.pc.Commands, sc)
		case *syntax.TestClause, *syntax.ArithmCmd, *syntax.LetClause:
			if codeInArith(n) {
				sp.arith(n)
			}
		case *syntax.ArithmExp, *syntax.CStyleLoop:
			// $(( )), $[ ], for (( )): evaluated as (( )) is.
			if arithCode(n) {
				sp.arith(n)
			}
		case *syntax.ParamExp:
			if paramRunsCode(n) {
				sp.arith(n)
			}
			if n.Exp != nil && (n.Exp.Op == syntax.AssignUnset || n.Exp.Op == syntax.AssignUnsetOrNull) && n.Param != nil && taintingName(n.Param.Value) {
				sp.tainted = true // ${CDPATH:=/} assigns
			}
		case *syntax.ForClause:
			if wi, ok := n.Loop.(*syntax.WordIter); ok && wi.Name != nil && taintingName(wi.Name.Value) {
				sp.tainted = true // for PATH in …; select HOME in …
			}
		}
		return true
	})
}

// taintingName reports whether assigning the variable name (as a loop's
// variable or ${NAME:=value}) may change what later commands run or read:
// a name with an upper-case letter (bash's own variables, PATH, HOME,
// CDPATH, IFS, PS4 …, and the environment's), off the safe list. A
// lower-case name (for f in *.go) is a script's own.
func taintingName(name string) bool {
	return strings.ToLower(name) != name && !slices.Contains(safeEnvVars, name)
}

func (sp *splitter) stmt(n *syntax.Stmt) {
	ce, ok := n.Cmd.(*syntax.CallExpr)
	if !ok {
		// Redirections on compound commands (loops, groups) still write
		// files; a bare redirection (> f) too.
		if len(n.Redirs) > 0 {
			sp.pc.Commands = append(sp.pc.Commands, SimpleCommand{Redirects: sp.redirects(n.Redirs), Dirs: sp.dirs})
			if n.Cmd != nil && runsShell(n.Cmd) {
				// { bash; } <<< 'rm x': a shell inside reads the
				// compound's here-string as its script.
				sp.stdinScript(SimpleCommand{UnsafeEnv: sp.tainted}, n.Redirs, "a compound command")
			}
		}
		return
	}
	if len(ce.Args) == 0 {
		// NAME=VALUE alone: it changes every later command of the string.
		for _, a := range ce.Assigns {
			if a.Name != nil && !slices.Contains(safeEnvVars, a.Name.Value) {
				sp.tainted = true
			}
		}
		sc := SimpleCommand{Redirects: sp.redirects(n.Redirs), Dirs: sp.dirs}
		// a[i]=v evaluates i: a command of its own when it can run code.
		if sp.subscripts(&sc, ce.Assigns); sc.Arith {
			t := src(sp.src, ce)
			sc.Text, sc.Norm, sc.AllowText, sc.Args = t, t, t, []string{""}
		}
		if len(n.Redirs) > 0 || sc.Arith {
			sp.pc.Commands = append(sp.pc.Commands, sc)
		}
		return
	}
	sc := sp.simple(ce, n.Redirs)
	sp.pc.Commands = append(sp.pc.Commands, sc)
	sp.follow(sc)
}

// runsShell reports whether a shell is among the commands of n.
func runsShell(n syntax.Node) bool {
	found := false
	syntax.Walk(n, func(n syntax.Node) bool {
		if ce, ok := n.(*syntax.CallExpr); ok && len(ce.Args) > 0 {
			if v, ok := plainWord(ce.Args[0]); ok {
				name, _ := progName(v)
				found = found || slices.Contains(shells, name)
			}
		}
		return !found
	})
	return found
}

// pieces cuts an unparseable string at every separator bash knows, so deny
// and ask rules can be tried on what can be read of it.
func pieces(cmd string) []string {
	f := func(r rune) bool { return strings.ContainsRune(";&|\n()`{}", r) }
	var out []string
	for _, p := range strings.FieldsFunc(strings.ReplaceAll(cmd, "$(", "("), f) {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func src(cmd string, n syntax.Node) string {
	s, e := int(n.Pos().Offset()), int(n.End().Offset())
	if s < 0 || e > len(cmd) || s > e {
		return ""
	}
	return cmd[s:e]
}

// hasSubst reports whether ce holds a command or process substitution;
// text without '$', '`', '<' or '>' cannot.
func (sp *splitter) hasSubst(ce *syntax.CallExpr) bool {
	if start, end := int(ce.Pos().Offset()), int(ce.End().Offset()); start <= end && end <= len(sp.src) &&
		!strings.ContainsAny(sp.src[start:end], "$`<>") {
		return false
	}
	return hasSubst(ce)
}

func hasSubst(n syntax.Node) bool {
	found := false
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			found = true
		}
		return !found
	})
	return found
}

// codeInArith reports whether [[ ]], (( )) or let evaluates arithmetic on
// anything but integer literals: a variable or string there is evaluated
// as an expression, and an array subscript in it runs command
// substitutions ([[ 'a[$(touch p)]' -eq 0 ]]).
func codeInArith(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.TestClause:
		found := false
		syntax.Walk(n.X, func(m syntax.Node) bool {
			switch t := m.(type) {
			case *syntax.BinaryTest:
				switch t.Op {
				case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
					found = found || !intLiteral(t.X) || !intLiteral(t.Y)
				}
			case *syntax.UnaryTest:
				// -v NAME[subscript] evaluates the subscript.
				if t.Op == syntax.TsVarSet {
					w, ok := t.X.(*syntax.Word)
					v, plain := "", false
					if ok {
						v, plain = plainWord(w)
					}
					found = found || !plain || strings.Contains(v, "[")
				}
			}
			return !found
		})
		return found
	case *syntax.ArithmCmd, *syntax.LetClause:
		return arithCode(n)
	}
	return false
}

// arith adds n as a command of its own that evaluates code (Arith): no
// rule may vouch for it.
func (sp *splitter) arith(n syntax.Node) {
	t := src(sp.src, n)
	sp.pc.Commands = append(sp.pc.Commands, SimpleCommand{Text: t, Norm: t, AllowText: t, Args: []string{""}, Arith: true, Dirs: sp.dirs})
	sp.quotedCode(n, true)
}

// arithCode reports whether arithmetic holds anything but integer
// literals: a name or a string there is evaluated as an expression, and
// an array subscript in it runs command substitutions ('a[$(rm x)]').
func arithCode(n syntax.Node) bool {
	found := false
	syntax.Walk(n, func(m syntax.Node) bool {
		switch m := m.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst, *syntax.SglQuoted, *syntax.DblQuoted:
			found = true
		case *syntax.Lit:
			found = found || strings.IndexFunc(m.Value, func(r rune) bool { return r != '_' && !(r >= '0' && r <= '9') }) >= 0 && !isNumber(m.Value)
		}
		return !found
	})
	return found
}

// paramRunsCode reports whether a parameter expansion evaluates code: a
// subscript or a slice that is not an integer literal (${a[i]}, ${s:i}),
// an indirect expansion (${!x}, x naming a[$(…)]), or prompt expansion
// (${x@P} runs the substitutions in x's value).
func paramRunsCode(p *syntax.ParamExp) bool {
	if p.Exp != nil && p.Exp.Op == syntax.OtherParamOps {
		if p.Exp.Word == nil {
			return true
		}
		if v, ok := plainWord(p.Exp.Word); !ok || strings.Contains(v, "P") {
			return true
		}
	}
	whole := false // a[@], a[*]
	if w, ok := p.Index.(*syntax.Word); ok {
		v, plain := plainWord(w)
		if len(w.Parts) == 1 {
			if l, ok := w.Parts[0].(*syntax.Lit); ok {
				v, plain = l.Value, true // plainWord refuses the glob *
			}
		}
		whole = plain && (v == "@" || v == "*")
		if !whole && !(plain && isNumber(v)) {
			return true
		}
	} else if p.Index != nil && arithCode(p.Index) {
		return true
	}
	if p.Excl && p.Names == 0 && !whole {
		return true
	}
	return p.Slice != nil && (p.Slice.Offset != nil && arithCode(p.Slice.Offset) || p.Slice.Length != nil && arithCode(p.Slice.Length))
}

func intLiteral(n syntax.Node) bool {
	w, ok := n.(*syntax.Word)
	if !ok || len(w.Parts) != 1 {
		return false
	}
	l, ok := w.Parts[0].(*syntax.Lit)
	return ok && isNumber(l.Value)
}

func isNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// redirects lists the redirections that name a file. >&WORD and <&WORD
// name one unless WORD is a descriptor number or -.
func (sp *splitter) redirects(rs []*syntax.Redirect) []Redirect {
	var out []Redirect
	for _, r := range rs {
		if r.Word == nil {
			continue
		}
		var rd Redirect
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob, syntax.RdrInOut:
			rd.Output = true
		case syntax.RdrIn:
		case syntax.DplOut, syntax.DplIn:
			if v, ok := plainWord(r.Word); ok && (isNumber(v) || v == "-" || isNumber(strings.TrimSuffix(v, "-"))) {
				continue // 2>&1, <&3, >&-: a descriptor, not a file
			}
			rd.Output = r.Op == syntax.DplOut
		default:
			continue // heredocs and herestrings name no file
		}
		rd.Raw = src(sp.src, r.Word)
		rd.Word = expandWord(r.Word, sp.home, sp.dir())
		if !rd.Word.Dynamic && len(rd.Word.Values) == 1 {
			rd.Path = rd.Word.Values[0]
		}
		out = append(out, rd)
	}
	return out
}

// dir is the one working directory when it is known for sure, else "".
func (sp *splitter) dir() string {
	if len(sp.dirs) == 1 {
		return sp.dirs[0]
	}
	return ""
}
