package pipeline

import (
	"errors"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// parsers reuses Bash parsers across calls (a Parser is not safe for
// concurrent use; the pool hands each caller its own). Comments are kept
// for continuationMismatch.
var parsers = sync.Pool{New: func() any {
	return syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(true))
}}

// parseBash parses one string of shell code, and refuses what bash would
// read differently from the parser (continuationMismatch).
func parseBash(code string) (*syntax.File, error) {
	p := parsers.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(code), "")
	parsers.Put(p)
	if err != nil {
		return nil, err
	}
	if why := continuationMismatch(f, code); why != "" {
		return nil, errors.New(why)
	}
	return f, nil
}

// continuationMismatch finds a backslash-newline that bash and
// mvdan.cc/sh's parser read differently, where the difference hides a
// command from the rules:
//   - in a comment, bash ends the comment at the newline and runs the next
//     line; the parser takes the next line into the comment;
//   - in the body of a here-document with an unquoted delimiter, bash
//     joins the two lines before it compares a line with the delimiter,
//     so "EO\<newline>F" (or "\<newline>EOF") ends the document there; the
//     parser reads on, taking the commands after it for text.
func continuationMismatch(f *syntax.File, src string) string {
	if !strings.Contains(src, "\\\n") && !strings.Contains(src, "\\\r") && !strings.Contains(src, ")\n") {
		return "" // no backslash before a line's end, no ")": nothing to read differently
	}
	if strings.Contains(src, "\\\r\n") {
		// The parser takes backslash-CR-LF for a line continuation; for
		// bash the backslash quotes the CR and the LF ends the command.
		return "a backslash before a CR-LF line end (bash ends the command there; the next line would be hidden from the rules)"
	}
	why := ""
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Comment:
			if strings.Contains(n.Text, "\\\n") || strings.HasSuffix(n.Text, "\\") && followedByNewline(src, n.End()) {
				why = "a comment that ends in a backslash (bash runs the next line; it would be hidden from the rules)"
			}
		case *syntax.Redirect:
			if (n.Op == syntax.Hdoc || n.Op == syntax.DashHdoc) && n.Hdoc != nil && endsEarly(n) {
				why = "a here-document that bash ends early (a backslash-newline joining its delimiter, or the delimiter before a \")\"): the lines after it would run as commands"
			}
		}
		return why == ""
	})
	return why
}

// followedByNewline reports whether src has a newline at p.
func followedByNewline(src string, p syntax.Pos) bool {
	o := int(p.Offset())
	return o < len(src) && src[o] == '\n'
}

// endsEarly reports whether bash ends the here-document of r before the
// parser does: with an unquoted delimiter, a body line that is the
// delimiter once backslash-newlines are removed. The parser splits the
// body's text at each backslash-newline it drops, so its literal parts
// put together are the joined text bash compares.
func endsEarly(r *syntax.Redirect) bool {
	delim, ok := plainDelimiter(r.Word)
	if !ok {
		return false // quoted: bash joins nothing either
	}
	var body strings.Builder
	for _, p := range r.Hdoc.Parts {
		if lit, ok := p.(*syntax.Lit); ok {
			body.WriteString(lit.Value)
		} else {
			body.WriteByte(0) // an expansion: no line holding it is the delimiter
		}
	}
	lines := strings.Split(body.String(), "\n")
	for _, line := range lines[:len(lines)-1] { // the last is what follows the final newline
		if r.Op == syntax.DashHdoc {
			line = strings.TrimLeft(line, "\t")
		}
		// Inside $( ), bash 5.2 also ends the document at "DELIM)".
		if line == delim || strings.HasPrefix(line, delim+")") {
			return true
		}
	}
	return false
}

// plainDelimiter returns a here-document delimiter with no quoting at all.
func plainDelimiter(w *syntax.Word) (string, bool) {
	if w == nil || len(w.Parts) != 1 {
		return "", false
	}
	lit, ok := w.Parts[0].(*syntax.Lit)
	if !ok || strings.ContainsAny(lit.Value, `\'"`) {
		return "", false
	}
	return lit.Value, true
}
