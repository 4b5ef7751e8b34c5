package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/netrules"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// Mode is a permission mode.
type Mode string

// The permission modes (Claude Code's names; "manual" is an alias of default).
const (
	ModeDefault     Mode = "default"
	ModeAcceptEdits Mode = "acceptEdits"
	ModePlan        Mode = "plan"
	ModeAuto        Mode = "auto"
	ModeDontAsk     Mode = "dontAsk"
	ModeBypass      Mode = "bypassPermissions"
)

// ParseMode parses a mode name.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "default", "manual":
		return ModeDefault, nil
	case "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions":
		return Mode(s), nil
	}
	return "", fmt.Errorf("unknown permission mode %q (default, acceptEdits, plan, auto, dontAsk, bypassPermissions)", s)
}

// Decision is the gate's answer.
type Decision string

// The decisions.
const (
	DecisionAllow Decision = "allow"
	DecisionAsk   Decision = "ask"
	DecisionDeny  Decision = "deny"
)

// Verdict is a decision with why, and the input that was decided (hooks may
// rewrite it).
type Verdict struct {
	Decision Decision `json:"decision"`
	Reason   string   `json:"reason"`
	Rule     string   `json:"rule,omitempty"`
	// Source is the settings file, position and list of the deciding rule,
	// or the hook or mode that decided.
	Source string `json:"source"`
	Level  string `json:"level,omitempty"`
	// Input is the tool input as decided (after updatedInput).
	Input json.RawMessage `json:"input"`
	// Sandboxed says whether a Bash call would run in the sandbox.
	Sandboxed bool     `json:"sandboxed"`
	Trail     []string `json:"trail"`
	Warnings  []string `json:"warnings,omitempty"`
	// Context holds hooks' additionalContext for the model.
	Context []string `json:"context,omitempty"`
}

// Call is one tool call to decide.
type Call struct {
	ID    string
	Tool  string
	Input json.RawMessage
	m     map[string]any
}

func (c *Call) parse() error {
	c.m = nil
	dec := json.NewDecoder(bytes.NewReader(c.Input))
	dec.UseNumber()
	if err := dec.Decode(&c.m); err != nil {
		return fmt.Errorf("input is not a JSON object: %w", err)
	}
	if c.m == nil {
		return errors.New("input is not a JSON object")
	}
	return nil
}

func (c *Call) str(k string) string {
	s, _ := c.m[k].(string)
	return s
}

func (c *Call) command() string { return c.str("command") }

// Summary is the call's main argument, for logs: a Bash command, a file
// path, a URL, or "" when the input has none of these.
func (c *Call) Summary() string {
	if c.m == nil && c.parse() != nil {
		return ""
	}
	for _, k := range []string{"command", "file_path", "path", "url", "pattern"} {
		if s := c.str(k); s != "" {
			return s
		}
	}
	return ""
}

// GateOptions configure a [Gate].
type GateOptions struct {
	Settings *settings.Settings // required
	Cwd      string             // the project directory (absolute); required
	Home     string             // required
	// Mode overrides permissions.defaultMode; empty means the settings' or
	// default.
	Mode string
	// Interactive says a person can answer a prompt. When false, an "ask"
	// that no PermissionRequest hook answers becomes a deny.
	Interactive bool
	// SandboxAvailable says Bash calls can run in the sandbox.
	SandboxAvailable bool
	// Classifier is the external command (argv) that decides in auto mode,
	// with a PreToolUse hook's input and output. Auto mode refuses to start
	// without one.
	Classifier []string
	HookRunner HookRunner
	SessionID  string
}

// Gate decides tool calls the way Claude Code does (../CLAUDE_CODE_SPEC.md
// §7): tool removal, PreToolUse hooks, deny, ask, safety checks, hook
// allow, bypass, sandbox auto-allow, allow rules, mode baseline, and asks
// through PermissionRequest hooks.
type Gate struct {
	settings         *settings.Settings
	Cwd, Home        string
	Mode             Mode
	Interactive      bool
	SandboxAvailable bool
	Classifier       []string
	HookRunner       HookRunner
	SessionID        string
	rules            []*Rule
	// bashAllow are the Bash allow rules among rules, in order (the
	// loop that vouches for every subcommand reads only those).
	bashAllow []*Rule
	workDirs  []string
	excluded  []*regexp.Regexp
	Warnings  []string
}

