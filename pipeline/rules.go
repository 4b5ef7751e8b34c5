package pipeline

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// Behavior is what a rule does to a matching call.
type Behavior string

// The behaviors, in evaluation order.
const (
	BehaviorDeny  Behavior = "deny"
	BehaviorAsk   Behavior = "ask"
	BehaviorAllow Behavior = "allow"
)

// Rule is a parsed permission rule: `Tool` or `Tool(specifier)`.
type Rule struct {
	Raw      string
	Tool     string // a name, or a glob for deny/ask ("*", "mcp__*")
	Spec     string
	HasSpec  bool
	Behavior Behavior
	Src      settings.PermRule
	// Param is set for a parameter rule Tool(param:value) (deny/ask only).
	Param, ParamValue string
	bashRe            *regexp.Regexp
	bashPrefix        string // literal text before the first *: a cheap reject
	bashExact         bool   // no wildcard: an exec wrapper may match it
	bashWord          string // the literal of a "literal *" pattern, matched without the regexp
	bashAnyLine       bool   // the wildcard matches newlines too (deny and ask rules)
	pathRule          *pathRule
	domain            string
	// where is Src.Where(), made once.
	where string
}

// RuleError is a rule that cannot be parsed: it is reported with its file
// and index, and never treated as allow.
type RuleError struct {
	Rule settings.PermRule
	Msg  string
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("%s: rule %q: %s", e.Rule.Where(), e.Rule.Rule, e.Msg)
}

// toolAliases maps older or alternative names to canonical tool names.
var toolAliases = map[string]string{"Task": "Agent", "LS": "Read", "MultiEdit": "MultiEdit"}

// KnownTools are the canonical tool names the gate knows.
var KnownTools = []string{"Bash", "Read", "Edit", "Write", "MultiEdit", "NotebookEdit", "Glob", "Grep", "WebFetch",
	"WebSearch", "Agent", "TaskStop", "TodoWrite", "Skill", "AskUserQuestion", "ExitPlanMode", "BashOutput", "KillShell", "Cd", "EndConversation", "Monitor"}

// primaryFields are tool input fields a parameter rule may not name: a rule
// on them is bypassable (a compound command), so it is ignored.
var primaryFields = []string{"command", "file_path", "path", "notebook_path", "url"}

// bashParams are Bash's scalar input fields other than command.
var bashParams = []string{"timeout", "description", "run_in_background", "dangerouslyDisableSandbox"}

