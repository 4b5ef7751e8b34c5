package pipeline

import (
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Word is one word of a command as bash will see it once expanded.
type Word struct {
	// Values are what the word expands to: several for a brace expansion,
	// one otherwise ("" when Dynamic).
	Values []string
	// Dynamic: the value depends on the run (a variable, a command or
	// process substitution, ~- or ~user): no rule can vouch for it.
	Dynamic bool
	// Glob: an unquoted *, ? or [ that bash matches against the file
	// system; Values hold the pattern.
	Glob bool
	// Prefix is a Dynamic word's literal start, before its first
	// expansion ("-j" of -j$(nproc), "V=" of V=$X).
	Prefix string
}

// wordEnv answers the expander: HOME and PWD are known, every other
// variable makes the word dynamic.
type wordEnv struct {
	home, cwd string
	dynamic   *bool
}

func (e wordEnv) Get(name string) expand.Variable {
	switch name {
	case "HOME":
		return expand.Variable{Set: true, Kind: expand.String, Str: e.home}
	case "IFS":
		return expand.Variable{Set: true, Kind: expand.String, Str: " \t\n"}
	case "PWD":
		// Read by the expander for globbing, which is off.
		return expand.Variable{Set: e.cwd != "", Kind: expand.String, Str: e.cwd}
	}
	*e.dynamic = true
	return expand.Variable{}
}

func (e wordEnv) Each(func(string, expand.Variable) bool) { *e.dynamic = true }

var errDynamic = errors.New("dynamic")

// expandWord expands w the way bash would where the result is static:
// brace expansion, tilde prefixes (~, ~/…, ~+ against cwd; ~- and ~user
// are dynamic), quote removal ('…', "…", $'…', backslashes, line
// continuations) and arithmetic on literals. cwd is "" when unknown (after
// a cd to a dynamic place): ~+ is then dynamic.
func expandWord(w *syntax.Word, home, cwd string) Word {
	if v, ok := plainWord(w); ok {
		return Word{Values: []string{v}}
	}
	return expandDynamic(w, home, cwd)
}

// expandDynamic is expandWord for a word that is not plain.
func expandDynamic(w *syntax.Word, home, cwd string) Word {
	var out Word
	dynamic := false
	cfg := &expand.Config{
		Env:       wordEnv{home: home, cwd: cwd, dynamic: &dynamic},
		CmdSubst:  func(io.Writer, *syntax.CmdSubst) error { return errDynamic },
		ProcSubst: func(*syntax.ProcSubst) (string, error) { return "", errDynamic },
	}
	word := *w // SplitBraces replaces the parts
	braced := []*syntax.Word{&word}
	if syntax.SplitBraces(&word) {
		braced = nil
		for bw, err := range expand.BracesSeq(cfg, &word) {
			if err != nil || len(braced) >= 1024 {
				return Word{Values: []string{""}, Dynamic: true} // too large to vouch for
			}
			braced = append(braced, bw)
		}
	}
	for _, bw := range braced {
		bw, dyn := tilde(bw, home, cwd)
		out.Dynamic = out.Dynamic || dyn
		out.Glob = out.Glob || unquotedGlob(bw)
		fields, err := expand.Fields(cfg, bw)
		if err != nil || dynamic || len(fields) != 1 {
			out.Dynamic = true
			continue
		}
		out.Values = append(out.Values, fields[0])
	}
	if out.Dynamic || len(out.Values) == 0 {
		return Word{Values: []string{""}, Dynamic: true, Glob: out.Glob, Prefix: litPrefix(w)}
	}
	if len(braced) > 1 && !quoted(w) {
		// An empty word from a brace expansion vanishes ({,x} is x).
		out.Values = slices.DeleteFunc(out.Values, func(v string) bool { return v == "" })
	}
	return out
}

// quoted reports whether w has a quoted part.
func quoted(w *syntax.Word) bool {
	return slices.ContainsFunc(w.Parts, func(p syntax.WordPart) bool {
		switch p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			return true
		}
		return false
	})
}

// plainWord is the fast path: a word of one literal with nothing bash
// would change.
func plainWord(w *syntax.Word) (string, bool) {
	if len(w.Parts) != 1 {
		return "", false
	}
	l, ok := w.Parts[0].(*syntax.Lit)
	if !ok || strings.ContainsAny(l.Value, "\\~{}*?[$`'\"") {
		return "", false
	}
	return l.Value, true
}

// tilde expands a leading unquoted tilde prefix of w (bash does this after
// brace expansion, for each resulting word).
func tilde(w *syntax.Word, home, cwd string) (*syntax.Word, bool) {
	if len(w.Parts) == 0 {
		return w, false
	}
	l, ok := w.Parts[0].(*syntax.Lit)
	if !ok || !strings.HasPrefix(l.Value, "~") {
		return w, false
	}
	// Brace expansion leaves adjacent literals: join them.
	merged := &syntax.Lit{ValuePos: l.ValuePos, ValueEnd: l.ValueEnd, Value: l.Value}
	next := 1
	for ; next < len(w.Parts); next++ {
		m, ok := w.Parts[next].(*syntax.Lit)
		if !ok {
			break
		}
		merged.Value += m.Value
	}
	w = &syntax.Word{Parts: append([]syntax.WordPart{merged}, w.Parts[next:]...)}
	l = merged
	prefix, rest, _ := strings.Cut(l.Value, "/")
	if !strings.Contains(l.Value, "/") && len(w.Parts) > 1 {
		return w, true // ~name"…": bash looks the name up; too clever to vouch for
	}
	var dir string
	switch prefix {
	case "~":
		dir = home
	case "~+":
		if cwd == "" {
			return w, true
		}
		dir = cwd
	default: // ~-, ~user, ~+N …
		return w, true
	}
	if strings.Contains(l.Value, "/") {
		dir = filepath.Join(dir, "") + "/" + rest
	}
	nw := *w
	nw.Parts = append([]syntax.WordPart{&syntax.Lit{ValuePos: l.ValuePos, ValueEnd: l.ValueEnd, Value: dir}}, w.Parts[1:]...)
	return &nw, false
}

// unquotedGlob reports whether w has an unquoted *, ? or [.
func unquotedGlob(w *syntax.Word) bool {
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok {
			v := strings.ReplaceAll(l.Value, `\\`, "")
			for i := 0; i < len(v); i++ {
				if v[i] == '\\' {
					i++
					continue
				}
				if v[i] == '*' || v[i] == '?' || v[i] == '[' {
					return true
				}
			}
		}
	}
	return false
}

// litPrefix is the unquoted literal text a word starts with.
func litPrefix(w *syntax.Word) string {
	var b strings.Builder
	for _, p := range w.Parts {
		lit, ok := p.(*syntax.Lit)
		if !ok {
			break
		}
		b.WriteString(lit.Value)
	}
	return b.String()
}