// NewGate compiles the rules of the settings. A rule that cannot be parsed
// is an error naming its file and index: it is never treated as allow.
func NewGate(o GateOptions) (*Gate, error) {
	if o.Settings == nil || !filepath.IsAbs(o.Cwd) || !filepath.IsAbs(o.Home) {
		return nil, errors.New("pipeline: NewGate needs settings and absolute Cwd and Home")
	}
	g := &Gate{settings: o.Settings, Cwd: filepath.Clean(o.Cwd), Home: filepath.Clean(o.Home), Interactive: o.Interactive,
		SandboxAvailable: o.SandboxAvailable, Classifier: o.Classifier, HookRunner: o.HookRunner, SessionID: o.SessionID}
	modeName := o.Mode
	if modeName == "" {
		modeName = o.Settings.Perm.DefaultMode.V
	}
	m, err := ParseMode(modeName)
	if err != nil {
		return nil, err
	}
	if m == ModeBypass && o.Settings.Perm.DisableBypassMode {
		return nil, errors.New("bypassPermissions mode is disabled by permissions.disableBypassPermissionsMode")
	}
	if m == ModeAuto && len(o.Classifier) == 0 {
		return nil, errors.New("auto mode needs a classifier, which sbx does not have built in: pass --classifier CMD (same input and output as a PreToolUse hook) or choose another mode")
	}
	g.Mode = m
	for _, pr := range o.Settings.Perm.Rules {
		r, warn, err := ParseRule(pr, g.Home)
		if err != nil {
			return nil, err
		}
		if warn != "" {
			g.Warnings = append(g.Warnings, warn)
		}
		if r == nil {
			continue
		}
		if r.pathRule != nil {
			// Anchor "/path" rules at their settings source now.
			base := settingsBase(pr, g.Cwd)
			r.pathRule.pattern = r.pathRule.resolved(base, g.Cwd)
			r.pathRule.anchor = ""
		}
		g.rules = append(g.rules, r)
		if r.Behavior == BehaviorAllow && r.Tool == "Bash" {
			g.bashAllow = append(g.bashAllow, r)
		}
	}
	g.workDirs = []string{g.Cwd}
	for _, d := range o.Settings.Perm.AdditionalDirectories {
		p, err := fsrules.Anchor(d.Value, d.File.BaseDir, g.Home)
		if err == nil {
			g.workDirs = append(g.workDirs, p)
		}
	}
	for _, e := range o.Settings.Perm.ExcludedCommands {
		spec := strings.TrimSuffix(strings.TrimPrefix(e.Value, "Bash("), ")")
		re, _ := bashPattern(spec, false)
		g.excluded = append(g.excluded, re)
	}
	return g, nil
}

// Decide runs the decision procedure for one call. It never runs the tool.
func (g *Gate) Decide(ctx context.Context, call *Call) (*Verdict, error) {
	if canon, ok := toolAliases[call.Tool]; ok {
		call.Tool = canon
	}
	if err := call.parse(); err != nil {
		return nil, err
	}
	v := &Verdict{Input: call.Input}
	v.Warnings = append(v.Warnings, g.Warnings...)
	trail := func(s string, a ...any) { v.Trail = append(v.Trail, fmt.Sprintf(s, a...)) }
	done := func(d Decision, reason, source string, r *Rule) *Verdict {
		v.Decision, v.Reason, v.Source = d, reason, source
		if r != nil {
			v.Rule, v.Source = r.Raw, r.where
			if r.Src.File != nil {
				v.Level = r.Src.File.Level.String()
			}
		}
		v.Input = call.Input
		return v
	}

	// 0. A bare-name deny removes the tool.
	for _, r := range g.rules {
		if r.RemovesTool(call.Tool) {
			trail("tool %s is removed by deny rule %s", call.Tool, r.Raw)
			return done(DecisionDeny, fmt.Sprintf("the %s tool is denied by rule %s", call.Tool, r.Raw), "", r), nil
		}
	}

	// 1. PreToolUse hooks, before any rule.
	pre := g.runHooks(ctx, "PreToolUse", call)
	v.Warnings = append(v.Warnings, pre.warnings...)
	v.Context = pre.contexts
	if pre.blocked {
		trail("PreToolUse hook blocked (exit 2): %s", pre.reason)
		return done(DecisionDeny, pre.reason, pre.source, nil), nil
	}
	if pre.decision == DecisionDeny {
		trail("PreToolUse hook denied: %s", pre.reason)
		return done(DecisionDeny, pre.reason, pre.source, nil), nil
	}
	if len(pre.updatedInput) > 0 {
		trail("PreToolUse hook rewrote the input")
		call.Input = pre.updatedInput
		if err := call.parse(); err != nil {
			return done(DecisionDeny, "a hook's updatedInput is not a JSON object", pre.source, nil), nil
		}
		if err := ValidateInput(call.Tool, call.Input); err != nil {
			return done(DecisionDeny, "a hook's updatedInput is invalid: "+err.Error(), pre.source, nil), nil
		}
	}
	d, reason, source, rule := g.decideRules(ctx, call, pre, v)
	if d == DecisionAsk {
		d, reason, source, rule = g.resolveAsk(ctx, call, reason, source, rule, v)
	}
	return done(d, reason, source, rule), nil
}

