package pipeline

import (
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Bash expands an array subscript again when it evaluates it: a command
// substitution quoted in the command line (a['$(rm x)']=1, printf -v
// 'a[$(rm x)]' 1, $(( 'a[$(rm x)]' ))) runs when the subscript is
// evaluated, though quoting kept it from running where it was written.
// The splitter reads such quoted text as shell code of its own, so deny
// and ask rules see what it runs, and marks the command Arith, so no allow
// rule or read-only list vouches for it.

// codeText finds shell expansions that can run a command: $( … ), `…`
// and ${ … } (whose operators can hold either).
var codeText = regexp.MustCompile("\\$\\(|`|\\$\\{")

// subscriptCode finds a name with a subscript that holds such text, in a
// string a builtin takes as a variable name (printf -v, read, unset …).
var subscriptCode = regexp.MustCompile("[A-Za-z_][A-Za-z0-9_]*\\[[^\\]]*(\\$\\(|`|\\$\\{)")

// nameBuiltins take variable names as operands, with a subscript
// evaluated as arithmetic.
var nameBuiltins = []string{"printf", "read", "mapfile", "readarray", "wait", "unset", "let", "test", "[",
	"declare", "typeset", "local", "export", "readonly"}

// nameBuiltinSet is nameBuiltins for lookups (read only).
var nameBuiltinSet = setOf(nameBuiltins)

// quotedCode reads the quoted text in n that bash evaluates again (all
// of it in an arithmetic context or a subscript; with anyText false, only
// text holding a subscript with code) as shell code; it reports whether
// there was any.
func (sp *splitter) quotedCode(n syntax.Node, anyText bool) bool {
	found := false
	syntax.Walk(n, func(m syntax.Node) bool {
		switch m.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
		default:
			return true
		}
		// As bash has it after quote removal ($'\x24(' is $( too); a
		// string with an expansion in it, as written.
		text := src(sp.src, m)
		if w := expandWord(&syntax.Word{Parts: []syntax.WordPart{m.(syntax.WordPart)}}, sp.home, sp.dir()); !w.Dynamic {
			text = w.Values[0]
		}
		if anyText && codeText.MatchString(text) || !anyText && subscriptCode.MatchString(text) {
			found = true
			sp.inner(SimpleCommand{Dirs: sp.dirs}, text, "a quoted array subscript, which bash expands again")
		}
		return false
	})
	return found
}

// subscripts checks the subscripts of assignments (a[i]=v, a=([i]=v)):
// one that is not an integer literal is arithmetic bash evaluates. A
// value naming a subscript with code (i='a[$(rm x)]') runs it wherever
// the variable is evaluated as arithmetic later (a[i]=1, $((i))).
func (sp *splitter) subscripts(sc *SimpleCommand, assigns []*syntax.Assign) {
	for _, a := range assigns {
		if a.Index != nil && arithCode(a.Index) {
			sc.Arith = true
			sp.quotedCode(a.Index, true)
		}
		if a.Value != nil && sp.quotedCode(a.Value, false) {
			sc.Arith = true
		}
		if a.Array == nil {
			continue
		}
		for _, el := range a.Array.Elems {
			if el.Index != nil && arithCode(el.Index) {
				sc.Arith = true
				sp.quotedCode(el.Index, true)
			}
		}
	}
}

// nameOperands reads the operands of a builtin that takes variable names
// ('a[$(rm x)]' for printf -v, read, unset, declare …).
func (sp *splitter) nameOperands(sc *SimpleCommand, wargs []*syntax.Word) {
	name, _ := progName(sc.Args[0])
	if !nameBuiltinSet[name] || len(wargs) == 0 {
		return
	}
	for _, w := range wargs[1:] {
		if sp.quotedCode(w, false) {
			sc.Arith = true
		}
	}
}

// execName is the name exec's options give the program (exec -a NAME,
// -la NAME, -aNAME), and whether it is known only at run time.
func execName(opts []string, words []Word) (string, bool) {
	for i, o := range opts {
		if o == "--" || !strings.HasPrefix(o, "-") {
			break
		}
		k := strings.IndexByte(o, 'a')
		switch {
		case k < 0:
			continue
		case k < len(o)-1:
			return o[k+1:], words[i].Dynamic
		case i+1 < len(opts):
			return opts[i+1], words[i+1].Dynamic
		}
	}
	return "", false
}

// renamed reads a command that runs under another name (exec -a, env -a)
// as that name too: a program acts by the name it is run as (argv[0]:
// git, busybox and other multi-call programs), so exec -a git-push git …
// is git push, and
// git's own git-push (/usr/lib/git-core/git-push) is git push. Rules then
// see both, the command as written and as the program takes it.
func (sp *splitter) renamed(sc *SimpleCommand, name string) {
	argv0, dynamic := sp.argv0, sp.argv0Dynamic
	sp.argv0, sp.argv0Dynamic = "", false
	if dynamic {
		sp.unseen = "exec -a or env -a gives the program a name known only when it runs, and programs act by their name"
		return
	}
	if argv0 != "" {
		sp.inner(*sc, quoteWords(append([]string{argv0}, sc.Args[1:]...)), "exec -a")
		return
	}
	if sub, ok := strings.CutPrefix(name, "git-"); ok && sub != "" && !sc.Words[0].Dynamic {
		sp.inner(*sc, "git "+quoteWords(append([]string{sub}, sc.Args[1:]...)), name)
	}
}

// envName is the name env's options give the program (env -a NAME,
// -aNAME, --argv0=NAME, abbreviated as getopt_long allows), as execName
// is exec's.
func envName(opts []string, words []Word) (string, bool) {
	for i := 0; i < len(opts); i++ {
		a := opts[i]
		if name, val, hasVal := strings.Cut(strings.TrimPrefix(a, "--"), "="); strings.HasPrefix(a, "--") && len(name) >= 2 {
			argv0 := strings.HasPrefix("argv0", name)
			switch {
			case argv0 && hasVal:
				return val, words[i].Dynamic
			case argv0 && i+1 < len(opts):
				return opts[i+1], words[i+1].Dynamic
			case !hasVal && (strings.HasPrefix("unset", name) || strings.HasPrefix("chdir", name)):
				i++
			}
			continue
		}
		for k := 1; k < len(a) && a[0] == '-'; k++ {
			switch a[k] {
			case 'a':
				if k+1 < len(a) {
					return a[k+1:], words[i].Dynamic
				}
				if i+1 < len(opts) {
					return opts[i+1], words[i+1].Dynamic
				}
			case 'u', 'C':
				if k+1 == len(a) {
					i++
				}
				k = len(a)
			}
		}
	}
	return "", false
}
