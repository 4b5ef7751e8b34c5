package pipeline

import (
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// MaxCommandLen is the length past which a command always needs approval.
const MaxCommandLen = 10000

// SimpleCommand is one command a shell string would run: every command of
// a compound (&&, ||, ;, |, |&, &, newlines), and those nested in
// subshells, $(…), backticks, process substitutions, loops, conditionals
// and function bodies.
type SimpleCommand struct {
	// Text is the command as written, wrappers (timeout, nice …) and
	// leading variable assignments stripped; deny and ask rules match it.
	Text string
	// AllowText is what allow rules match: Text, unless a leading assignment
	// is not on the safe list, in which case it keeps the assignments.
	AllowText string
	// Args are the words after wrapper stripping, unquoted where they are
	// plain literals ("" for a word that is not).
	Args []string
	// Dynamic is set when a word holds a command or process substitution:
	// no rule can vouch for what it expands to.
	Dynamic bool
	// ExecWrapper is set for watch, setsid, ionice, flock and find with
	// -exec/-delete: only exact rules may approve them.
	ExecWrapper bool
	// Redirects are the targets of redirections, with their direction.
	Redirects []Redirect
}

// Redirect is one file redirection of a command.
type Redirect struct {
	Path   string // literal path; empty when not a plain literal
	Output bool   // > >> &> (checked as an edit); false for < (a read)
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
}

// safeEnvVars are assignments that may precede a command an allow rule
// approves (NODE_ENV=test npm test).
var safeEnvVars = []string{"NODE_ENV", "RUST_BACKTRACE", "RUST_LOG", "LANG", "LC_ALL", "TZ", "NO_COLOR", "FORCE_COLOR", "CI", "DEBUG", "PYTHONUNBUFFERED", "GOFLAGS", "CGO_ENABLED"}

// parsers reuses Bash parsers across calls (a Parser is not safe for
// concurrent use; the pool hands each caller its own).
var parsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}

// SplitCommand parses a Bash command string with mvdan.cc/sh.
func SplitCommand(cmd string) *ParsedCommand {
	pc := &ParsedCommand{}
	if len(cmd) > MaxCommandLen {
		pc.Unparseable, pc.Reason = true, "longer than 10,000 characters"
		return pc
	}
	p := parsers.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(cmd), "")
	parsers.Put(p)
	if err != nil {
		pc.Unparseable, pc.Reason = true, "cannot be parsed: "+err.Error()
		return pc
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			if ce, ok := n.Cmd.(*syntax.CallExpr); ok {
				pc.Commands = append(pc.Commands, simple(cmd, ce, n.Redirs))
			} else if n.Cmd == nil && len(n.Redirs) > 0 {
				pc.Commands = append(pc.Commands, SimpleCommand{Redirects: redirects(cmd, n.Redirs)})
			} else {
				// Redirections on compound commands (loops, groups) still
				// write files.
				if len(n.Redirs) > 0 {
					pc.Commands = append(pc.Commands, SimpleCommand{Redirects: redirects(cmd, n.Redirs)})
				}
			}
		case *syntax.DeclClause, *syntax.TestClause, *syntax.ArithmCmd, *syntax.LetClause, *syntax.CoprocClause, *syntax.TimeClause:
			// declare/export/local, [[ ]], (( )), let, coproc, time: run as
			// their own commands; give them a text rules can see.
			if d, ok := n.(*syntax.DeclClause); ok {
				pc.Commands = append(pc.Commands, SimpleCommand{Text: src(cmd, d), AllowText: src(cmd, d), Args: []string{d.Variant.Value}, Dynamic: hasSubst(d)})
			}
		}
		return true
	})
	return pc
}

