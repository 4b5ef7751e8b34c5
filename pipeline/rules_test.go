package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

func TestBashPattern(t *testing.T) {
	tests := []struct {
		spec, cmd string
		want      bool
	}{
		{"ls *", "ls", true}, {"ls *", "ls -la", true}, {"ls *", "lsof", false},
		{"ls:*", "ls -la", true}, {"ls:*", "ls", true}, {"ls*", "lsof", true}, {"ls*", "ls -la", true},
		{"npm test", "npm test", true}, {"npm test", "npm test --ci", false},
		{"* install", "pip install", true}, {"* install", "npm install x", false},
		{"* --help *", "npm --help x", true}, {"* --help *", "npm --help", false},
		{"git:* push", "git push", false}, {"git:* push", "git:x push", true},
		{"git * main", "git -c core.fsmonitor=x diff main", true},
		{"echo (a)", "echo (a)", true},
	}
	for _, tt := range tests {
		re, _ := bashPattern(tt.spec, false)
		if got := re.MatchString(tt.cmd); got != tt.want {
			t.Errorf("Bash(%s) vs %q = %v, want %v", tt.spec, tt.cmd, got, tt.want)
		}
	}
}

func TestParseRule(t *testing.T) {
	tests := []struct {
		rule, behavior       string
		tool, spec, param    string
		ignored, errContains string
	}{
		{rule: "Bash", behavior: "deny", tool: "Bash"},
		{rule: "Bash(*)", behavior: "deny", tool: "Bash"},
		{rule: "Bash(npm test:*)", behavior: "allow", tool: "Bash", spec: "npm test:*"},
		{rule: "Bash(dangerouslyDisableSandbox:true)", behavior: "ask", tool: "Bash", spec: "dangerouslyDisableSandbox:true", param: "dangerouslyDisableSandbox"},
		{rule: "Bash(command:rm *)", behavior: "deny", ignored: "primary field"},
		{rule: "Bash(timeout:*)", behavior: "allow", ignored: "deny and ask only"},
		{rule: "WebFetch(domain:example.com)", behavior: "allow", tool: "WebFetch", spec: "domain:example.com"},
		{rule: "mcp__*", behavior: "allow", ignored: "unanchored"},
		{rule: "*", behavior: "allow", ignored: "unanchored"},
		{rule: "mcp__github__get_*", behavior: "allow", tool: "mcp__github__get_*"},
		{rule: "mcp__*", behavior: "deny", tool: "mcp__*"},
		{rule: "mcp__github__x(y)", behavior: "deny", ignored: "skipped"},
		{rule: "Write(src/**)", behavior: "allow", ignored: "never consulted"},
		{rule: "Task(Explore)", behavior: "deny", tool: "Agent", spec: "Explore"},
		{rule: "Bash(npm test", behavior: "deny", errContains: "closing parenthesis"},
		{rule: "", behavior: "deny", errContains: "empty"},
		{rule: "Read([)", behavior: "deny", errContains: "bad glob"},
		{rule: "WebFetch(example.com)", behavior: "allow", errContains: "domain:"},
		{rule: "bash(echo:*)", behavior: "deny", errContains: "did you mean Bash?"},
		{rule: "Bahs", behavior: "deny", errContains: "did you mean Bash?"},
		{rule: "SomeFutureTool", behavior: "deny", ignored: "names no tool sbx knows"},
	}
	for _, tt := range tests {
		pr := settings.PermRule{Rule: tt.rule, Behavior: tt.behavior}
		r, warn, err := ParseRule(pr, "/home/u")
		switch {
		case tt.errContains != "":
			if err == nil || !strings.Contains(err.Error(), tt.errContains) {
				t.Errorf("%q: err = %v, want %q", tt.rule, err, tt.errContains)
			}
		case tt.ignored != "":
			if r != nil || !strings.Contains(warn, tt.ignored) {
				t.Errorf("%q: rule %v warn %q, want ignored with %q", tt.rule, r, warn, tt.ignored)
			}
		default:
			if err != nil || r == nil || r.Tool != tt.tool || r.Spec != tt.spec || r.Param != tt.param {
				t.Errorf("%q: %+v %v", tt.rule, r, err)
			}
		}
	}
}