// decideRules runs steps 2 to 9 on the (possibly rewritten) input.
func (g *Gate) decideRules(ctx context.Context, call *Call, pre *hookOutcome, v *Verdict) (Decision, string, string, *Rule) {
	trail := func(s string, a ...any) { v.Trail = append(v.Trail, fmt.Sprintf(s, a...)) }
	var pc *ParsedCommand
	if call.Tool == "Bash" {
		pc = g.split(call.command())
	}
	sandboxed := g.willSandbox(call, pc)
	v.Sandboxed = sandboxed
	autoAllow := sandboxed && g.settings.Perm.AutoAllowBashIfSandboxed.Or(true) && g.Mode != ModePlan

	// 2. Deny rules, any level, any subcommand.
	for _, r := range g.rules {
		if r.Behavior == BehaviorDeny && r.MatchTool(call.Tool) && g.ruleMatchesAny(r, call, pc) {
			trail("deny rule %s matches", r.Raw)
			return DecisionDeny, "denied by rule " + r.Raw, "", r
		}
	}
	// Read deny rules also cover Edit and Write on the path (spec §1.7),
	// and Bash reads/redirects are checked as Read/Edit.
	if r := g.pathRuleHit(BehaviorDeny, call, pc); r != nil {
		trail("deny rule %s matches a path of the call", r.Raw)
		return DecisionDeny, "denied by rule " + r.Raw, "", r
	}
	// 3. Ask rules. A bare Bash ask rule is skipped for a sandboxed command
	// that auto-allow would approve.
	for _, r := range g.rules {
		if r.Behavior != BehaviorAsk || !r.MatchTool(call.Tool) {
			continue
		}
		if call.Tool == "Bash" && !r.HasSpec && r.Param == "" && autoAllow {
			trail("bare ask rule %s skipped: the command runs sandboxed", r.Raw)
			continue
		}
		if g.ruleMatchesAny(r, call, pc) {
			trail("ask rule %s matches", r.Raw)
			return DecisionAsk, "rule " + r.Raw + " asks for approval", "", r
		}
	}
	if r := g.pathRuleHit(BehaviorAsk, call, pc); r != nil {
		trail("ask rule %s matches a path of the call", r.Raw)
		return DecisionAsk, "rule " + r.Raw + " asks for approval", "", r
	}
	if r := g.stdinRuleHit(call, pc); r != nil {
		trail("%s rule %s could match once xargs adds the words of its input", r.Behavior, r.Raw)
		return DecisionAsk, "rule " + r.Raw + " could match the command once xargs adds the words of its input; it needs approval", "", r
	}
	// 4. Safety checks no allow rule or hook allow can pass.
	if pc != nil {
		if why := g.criticalRemove(pc); why != "" {
			trail("critical path removal: %s", why)
			return DecisionAsk, "removing a critical path (" + why + ") always needs approval", "safety: critical path", nil
		}
	}
	if g.Mode != ModeBypass {
		writes, unknown := g.writePaths(call, pc)
		for _, p := range writes {
			if why := protectedPath(p, g.Cwd, g.Home); why != "" {
				trail("write to protected path %s (%s)", p, why)
				return DecisionAsk, fmt.Sprintf("writing %s (%s) always needs approval", p, why), "safety: protected path", nil
			}
		}
		if unknown && !sandboxed {
			trail("a file read or written is known only when the command runs")
			return DecisionAsk, "a file the command reads or writes is known only when it runs (a variable, a substitution, or a cd to one); it needs approval", "safety: dynamic path", nil
		}
	}
	if call.Tool == "AskUserQuestion" {
		return DecisionAsk, "the question needs the user", "safety: user interaction", nil
	}
	// 5. A hook's allow or ask.
	switch pre.decision {
	case DecisionAllow:
		trail("PreToolUse hook allowed")
		return DecisionAllow, pre.reason, pre.source, nil
	case DecisionAsk:
		trail("PreToolUse hook asked")
		return DecisionAsk, pre.reason, pre.source, nil
	}
	// What cannot be parsed, or is too long to, only a hook or the user
	// may allow.
	if pc != nil && pc.Unparseable {
		trail("the command %s", pc.Reason)
		return DecisionAsk, "the command " + pc.Reason + ": it needs approval", "safety: unparseable command", nil
	}
	// 6. bypassPermissions.
	if g.Mode == ModeBypass {
		trail("bypassPermissions mode")
		return DecisionAllow, "bypassPermissions mode", "mode: bypassPermissions", nil
	}
	// 7. Sandbox auto-allow.
	if call.Tool == "Bash" && autoAllow {
		trail("runs sandboxed; sandbox.autoAllowBashIfSandboxed")
		return DecisionAllow, "runs in the sandbox (sandbox.autoAllowBashIfSandboxed)", "sandbox auto-allow", nil
	}
	// 8. Allow rules.
	if r, ok := g.allowed(call, pc, v); ok {
		if r != nil {
			trail("allow rule %s matches", r.Raw)
			return DecisionAllow, "allowed by rule " + r.Raw, "", r
		}
		trail("every command is read-only or allowed")
		return DecisionAllow, "read-only or allowed commands", "read-only commands", nil
	}
	// 9. The mode's baseline.
	return g.modeBaseline(ctx, call, pc, v)
}

