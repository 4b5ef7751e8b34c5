package fsrules

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// gitKey is one key = value line of a git config file. Section and name are
// lower case; the subsection keeps its case, as git does.
type gitKey struct {
	section, sub, name string
	hasSub             bool
	value              string
	// raw is the value's text as written (with continuations): two keys
	// whose raw text is equal read the same to git, whatever the parser
	// makes of them.
	raw string
}

func (k gitKey) String() string {
	if k.hasSub {
		return k.section + "." + k.sub + "." + k.name
	}
	return k.section + "." + k.name
}

// pattern is the key with its subsection replaced by "*".
func (k gitKey) pattern() string {
	if k.hasSub {
		return k.section + ".*." + k.name
	}
	return k.section + "." + k.name
}

// gitBlanks are what git's config parser takes for white space.
const gitBlanks = " \t\r"

// maxGitConfig bounds the config files the merge reads.
const maxGitConfig = 1 << 20

// parseGitConfig reads a git config file into its keys, in order. It
// accepts what git writes and the usual hand-written forms; anything it
// does not understand is an error, and the caller treats the file as unsafe.
func parseGitConfig(data []byte) ([]gitKey, error) {
	if len(data) > maxGitConfig {
		return nil, errors.New("config file over 1 MiB")
	}
	var keys []gitKey
	var cur gitKey
	haveSection := false
	// Git skips a UTF-8 byte order mark at the start of the file.
	lines := strings.Split(strings.TrimPrefix(string(data), "\ufeff"), "\n")
	for i := range len(lines) - 1 {
		lines[i] = strings.TrimSuffix(lines[i], "\r") // git reads CR LF as LF
	}
	for i := 0; i < len(lines); i++ {
		// Only leading blanks go: a value's trailing backslash may be
		// followed by blanks, which git does not take for a continuation.
		line := strings.TrimLeft(lines[i], gitBlanks)
		if strings.Trim(line, gitBlanks) == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			sec, rest, err := parseSection(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			cur, haveSection = sec, true
			if strings.Trim(rest, gitBlanks) == "" {
				continue
			}
			line = rest // "[core] bare = true" on one line
		}
		if !haveSection {
			return nil, fmt.Errorf("line %d: key outside a section", i+1)
		}
		name, raw, hasValue := strings.Cut(line, "=")
		name = strings.ToLower(strings.TrimRight(name, " \t"))
		if !validKeyName(name) {
			return nil, fmt.Errorf("line %d: bad key name %q", i+1, name)
		}
		value, rawText := "true", "" // a bare key is a boolean true
		if hasValue {
			v, used, err := parseValue(raw, lines[i+1:])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			rawText = "=" + strings.Join(append([]string{raw}, lines[i+1:i+1+used]...), "\n")
			value, i = v, i+used
		}
		k := cur
		k.name, k.value, k.raw = name, value, rawText
		keys = append(keys, k)
	}
	return keys, nil
}

// parseSection reads "[section]", `[section "sub"]` or the legacy
// "[section.sub]", and returns what follows the closing bracket.
func parseSection(line string) (gitKey, string, error) {
	var k gitKey
	i := 1
	for i < len(line) && (isAlnum(line[i]) || line[i] == '-' || line[i] == '.') {
		i++
	}
	name := line[1:i]
	if name == "" {
		return k, "", errors.New("empty section name")
	}
	if sec, sub, ok := strings.Cut(name, "."); ok {
		k.section, k.sub, k.hasSub = strings.ToLower(sec), strings.ToLower(sub), true
	} else {
		k.section = strings.ToLower(name)
	}
	if i < len(line) && line[i] == ' ' {
		if k.hasSub {
			return k, "", errors.New("both a dotted and a quoted subsection")
		}
		i++
		if i >= len(line) || line[i] != '"' {
			return k, "", errors.New("subsection without quotes")
		}
		var sb strings.Builder
		for i++; ; i++ {
			if i >= len(line) {
				return k, "", errors.New("unterminated subsection")
			}
			c := line[i]
			if c == '"' {
				break
			}
			if c == '\\' && i+1 < len(line) {
				i++
				c = line[i]
			}
			sb.WriteByte(c)
		}
		k.sub, k.hasSub = sb.String(), true
		i++
	}
	if i >= len(line) || line[i] != ']' {
		return k, "", errors.New("bad section header")
	}
	return k, strings.TrimLeft(line[i+1:], gitBlanks), nil
}