func TestMatchTool(t *testing.T) {
	tests := []struct {
		rule, tool string
		want       bool
	}{
		{"mcp__github", "mcp__github__get_issue", true},
		{"mcp__github", "mcp__gitlab__x", false},
		{"mcp__github__*", "mcp__github__get_issue", true},
		{"mcp__*", "mcp__x__y", true},
		{"*", "Bash", true},
		{"Edit", "Write", true},
		{"Edit", "NotebookEdit", true},
		{"Read", "Edit", false},
	}
	for _, tt := range tests {
		r, _, err := ParseRule(settings.PermRule{Rule: tt.rule, Behavior: "deny"}, "/h")
		if err != nil || r == nil {
			t.Fatalf("%s: %v", tt.rule, err)
		}
		if got := r.MatchTool(tt.tool); got != tt.want {
			t.Errorf("%s vs %s = %v", tt.rule, tt.tool, got)
		}
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"Bash(npm test:*)", "Read(//a/**)", "WebFetch(domain:*.x.com)", "mcp__a__*", "Bash(x:y)", "Edit(~/.ssh/**)", "Agent(Explore)"} {
		f.Add(s, "deny")
		f.Add(s, "allow")
	}
	f.Fuzz(func(t *testing.T, rule, behavior string) {
		if behavior != "allow" && behavior != "ask" && behavior != "deny" {
			return
		}
		r, _, err := ParseRule(settings.PermRule{Rule: rule, Behavior: behavior}, "/home/u")
		if err != nil || r == nil {
			return
		}
		// An allow rule never carries a tool glob outside mcp__server__.
		if behavior == "allow" && strings.Contains(r.Tool, "*") && !strings.HasPrefix(r.Tool, "mcp__") {
			t.Fatalf("allow glob accepted: %q", rule)
		}
		if r.bashRe != nil {
			r.bashRe.MatchString("npm test")
		}
	})
}

// The "literal *" fast path of matchBash means exactly what the pattern's
// regexp means, for any literal and text (newlines, spaces, prefixes).
func FuzzMatchBashWord(f *testing.F) {
	for _, s := range [][2]string{{"npm", "npm test"}, {"npm", "npm"}, {"npm", "npmx"}, {"git push", "git push\norigin"},
		{"a b", "a b "}, {"x", "x\n"}, {"", " y"}, {"ls", "ls \t-l"}} {
		f.Add(s[0], s[1], false)
		f.Add(s[0], s[1], true)
	}
	f.Fuzz(func(t *testing.T, lit, text string, colon bool) {
		if strings.Contains(lit, "*") || lit == "" || !utf8.ValidString(lit) {
			return // settings are UTF-8: such a rule cannot be written
		}
		spec := lit + " *"
		if colon {
			spec = lit + ":*"
		}
		for _, anyLine := range []bool{false, true} {
			re, _ := bashPattern(spec, anyLine)
			r := &Rule{bashRe: re, bashWord: wordPattern(spec), bashAnyLine: anyLine}
			if r.bashWord != lit {
				t.Fatalf("%q: word %q", spec, r.bashWord)
			}
			if got, want := r.matchBash(text), re.MatchString(text); got != want {
				t.Errorf("%q (any line %v) against %q: %v, the regexp says %v", spec, anyLine, text, got, want)
			}
		}
	})
}

// A deny or ask rule's wildcard matches an argument holding a newline
// (red team: `rm victim "\n"` ran past Bash(rm *)); an allow rule's does
// not, so it never approves more than it names.
func TestDenyWildcardSpansNewlines(t *testing.T) {
	g := gateWith(t, `{"sandbox": {"enabled": false}, "permissions": {"deny": ["Bash(rm *)", "Bash(git push:*)"], "ask": ["Bash(curl *)"], "allow": ["Bash(npm *)"]}}`, "default", false)
	for _, tt := range []struct {
		cmd, rule string // rule: the rule that decided ("" for none)
		want      Decision
	}{
		{"rm victim \"\n\"", "Bash(rm *)", DecisionDeny},
		{"\\rm victim $'\\n'", "Bash(rm *)", DecisionDeny},
		{"/bin/rm victim $'\\n'", "Bash(rm *)", DecisionDeny},
		{"git push origin \"a\nb\"", "Bash(git push:*)", DecisionDeny},
		{"curl \"x\ny\"", "Bash(curl *)", DecisionDeny}, // ask, and this session cannot prompt
		{"npm \"a\nb\"", "", DecisionDeny},              // not approved by Bash(npm *): no prompt
		{"npm a", "Bash(npm *)", DecisionAllow},
	} {
		in, _ := json.Marshal(map[string]string{"command": tt.cmd})
		v, err := g.Decide(context.Background(), &Call{ID: "x", Tool: "Bash", Input: in})
		if err != nil || v.Decision != tt.want || v.Rule != tt.rule {
			t.Errorf("%q: %v by %q %v (%s), want %v by %q", tt.cmd, v.Decision, v.Rule, err, v.Reason, tt.want, tt.rule)
		}
	}
}