// ParseRule parses one rule. A nil rule with a nil error means the rule is
// accepted but ignored (with warn set), as Claude Code does.
func ParseRule(pr settings.PermRule, home string) (r *Rule, warn string, err error) {
	raw := strings.TrimSpace(pr.Rule)
	fail := func(msg string) (*Rule, string, error) { return nil, "", &RuleError{pr, msg} }
	if raw == "" {
		return fail("empty rule")
	}
	if !utf8.ValidString(raw) {
		return fail("not valid UTF-8")
	}
	r = &Rule{Raw: raw, Behavior: Behavior(pr.Behavior), Src: pr, where: pr.Where()}
	var err2 error
	if r.Tool, r.Spec, r.HasSpec, err2 = settings.SplitRule(raw); err2 != nil {
		return fail(err2.Error())
	}
	if canon, ok := toolAliases[r.Tool]; ok {
		r.Tool = canon
	}
	if !strings.ContainsAny(r.Tool, "*_") && !slices.Contains(KnownTools, r.Tool) {
		if s := settings.Suggest(r.Tool, KnownTools); s != "" {
			return fail(fmt.Sprintf("unknown tool %q (did you mean %s?); tool names are case-sensitive, and this rule would match nothing", r.Tool, s))
		}
		return nil, fmt.Sprintf("%s: %q names no tool sbx knows; it matches nothing here", pr.Where(), raw), nil
	}
	if strings.Contains(r.Tool, "*") {
		if r.Behavior == BehaviorAllow {
			// An allow glob is honoured only after a literal mcp__<server>__.
			prefix, _, _ := strings.Cut(r.Tool, "*")
			if !strings.HasPrefix(prefix, "mcp__") || strings.Count(prefix, "__") < 2 {
				return nil, fmt.Sprintf("%s: unanchored allow glob %q is skipped and approves nothing", pr.Where(), raw), nil
			}
		}
		if r.HasSpec {
			return fail("a tool-name glob takes no specifier")
		}
		return r, "", nil
	}
	if strings.HasPrefix(r.Tool, "mcp__") && r.HasSpec {
		return nil, fmt.Sprintf("%s: MCP rule %q with parentheses is skipped", pr.Where(), raw), nil
	}
	if !r.HasSpec || r.Spec == "*" && r.Tool == "Bash" {
		r.HasSpec, r.Spec = false, ""
		return r, "", nil
	}
	// Parameter rules: Tool(param:value), deny and ask only.
	if name, value, ok := strings.Cut(r.Spec, ":"); ok && isIdent(strings.TrimSpace(name)) {
		name = strings.TrimSpace(name)
		if slices.Contains(primaryFields, name) {
			return nil, fmt.Sprintf("%s: %q names the tool's primary field %s and is ignored (a compound command would bypass it)", pr.Where(), raw, name), nil
		}
		if r.Tool != "Bash" || slices.Contains(bashParams, name) {
			if r.Tool == "WebFetch" && name == "domain" {
				// WebFetch(domain:…) is the tool's own specifier.
			} else {
				if r.Behavior == BehaviorAllow {
					return nil, fmt.Sprintf("%s: parameter rule %q is for deny and ask only, skipped", pr.Where(), raw), nil
				}
				r.Param, r.ParamValue = name, strings.TrimSpace(value)
				return r, "", nil
			}
		}
	}
	switch r.Tool {
	case "Bash":
		// A deny or ask rule's wildcard matches across newlines: an
		// argument holding one ("rm victim $'\n'") must not slip past it.
		r.bashAnyLine = r.Behavior != BehaviorAllow
		r.bashRe, r.bashExact = bashPattern(r.Spec, r.bashAnyLine)
		r.bashWord = wordPattern(r.Spec)
		r.bashPrefix, _, _ = strings.Cut(strings.TrimSuffix(r.Spec, ":*"), "*")
		r.bashPrefix = strings.TrimSuffix(r.bashPrefix, " ")
	case "Read", "Edit":
		pr2, err := parsePathRule(r.Spec, pr, home, r.Behavior)
		if err != nil {
			return fail(err.Error())
		}
		r.pathRule = pr2
	case "Write", "MultiEdit", "NotebookEdit", "Glob", "Grep":
		return nil, fmt.Sprintf("%s: %q is accepted but never consulted (use Edit(path) or Read(path))", pr.Where(), raw), nil
	case "WebFetch":
		d, ok := strings.CutPrefix(r.Spec, "domain:")
		if !ok {
			return fail("WebFetch rules take domain:HOST")
		}
		d = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(d), "."))
		if d == "*" {
			r.HasSpec, r.Spec = false, ""
		}
		r.domain = d
	}
	return r, "", nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// bashPattern compiles a Bash specifier: `*` matches any text (spaces