func src(cmd string, n syntax.Node) string {
	s, e := int(n.Pos().Offset()), int(n.End().Offset())
	if s < 0 || e > len(cmd) || s > e {
		return ""
	}
	return cmd[s:e]
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

// literal returns a word's value when it is made only of literals and
// quotes, or "" and false.
func literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(l.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

func redirects(cmd string, rs []*syntax.Redirect) []Redirect {
	var out []Redirect
	for _, r := range rs {
		if r.Word == nil {
			continue
		}
		var rd Redirect
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob:
			rd.Output = true
		case syntax.RdrIn:
		case syntax.RdrInOut:
			rd.Output = true
		default:
			continue // dup (2>&1, <&3), heredocs and herestrings name no file
		}
		rd.Raw = src(cmd, r.Word)
		if p, ok := literal(r.Word); ok {
			rd.Path = p
		}
		out = append(out, rd)
	}
	return out
}

// wrappers are stripped before matching, with the options they take.
var wrappers = map[string]func(args []string) int{
	"timeout": func(a []string) int { return skipOpts(a, []string{"-k", "--kill-after", "-s", "--signal"}) + 1 },
	"time":    func(a []string) int { return skipOpts(a, nil) },
	"nice":    func(a []string) int { return skipOpts(a, []string{"-n", "--adjustment"}) },
	"nohup":   func(a []string) int { return 0 },
	"stdbuf":  func(a []string) int { return skipOpts(a, []string{"-i", "-o", "-e"}) },
	"command": func(a []string) int { return skipOpts(a, nil) },
	"builtin": func(a []string) int { return 0 },
	"noglob":  func(a []string) int { return 0 },
}

// skipOpts counts leading options; those in withArg take the next word.
func skipOpts(a []string, withArg []string) int {
	i := 0
	for i < len(a) && strings.HasPrefix(a[i], "-") && a[i] != "-" {
		if a[i] == "--" {
			return i + 1
		}
		if slices.Contains(withArg, a[i]) {
			i++
		}
		i++
	}
	return i
}

var execWrappers = []string{"watch", "setsid", "ionice", "flock"}

func simple(cmd string, ce *syntax.CallExpr, rs []*syntax.Redirect) SimpleCommand {
	sc := SimpleCommand{Redirects: redirects(cmd, rs), Dynamic: hasSubst(ce)}
	words := ce.Args
	lits := make([]string, len(words))
	for i, w := range words {
		lits[i], _ = literal(w)
	}
	// Strip wrappers: timeout 30 npm test → npm test. `command -v` is a
	// lookup, not a wrapper.
	start := 0
	for start < len(words) {
		name := lits[start]
		skip, ok := wrappers[name]
		if !ok || (name == "command" && start+1 < len(lits) && (lits[start+1] == "-v" || lits[start+1] == "-V")) {
			if name == "xargs" && start+1 < len(lits) && !strings.HasPrefix(lits[start+1], "-") {
				start++ // bare xargs: the command it runs is what counts
				continue
			}
			break
		}
		n := 1 + skip(lits[start+1:])
		if start+n >= len(words) {
			break // a wrapper with nothing to run
		}
		start += n
	}
	words, lits = words[start:], lits[start:]
	sc.Args = lits
	if len(words) > 0 {
		sc.Text = cmd[words[0].Pos().Offset():words[len(words)-1].End().Offset()]
	}
	sc.AllowText = sc.Text
	for _, a := range ce.Assigns {
		if a.Name == nil || !slices.Contains(safeEnvVars, a.Name.Value) {
			if len(words) > 0 && start == 0 {
				sc.AllowText = cmd[ce.Assigns[0].Pos().Offset():words[len(words)-1].End().Offset()]
			} else {
				sc.AllowText = src(cmd, ce)
			}
			break
		}
	}
	if len(lits) > 0 {
		if slices.Contains(execWrappers, lits[0]) {
			sc.ExecWrapper = true
		}
		if lits[0] == "find" {
			for _, a := range lits[1:] {
				if a == "-exec" || a == "-execdir" || a == "-ok" || a == "-okdir" || a == "-delete" {
					sc.ExecWrapper = true
				}
			}
		}
	}
	return sc
}