// resolveAsk turns an ask into a final answer where it can: dontAsk denies,
// PermissionRequest hooks may answer, a session that cannot prompt denies.
func (g *Gate) resolveAsk(ctx context.Context, call *Call, reason, source string, rule *Rule, v *Verdict) (Decision, string, string, *Rule) {
	trail := func(s string, a ...any) { v.Trail = append(v.Trail, fmt.Sprintf(s, a...)) }
	if g.Mode == ModeDontAsk {
		trail("dontAsk mode denies what would prompt")
		return DecisionDeny, reason + "; dontAsk mode denies instead of asking", source, rule
	}
	req := g.runHooks(ctx, "PermissionRequest", call)
	v.Warnings = append(v.Warnings, req.warnings...)
	switch req.decision {
	case DecisionDeny:
		trail("PermissionRequest hook denied")
		return DecisionDeny, req.reason, req.source, nil
	case DecisionAllow:
		if len(req.updatedInput) > 0 {
			// The rewritten input is checked against deny and ask rules again.
			call.Input = req.updatedInput
			if err := call.parse(); err != nil || ValidateInput(call.Tool, call.Input) != nil {
				return DecisionDeny, "a PermissionRequest hook's updatedInput is invalid", req.source, nil
			}
			var pc *ParsedCommand
			if call.Tool == "Bash" {
				pc = g.split(call.command())
			}
			for _, r := range g.rules {
				if r.Behavior != BehaviorAllow && r.MatchTool(call.Tool) && g.ruleMatchesAny(r, call, pc) {
					trail("rewritten input matches %s rule %s", r.Behavior, r.Raw)
					if r.Behavior == BehaviorDeny {
						return DecisionDeny, "denied by rule " + r.Raw, "", r
					}
					return DecisionAsk, "rule " + r.Raw + " asks for approval", "", r
				}
			}
		}
		trail("PermissionRequest hook allowed")
		return DecisionAllow, req.reason, req.source, nil
	}
	if !g.Interactive && prompterFrom(ctx) == nil {
		trail("no one can approve in this session")
		return DecisionDeny, reason + "; approval was needed and this session cannot prompt", source, rule
	}
	return DecisionAsk, reason, source, rule
}