// too); a trailing ` *` or `:*` that is the only wildcard also matches the
// bare command, and then matches newlines only when anyLine is set; without
// `*` the match is exact.
func bashPattern(spec string, anyLine bool) (*regexp.Regexp, bool) {
	if strings.HasSuffix(spec, ":*") {
		spec = strings.TrimSuffix(spec, ":*") + " *"
	}
	if !strings.Contains(spec, "*") {
		return regexp.MustCompile("^" + regexp.QuoteMeta(spec) + "$"), true
	}
	if strings.Count(spec, "*") == 1 && strings.HasSuffix(spec, " *") {
		prefix := strings.TrimSuffix(spec, " *")
		flags := ""
		if anyLine {
			flags = "(?s)"
		}
		return regexp.MustCompile(flags + "^" + regexp.QuoteMeta(prefix) + "(?: .*)?$"), false
	}
	parts := strings.Split(spec, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("(?s)^" + strings.Join(parts, ".*") + "$"), false
}

// wordPattern returns the literal of a "literal *" pattern (see
// bashPattern's second case), "" for any other.
func wordPattern(spec string) string {
	if strings.HasSuffix(spec, ":*") {
		spec = strings.TrimSuffix(spec, ":*") + " *"
	}
	if strings.Count(spec, "*") == 1 && strings.HasSuffix(spec, " *") {
		return strings.TrimSuffix(spec, " *")
	}
	return ""
}

// matchBash matches a command text against a Bash rule's pattern.
func (r *Rule) matchBash(text string) bool {
	if w := r.bashWord; w != "" {
		// ^w(?: .*)?$ without the regexp: "." matches a newline only
		// with (?s), for deny and ask rules.
		if !strings.HasPrefix(text, w) {
			return false
		}
		rest := text[len(w):]
		return rest == "" || rest[0] == ' ' && (r.bashAnyLine || strings.IndexByte(rest, '\n') < 0)
	}
	return strings.HasPrefix(text, r.bashPrefix) && r.bashRe.MatchString(text)
}

// matchDynamicName reports whether the rule would match sc if its program,
// which is computed at run time ($(echo git) push), were the rule's own.
func (r *Rule) matchDynamicName(sc *SimpleCommand) bool {
	if !sc.DynamicName || len(sc.Words) < 2 {
		return false
	}
	name, _, _ := strings.Cut(strings.TrimSpace(r.bashPrefix), " ")
	if name == "" || strings.ContainsAny(name, "*?") {
		return false
	}
	var rest []string
	for _, w := range sc.Words[1:] {
		rest = append(rest, w.Values...)
	}
	return r.matchBash(name + " " + strings.Join(rest, " "))
}

// gitGlobalArg are git's global options that take the next word as their
// argument; gitGlobalFlag those that take none (git's own list).
var (
	gitGlobalArg  = []string{"-c", "-C", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--list-cmds", "--attr-source", "--shallow-file"}
	gitGlobalFlag = []string{"-p", "--paginate", "-P", "--no-pager", "--bare", "--no-replace-objects", "--no-lazy-fetch", "--no-optional-locks", "--no-advice",
		"--literal-pathspecs", "--no-literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--exec-path", "--html-path", "--man-path", "--info-path"}
)

// matchGitForm reports whether a deny or ask rule matches a git command
// once its global options are left out: git -c x=y push and git -C . push
// run git push, which Bash(git push:*) names.
func (r *Rule) matchGitForm(sc *SimpleCommand) bool {
	if len(sc.Args) < 2 || len(sc.Words) != len(sc.Args) {
		return false
	}
	if name, _ := progName(sc.Args[0]); name != "git" {
		return false
	}
	for i := 1; i < len(sc.Args); {
		a := sc.Args[i]
		switch {
		case sc.Words[i].Dynamic || strings.HasPrefix(a, "-") && !knownGitGlobal(a):
			// An option git's list does not have (or one known only at
			// run time) may or may not take the next word: every later
			// word may be the subcommand.
			for j := i + 1; j < len(sc.Args); j++ {
				if r.matchBash("git " + strings.Join(sc.Args[j:], " ")) {
					return true
				}
			}
			return false
		case slices.Contains(gitGlobalArg, a):
			i += 2
		case strings.HasPrefix(a, "-"):
			i++
		default:
			if i == 1 {
				return false // no global option: Text and Norm were matched
			}
			return r.matchBash("git " + strings.Join(sc.Args[i:], " "))
		}
	}
	return false
}

// knownGitGlobal reports whether a is one of git's global options that
// takes no separate argument (a flag, --opt=value, -ckey=value, -Cdir) or
// one of gitGlobalArg.
func knownGitGlobal(a string) bool {
	if slices.Contains(gitGlobalArg, a) || slices.Contains(gitGlobalFlag, a) {
		return true
	}
	if k, _, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
		return slices.Contains(gitGlobalArg, k) || k == "--exec-path"
	}
	return len(a) > 2 && (strings.HasPrefix(a, "-c") || strings.HasPrefix(a, "-C"))
}

// MatchTool reports whether a rule names a tool (exactly, by glob, or as an
// MCP server prefix).
func (r *Rule) MatchTool(tool string) bool {
	if canon, ok := toolAliases[tool]; ok {
		tool = canon
	}
	if strings.Contains(r.Tool, "*") {
		ok, _ := path.Match(r.Tool, tool)
		return ok || r.Tool == "*"
	}
	if r.Tool == tool {
		return true
	}
	// mcp__server matches every tool of that server.
	if strings.HasPrefix(r.Tool, "mcp__") && strings.Count(r.Tool, "__") == 1 && strings.HasPrefix(tool, r.Tool+"__") {
		return true
	}
	// Edit rules cover every file-editing tool.
	if r.Tool == "Edit" && (tool == "Write" || tool == "MultiEdit" || tool == "NotebookEdit") {
		return true
	}
	return false
}

// RemovesTool reports whether a deny rule removes the tool altogether (a
// bare name or glob).
func (r *Rule) RemovesTool(tool string) bool {
	return r.Behavior == BehaviorDeny && !r.HasSpec && r.Param == "" && r.MatchTool(tool)
}
