package pipeline

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// pathRule is a Read or Edit specifier compiled to an absolute doublestar
// pattern (gitignore anchors, spec §1.7).
type pathRule struct {
	pattern string // absolute, for doublestar.Match
	// anchor is the directory a relative pattern hangs from; empty for
	// absolute and home patterns.
	anchor string
}

// settingsBase returns the directory a "/path" rule is relative to: the
// project root for project and local files (and the command line), the
// settings file's directory otherwise (~/.claude for Claude Code's user file,
// the directory of a --settings file).
func settingsBase(pr settings.PermRule, cwd string) string {
	if pr.File == nil || pr.File.Level.IsProject() || strings.HasPrefix(pr.File.Path, "--settings (inline") {
		return cwd
	}
	return filepath.Dir(pr.File.Path)
}

// parsePathRule compiles a Read/Edit specifier. The cwd is substituted at
// match time (relative and "/" patterns), so rules are compiled against
// placeholders and completed by (*Gate).compile.
func parsePathRule(spec string, pr settings.PermRule, home string, b Behavior) (*pathRule, error) {
	p := strings.TrimSpace(spec)
	if p == "" {
		return nil, errors.New("empty path")
	}
	if _, err := doublestar.Match(p, ""); err != nil && !errors.Is(err, doublestar.ErrBadPattern) {
		return nil, err
	} else if errors.Is(err, doublestar.ErrBadPattern) {
		return nil, errors.New("bad glob pattern")
	}
	r := &pathRule{}
	switch {
	case strings.HasPrefix(p, "//"):
		r.pattern = "/" + strings.TrimLeft(p, "/")
	case strings.HasPrefix(p, "~/"):
		r.pattern = filepath.ToSlash(filepath.Join(home, p[2:])) + trailingSlash(p)
	case p == "~":
		r.pattern = home
	case strings.HasPrefix(p, "/"):
		r.anchor = "\x00base" // filled with settingsBase at compile time
		r.pattern = p
	default:
		rel := strings.TrimPrefix(p, "./")
		r.anchor = "\x00cwd"
		switch {
		case !strings.Contains(strings.TrimSuffix(rel, "/"), "/"):
			// A bare name matches at any depth below the anchor.
			r.pattern = "/**/" + rel
		case b != BehaviorAllow && !strings.HasPrefix(p, "./") && isSingleDirGlob(rel):
			// src/** : only <cwd>/src for allow, any depth for deny/ask.
			r.pattern = "/**/" + rel
		default:
			r.pattern = "/" + rel
		}
	}
	return r, nil
}

func trailingSlash(p string) string {
	if strings.HasSuffix(p, "/") && len(p) > 1 {
		return "/"
	}
	return ""
}

func isSingleDirGlob(rel string) bool {
	dir, rest, ok := strings.Cut(rel, "/")
	return ok && rest == "**" && dir != "" && !strings.ContainsAny(dir, "*?[")
}

// resolved returns the rule's absolute pattern for a settings base and cwd.
func (r *pathRule) resolved(base, cwd string) string {
	p := r.pattern
	switch r.anchor {
	case "\x00base":
		p = strings.TrimSuffix(base, "/") + p
	case "\x00cwd":
		p = strings.TrimSuffix(cwd, "/") + p
	}
	// A directory pattern ("dir/") matches what is inside it.
	if strings.HasSuffix(p, "/") {
		p += "**"
	}
	return p
}

// matchPath reports whether an absolute path matches the rule, or lies
// inside a directory the rule names.
func (r *pathRule) matchPath(abs, base, cwd string) bool {
	pat := r.resolved(base, cwd)
	if ok, _ := doublestar.Match(pat, abs); ok {
		return true
	}
	// Read(dir) covers the directory's contents, as gitignore does.
	if !strings.HasSuffix(pat, "**") {
		if ok, _ := doublestar.Match(pat+"/**", abs); ok {
			return true
		}
	}
	return false
}