// willSandbox reports whether a Bash call would run in the sandbox.
func (g *Gate) willSandbox(call *Call, pc *ParsedCommand) bool {
	if call.Tool != "Bash" || !g.settings.Enabled.Or(true) || !g.SandboxAvailable {
		return false
	}
	unsandboxedOK := g.settings.AllowUnsandboxedCommands.Or(false)
	if unsandboxedOK {
		if b, _ := call.m["dangerouslyDisableSandbox"].(bool); b {
			return false
		}
		if pc != nil {
			for _, sc := range pc.Commands {
				for _, ex := range g.excluded {
					if ex.MatchString(sc.Text) {
						return false
					}
				}
			}
		}
	}
	return true
}

// ruleMatchesAny reports whether a deny or ask rule matches the call: for
// Bash, any subcommand (nested ones too); an unparseable command is matched
// as a whole.
func (g *Gate) ruleMatchesAny(r *Rule, call *Call, pc *ParsedCommand) bool {
	if r.Param != "" {
		return paramMatches(r, call)
	}
	if call.Tool == "Bash" && r.bashRe != nil {
		if pc.Unparseable && r.bashRe.MatchString(strings.TrimSpace(call.command())) {
			return true
		}
		for _, p := range pc.Pieces {
			if r.matchBash(p) {
				return true
			}
		}
		for _, sc := range pc.Commands {
			if sc.Text != "" && (r.matchBash(sc.Text) || r.matchBash(sc.Norm) || r.matchDynamicName(&sc) || r.matchGitForm(&sc)) {
				return true
			}
		}
		return false
	}
	return g.ruleMatches(r, call)
}

// ruleMatches matches a rule against a non-Bash call (or a Bash rule
// without a pattern).
func (g *Gate) ruleMatches(r *Rule, call *Call) bool {
	if r.Param != "" {
		return paramMatches(r, call)
	}
	if !r.HasSpec {
		return true
	}
	switch {
	case r.bashRe != nil:
		return g.ruleMatchesAny(r, call, g.split(call.command()))
	case r.pathRule != nil:
		for _, p := range g.callPaths(call) {
			if g.pathMatches(r, p, r.Behavior) {
				return true
			}
		}
		return false
	case r.domain != "":
		h, ok := webHost(call.str("url"))
		if !ok {
			// A host that cannot be read: a deny or ask rule cannot be
			// ruled out.
			return r.Behavior != BehaviorAllow
		}
		return netrules.MatchHost(r.domain, h)
	case r.Tool == "Agent":
		ok, _ := path.Match(r.Spec, call.str("subagent_type"))
		return ok
	case r.Tool == "Skill":
		re, _ := bashPattern(r.Spec, false)
		return re.MatchString(call.str("skill"))
	}
	return false
}

