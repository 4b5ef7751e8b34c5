package pipeline

import "strings"

// envSplit splits an env -S string into words as GNU env does: blanks
// separate words outside quotes; '…' keeps everything but \\ and \' as
// written; "…" and unquoted text take the escapes \" \# \$ \' \\ \f \n \r
// \t \v and \_ (a space inside double quotes, a separator outside); \c, or
// a # that starts a word, ends the string. ok is false for a ${NAME} (its
// value is known only at run time) and for a string env refuses.
func envSplit(s string) (words []string, ok bool) {
	var b strings.Builder
	sep, open, sq, dq := true, false, false, false
	begin := func() {
		if sep {
			if open {
				words = append(words, b.String())
				b.Reset()
			}
			open, sep = true, false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' && !dq, c == '"' && !sq:
			if c == '\'' {
				sq = !sq
			} else {
				dq = !dq
			}
			begin()
			continue
		case strings.IndexByte(" \t\n\v\f\r", c) >= 0 && !sq && !dq:
			sep = true
			continue
		case c == '#' && sep:
			return finish(words, &b, open), true
		case c == '$' && !sq:
			return nil, false
		case c == '\\' && (!sq || i+1 < len(s) && (s[i+1] == '\\' || s[i+1] == '\'')):
			if i++; i == len(s) {
				return nil, false
			}
			var stop bool
			if c, sep, stop, ok = envEscape(s[i], sep, dq); !ok {
				return nil, false
			}
			if stop {
				return finish(words, &b, open), true
			}
			if c == 0 {
				continue // \_ outside double quotes: a separator
			}
		}
		begin()
		b.WriteByte(c)
	}
	if sq || dq {
		return nil, false
	}
	return finish(words, &b, open), true
}

// envEscape is what env makes of a backslash and e: the byte it stands for
// (0 for a separator, which sets sep), whether it ends the string (\c),
// and whether env accepts it.
func envEscape(e byte, sep, dq bool) (c byte, newSep, stop, ok bool) {
	switch e {
	case '"', '#', '$', '\'', '\\':
		return e, sep, false, true
	case '_':
		if !dq {
			return 0, true, false, true
		}
		return ' ', sep, false, true
	case 'c':
		return 0, sep, true, !dq
	}
	if i := strings.IndexByte("fnrtv", e); i >= 0 {
		return "\f\n\r\t\v"[i], sep, false, true
	}
	return 0, sep, false, false
}

func finish(words []string, b *strings.Builder, open bool) []string {
	if open {
		words = append(words, b.String())
	}
	return words
}