// parseValue reads a value: quotes, escapes, comments and backslash line
// continuations (taken from more). It returns how many lines of more it
// used.
func parseValue(raw string, more []string) (string, int, error) {
	v := valueScanner{}
	for used := 0; ; used++ {
		cont, err := v.line(raw)
		if err != nil || !cont {
			if err == nil && v.quoted {
				err = errors.New("unterminated quote")
			}
			return v.sb.String(), used, err
		}
		if used >= len(more) {
			return "", 0, errors.New("continuation at end of file")
		}
		raw = more[used]
	}
}

// valueScanner accumulates a config value across continuation lines.
type valueScanner struct {
	sb      strings.Builder
	quoted  bool
	pending string // blanks kept only if more text follows
}

func (v *valueScanner) put(s string) {
	v.sb.WriteString(v.pending + s)
	v.pending = ""
}

// line scans one physical line; cont reports a trailing backslash.
func (v *valueScanner) line(s string) (cont bool, err error) {
	for j := 0; j < len(s); j++ {
		switch c := s[j]; {
		case c == '\\' && j+1 == len(s):
			v.put("") // git keeps the blanks before a continuation
			return true, nil
		case c == '\\':
			j++
			switch s[j] {
			case 'n':
				v.put("\n")
			case 't':
				v.put("\t")
			case 'b':
				v.put("\b")
			case '"', '\\':
				v.put(s[j : j+1])
			default:
				return false, fmt.Errorf("bad escape \\%c", s[j])
			}
		case c == '"':
			v.put("") // blanks before a quote are kept, as git does
			v.quoted = !v.quoted
		case !v.quoted && (c == '#' || c == ';'):
			return false, nil
		case !v.quoted && (c == ' ' || c == '\t' || c == '\r'):
			// As git does: blanks inside a value become spaces, blanks at
			// its ends go.
			if v.sb.Len() > 0 {
				v.pending += " "
			}
		default:
			v.put(s[j : j+1])
		}
	}
	return false, nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func validKeyName(n string) bool {
	if n == "" || !(n[0] >= 'a' && n[0] <= 'z') {
		return false
	}
	for i := 0; i < len(n); i++ {
		if !isAlnum(n[i]) && n[i] != '-' {
			return false
		}
	}
	return true
}

// harmlessGitKeys are the config keys a sandboxed command may add, change
// or remove in a git directory: what git init, git clone, git checkout
// --track, git branch --set-upstream-to and git remote add write, none of
// which names a program, a hook, a filter or another file to read.
var harmlessGitKeys = []string{
	"core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates",
	"core.ignorecase", "core.precomposeunicode", "core.symlinks",
	"core.sparsecheckout", "core.sparsecheckoutcone",
	"extensions.objectformat", "extensions.refstorage", "init.defaultbranch",
	"user.name", "user.email",
	"remote.*.fetch", "remote.*.tagopt", "remote.*.prune", "remote.*.mirror", "remote.*.push",
	"branch.*.remote", "branch.*.merge", "branch.*.rebase", "branch.*.pushremote", "branch.*.description",
	"submodule.*.active",
	// Only for a remote or submodule that had no URL before: changing
	// where an existing remote points would send the user's pushes to
	// another server.
	"remote.*.url", "remote.*.pushurl", "submodule.*.url",
}

// newOnlyGitKeys may be set only where the remote (or submodule) had no
// URL: a changed fetch refspec of an existing remote (+refs/heads/*:refs/heads/*)
// has the user's next fetch overwrite their branches.
var newOnlyGitKeys = []string{"remote.*.url", "remote.*.pushurl", "submodule.*.url", "remote.*.fetch"}

// initOnlyGitKeys may be set only in a new repository's config: in an
// existing one they would change what the user's next push sends (a push
// refspec ":refs/heads/prod" deletes a branch of the user's server, a
// mirror prunes them all), or make the repository unusable or its next
// checkout delete tracked files (bare, sparse checkout, the format).
var initOnlyGitKeys = []string{"remote.*.push", "remote.*.mirror", "core.bare", "core.sparsecheckout",
	"core.sparsecheckoutcone", "core.repositoryformatversion", "extensions.objectformat", "extensions.refstorage"}

// GitConfigChange reports whether replacing a git config file's content
// old with new changes only harmless keys (old is nil for a config that did
// not exist: a new repository's). When it does not, why names the first key
// that is not harmless, or the reason the file cannot be read.
func GitConfigChange(old, new []byte) (ok bool, why string) {
	nk, err := parseGitConfig(new)
	if err != nil {
		return false, "the new git config cannot be checked: " + err.Error()
	}
	ok_, err := parseGitConfig(old)
	if err != nil {
		return false, "the git config on the host cannot be checked: " + err.Error()
	}
	before := map[string][]string{}
	for _, k := range ok_ {
		before[k.String()] = append(before[k.String()], k.raw)
	}
	after := map[string][]string{}
	byName := map[string]gitKey{}
	for _, k := range nk {
		after[k.String()] = append(after[k.String()], k.raw)
		byName[k.String()] = k
	}
	for _, k := range ok_ {
		if _, ok := byName[k.String()]; !ok {
			byName[k.String()] = k
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if slices.Equal(before[n], after[n]) {
			continue
		}
		k := byName[n]
		if !slices.Contains(harmlessGitKeys, k.pattern()) {
			return false, fmt.Sprintf("git config key %s can run programs or redirect git; only harmless keys (branch tracking, remotes, fetch refspecs …) may change", n)
		}
		if slices.Contains(newOnlyGitKeys, k.pattern()) && hadURL(ok_, k) {
			return false, fmt.Sprintf("git config key %s: an existing remote's URL or refspecs may not be changed from the sandbox (pushes would go elsewhere, fetches overwrite other branches)", n)
		}
		if old != nil && slices.Contains(initOnlyGitKeys, k.pattern()) {
			return false, fmt.Sprintf("git config key %s may be set only in a new repository: in an existing one it changes what the next push sends, or the repository's layout", n)
		}
		if old != nil {
			if why := redirects(ok_, n, k.pattern(), after[n]); why != "" {
				return false, why
			}
		}
	}
	return true, ""
}

// redirects says why a changed key of an existing repository would send
// the user's git elsewhere: a branch tracking or pushing to a remote that
// had no URL before (one the sandbox added), or a submodule given a URL
// (git submodule update would fetch from it).
func redirects(old []gitKey, name, pattern string, values []string) string {
	switch pattern {
	case "branch.*.remote", "branch.*.pushremote":
		for _, raw := range values {
			remote := strings.Trim(strings.TrimSpace(strings.TrimPrefix(raw, "=")), `"`)
			if remote != "." && !hadURL(old, gitKey{section: "remote", sub: remote}) {
				return fmt.Sprintf("git config key %s: %q is not a remote the repository had; the user's pull and push would go to a server the sandbox chose", name, remote)
			}
		}
	case "submodule.*.url":
		return fmt.Sprintf("git config key %s: a submodule's URL may not be set from the sandbox in an existing repository (git submodule update would fetch from it)", name)
	}
	return ""
}

// hadURL reports whether the old config gave k's remote or submodule a URL.
func hadURL(old []gitKey, k gitKey) bool {
	for _, o := range old {
		if o.section == k.section && o.sub == k.sub && (o.name == "url" || o.name == "pushurl") {
			return true
		}
	}
	return false
}