// webHost reads a URL's host the way browsers and HTTP clients do:
// percent-escapes decoded, the full-width dots IDNA maps to "." mapped,
// case and a trailing dot normalised.
func webHost(raw string) (string, bool) {
	rest := raw
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if i := strings.IndexAny(rest, "/?#\\"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	host, err := url.PathUnescape(rest)
	if err != nil {
		return "", false
	}
	if !strings.HasPrefix(host, "[") {
		if i := strings.LastIndexByte(host, ':'); i >= 0 {
			host = host[:i]
		}
	}
	host = strings.NewReplacer("\u3002", ".", "\uff0e", ".", "\uff61", ".").Replace(host)
	h, err := netrules.NormalizeHost(host)
	if err != nil || h.String() == "" {
		return "", false
	}
	return h.String(), true
}

func paramMatches(r *Rule, call *Call) bool {
	val, ok := call.m[r.Param]
	if !ok {
		return false
	}
	var s string
	switch x := val.(type) {
	case string:
		s = x
	case bool:
		s = fmt.Sprint(x)
	case json.Number:
		s = x.String()
	default:
		return false
	}
	ok, _ = path.Match(r.ParamValue, s)
	return ok || r.ParamValue == "*"
}

// callPaths are the absolute paths a file tool touches.
func (g *Gate) callPaths(call *Call) []string {
	var out []string
	for _, k := range []string{"file_path", "notebook_path", "path"} {
		if p := call.str(k); p != "" {
			out = append(out, g.abs(p))
		}
	}
	return out
}

func (g *Gate) abs(p string) string {
	switch {
	case p == "~":
		return g.Home
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(g.Home, p[2:])
	case !filepath.IsAbs(p):
		return filepath.Join(g.Cwd, p)
	}
	return filepath.Clean(p)
}

// pathMatches applies the symlink rule: deny and ask match the link or its
// target, allow needs both.
func (g *Gate) pathMatches(r *Rule, p string, b Behavior) bool {
	m := r.pathRule.matchPath(p, "", g.Cwd)
	target, err := filepath.EvalSymlinks(p)
	if err != nil || target == p {
		return m
	}
	mt := r.pathRule.matchPath(target, "", g.Cwd)
	if b == BehaviorAllow {
		return m && mt
	}
	return m || mt
}

// readPaths and writePaths list the files a call reads or writes, for the
// Read/Edit rules, Bash file commands and redirections included; unknown
// reports a Bash path that cannot be known before the command runs.
func (g *Gate) readPaths(call *Call, pc *ParsedCommand) []string {
	switch call.Tool {
	case "Read", "Glob", "Grep":
		return g.callPaths(call)
	case "Bash":
		var out []string
		for i := range pc.Commands {
			out = append(out, g.commandPaths(&pc.Commands[i]).reads...)
		}
		return out
	}
	return nil
}

func (g *Gate) writePaths(call *Call, pc *ParsedCommand) (paths []string, unknown bool) {
	switch call.Tool {
	case "Edit", "Write", "MultiEdit", "NotebookEdit":
		return g.callPaths(call), false
	case "Bash":
		for i := range pc.Commands {
			bp := g.commandPaths(&pc.Commands[i])
			paths = append(paths, bp.writes...)
			unknown = unknown || bp.unknown
		}
	}
	return paths, unknown
}

// pathRuleHit finds a Read or Edit rule of behavior b that matches a path
// the call reads or writes (Read rules cover writes too, but not
// NotebookEdit).
func (g *Gate) pathRuleHit(b Behavior, call *Call, pc *ParsedCommand) *Rule {
	if call.Tool != "Bash" && call.Tool != "Edit" && call.Tool != "Write" && call.Tool != "MultiEdit" {
		return nil // the direct file tools were matched by MatchTool above
	}
	if !slices.ContainsFunc(g.rules, func(r *Rule) bool { return r.Behavior == b && r.pathRule != nil }) {
		return nil // no path to find
	}
	reads := g.readPaths(call, pc)
	writes, _ := g.writePaths(call, pc)
	for _, r := range g.rules {
		if r.Behavior != b || r.pathRule == nil {
			continue
		}
		var paths []string
		switch r.Tool {
		case "Read":
			paths = append(append(paths, reads...), writes...)
		case "Edit":
			if call.Tool != "Bash" {
				continue // matched through MatchTool already
			}
			paths = writes
		}
		for _, p := range paths {
			if g.pathMatches(r, p, b) {
				return r
			}
		}
	}
	return nil
}

// stdinRuleHit finds a Bash deny or ask rule that a command taking more
// words from its input could match once they are added: xargs git, with
// Bash(git push:*) denied, runs git push when its input says push.
func (g *Gate) stdinRuleHit(call *Call, pc *ParsedCommand) *Rule {
	if call.Tool != "Bash" || pc == nil {
		return nil
	}
	for _, sc := range pc.Commands {
		if !sc.FromStdin || sc.Norm == "" {
			continue
		}
		// xargs env, xargs sudo, xargs bash -c: the program or the code
		// itself comes from the input.
		program := stdinProgram(&sc)
		for _, r := range g.rules {
			if (r.Behavior == BehaviorDeny || r.Behavior == BehaviorAsk) && r.bashRe != nil && (program || strings.HasPrefix(r.bashPrefix, sc.Norm+" ")) {
				return r
			}
		}
	}
	return nil
}

// stdinProgram reports whether a command given more words by xargs takes
// its program or its code from them: a wrapper with nothing to run, eval,
// or a shell with no operand.
func stdinProgram(sc *SimpleCommand) bool {
	name, _ := progName(sc.Args[0])
	_, wrapper := wrappers[name]
	if wrapper || name == "eval" {
		return true
	}
	return slices.Contains(shells, name) && !slices.ContainsFunc(sc.Args[1:], func(a string) bool { return !strings.HasPrefix(a, "-") })
}

// split parses a Bash command as it runs in the gate's working directory.
func (g *Gate) split(cmd string) *ParsedCommand { return SplitCommandAt(cmd, g.Cwd, g.Home) }

// inWorkDirs reports whether p lies in the working directories.
func (g *Gate) inWorkDirs(p string) bool {
	for _, d := range g.workDirs {
		if fsrules.Within(p, d) {
			return true
		}
	}
	return false
}
