package pipeline

import "strings"

// sedInfo is what a sed script does besides editing its input: runs
// commands (e), reads files (r, R) and writes them (w, W, the w flag of
// s). unsure is set for a script this reader cannot follow: callers treat
// it as running code.
type sedInfo struct {
	runs, unsure  bool
	reads, writes []string
}

// readSed reads a GNU sed script command by command: addresses (N,
// first~step, $, /re/ and \cREc with I and M, addr,+N, addr,~N), !, then
// the command and its arguments.
func readSed(script string) sedInfo {
	var in sedInfo
	s := script
	for len(s) > 0 && !in.unsure {
		s = strings.TrimLeft(s, " \t\n;")
		if s == "" {
			break
		}
		s = sedAddress(s, &in)
		if !in.unsure && len(s) > 0 && s[0] == ',' {
			s = sedAddress(strings.TrimLeft(s[1:], " \t"), &in)
		}
		s = strings.TrimLeft(s, " \t!")
		if in.unsure || s == "" {
			break
		}
		s = sedCommand(s, &in)
	}
	return in
}

// sedAddress skips one address at the start of s.
func sedAddress(s string, in *sedInfo) string {
	switch {
	case s == "":
		return s
	case s[0] == '$':
		return s[1:]
	case s[0] == '+' || s[0] == '~' || s[0] >= '0' && s[0] <= '9':
		s = strings.TrimLeft(s[1:], "0123456789")
		if len(s) > 0 && s[0] == '~' {
			s = strings.TrimLeft(s[1:], "0123456789")
		}
		return s
	case s[0] == '/' || s[0] == '\\':
		d := byte('/')
		if s[0] == '\\' {
			if len(s) < 2 {
				in.unsure = true
				return ""
			}
			d, s = s[1], s[1:]
		}
		rest, ok := sedDelimited(s[1:], d)
		if !ok {
			in.unsure = true
			return ""
		}
		return strings.TrimLeft(rest, "IM")
	}
	return s
}

// sedDelimited returns what follows the first unescaped d in s.
func sedDelimited(s string, d byte) (string, bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case d:
			return s[i+1:], true
		case '\n':
			return "", false
		}
	}
	return "", false
}

// sedCommand reads one command at the start of s and returns the rest.
func sedCommand(s string, in *sedInfo) string {
	c, s := s[0], s[1:]
	switch {
	case c == '{' || c == '}' || strings.IndexByte("=dDgGhHlnNpPxzFqQlL", c) >= 0:
		return strings.TrimLeft(s, "0123456789 \t")
	case c == 'e':
		in.runs = true
		return sedToEnd(s)
	case c == 'a' || c == 'i' || c == 'c':
		return sedText(s)
	case c == '#' || c == ':' || c == 'b' || c == 't' || c == 'T' || c == 'v':
		return sedToEnd(s)
	case c == 'r' || c == 'R' || c == 'w' || c == 'W':
		name, rest := sedFileName(s)
		if c == 'r' || c == 'R' {
			in.reads = append(in.reads, name)
		} else {
			in.writes = append(in.writes, name)
		}
		return rest
	case c == 's' || c == 'y':
		return sedSubstitute(c, s, in)
	}
	in.unsure = true
	return ""
}

// sedSubstitute reads s/RE/REPL/FLAGS (or y/SRC/DST/) after the letter.
func sedSubstitute(c byte, s string, in *sedInfo) string {
	if s == "" || s[0] == '\n' || s[0] == '\\' {
		in.unsure = true
		return ""
	}
	d := s[0]
	rest, ok := sedDelimited(s[1:], d)
	if ok {
		rest, ok = sedDelimited(rest, d)
	}
	if !ok {
		in.unsure = true
		return ""
	}
	if c == 'y' {
		return rest
	}
	for len(rest) > 0 {
		switch f := rest[0]; {
		case f == 'e':
			in.runs = true
			rest = rest[1:]
		case f == 'w':
			var name string
			name, rest = sedFileName(rest[1:])
			in.writes = append(in.writes, name)
		case f == 'g' || f == 'p' || f == 'i' || f == 'I' || f == 'm' || f == 'M' || f >= '0' && f <= '9':
			rest = rest[1:]
		default:
			return rest
		}
	}
	return rest
}

// sedText skips the text of a, i and c: to the end of a line that does
// not end in a backslash (a\ then the text on the next lines).
func sedText(s string) string {
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return ""
		}
		line := s[:i]
		s = s[i+1:]
		if n := len(line) - len(strings.TrimRight(line, "\\")); n%2 == 0 {
			return s
		}
	}
}

// sedToEnd skips to the end of the line.
func sedToEnd(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return ""
}

// sedFileName reads the file name of r, R, w, W (the rest of the line,
// leading blanks skipped; no blank needed: w.git/config).
func sedFileName(s string) (name, rest string) {
	s = strings.TrimLeft(s, " \t")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}
