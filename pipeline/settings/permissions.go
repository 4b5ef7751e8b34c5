package settings

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// PermRule is one permission rule as written in a settings file.
type PermRule struct {
	Rule     string
	Behavior string // "allow", "ask" or "deny"
	File     *File
	Index    int // position in its list
	Pos      Pos
}

// Where names the rule's file, list and index, for errors and `sbx check`.
func (r PermRule) Where() string {
	if r.File == nil {
		return "permissions." + r.Behavior
	}
	return fmt.Sprintf("%s:%s (permissions.%s[%d])", r.File.Path, r.Pos, r.Behavior, r.Index)
}

// HookHandler is one hook command.
type HookHandler struct {
	Type    string
	Command string
	Args    []string
	If      string
	Timeout float64 // seconds; 0 means the default
	File    *File
}

// HookGroup is one matcher group of one event.
type HookGroup struct {
	Event    string
	Matcher  string
	Handlers []HookHandler
	File     *File
}

// Permissions holds what the permission gate reads from settings.
type Permissions struct {
	Rules                 []PermRule
	DefaultMode           String
	AdditionalDirectories []Entry
	DisableBypassMode     bool // permissions.disableBypassPermissionsMode = "disable"
	Hooks                 []HookGroup
	DisableAllHooks       Bool
	// Sandbox keys the gate uses.
	AutoAllowBashIfSandboxed Bool
	ExcludedCommands         []Entry
	// HooksFailClosed is the sbx extension sbx.hooks.failClosed.
	HooksFailClosed Bool
}

// permEvents are the hook events the gate runs.
var permEvents = []string{"PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure"}

// hookEvents are Claude Code's hook events. An unknown event named like
// one of them is an error (a misspelt PreToolUse would silently never
// run); another unknown name warns.
var hookEvents = append([]string{"Notification", "UserPromptSubmit", "Stop", "SubagentStart", "SubagentStop",
	"PreCompact", "PostCompact", "SessionStart", "SessionEnd", "PermissionDenied", "TeammateIdle", "TaskCompleted",
	"ConfigChange", "WorktreeCreate", "WorktreeRemove", "InstructionsLoaded", "Elicitation", "ElicitationResult"}, permEvents...)

// permissionKeys are the keys of the permissions object.
var permissionKeys = []string{"allow", "ask", "deny", "additionalDirectories", "defaultMode", "disableBypassPermissionsMode", "disableAutoMode"}

// hookTypes are the handler types Claude Code knows.
var hookTypes = []string{"command", "http", "mcp_tool", "prompt", "agent"}

// validatePermissions checks the permissions and hooks objects: types,
// and every key, event and handler type known (an unknown one is an error
// naming the closest known, or, for a hook event unlike any, a warning).
func (s *Settings) validatePermissions(f *File) error {
	if p := lookup(f.Root, "permissions"); p != nil {
		for _, k := range p.Keys {
			if err := validatePermissionKey(f, k, p.Fields[k]); err != nil {
				return err
			}
		}
	}
	h := lookup(f.Root, "hooks")
	if h == nil {
		return nil
	}
	for _, ev := range h.Keys {
		if !slices.Contains(hookEvents, ev) {
			if sug := Suggest(ev, hookEvents); sug != "" {
				return &Error{File: f.Path, Pos: h.Fields[ev].Pos, Key: "hooks." + ev, Msg: "unknown hook event (did you mean " + sug + "?); its hooks would never run"}
			}
			s.Warnings = append(s.Warnings, Warning{File: f.Path, Pos: h.Fields[ev].Pos, Key: "hooks." + ev, Msg: "unknown hook event; its hooks are not run"})
		}
		if err := validateHookGroups(f, ev, h.Fields[ev]); err != nil {
			return err
		}
	}
	return nil
}

func validatePermissionKey(f *File, k string, v *Node) error {
	key := "permissions." + k
	switch k {
	case "allow", "ask", "deny", "additionalDirectories":
		if v.Kind != KindArray {
			return &Error{File: f.Path, Pos: v.Pos, Key: key, Msg: "expected array of strings, got " + v.Kind.String()}
		}
		for i, e := range v.Elems {
			if e.Kind != KindString {
				return &Error{File: f.Path, Pos: e.Pos, Key: fmt.Sprintf("%s[%d]", key, i), Msg: "expected string, got " + e.Kind.String()}
			}
		}
	case "defaultMode", "disableBypassPermissionsMode", "disableAutoMode":
		if v.Kind != KindString {
			return &Error{File: f.Path, Pos: v.Pos, Key: key, Msg: "expected string, got " + v.Kind.String()}
		}
	default:
		return &Error{File: f.Path, Pos: v.Pos, Key: key, Msg: "unknown key" + didYouMean(k, permissionKeys) + "; sbx refuses keys it does not understand in permissions"}
	}
	return nil
}

// validateHookGroups checks one event's matcher groups and handlers.
func validateHookGroups(f *File, ev string, groups *Node) error {
	if groups.Kind != KindArray {
		return &Error{File: f.Path, Pos: groups.Pos, Key: "hooks." + ev, Msg: "expected array of matcher groups"}
	}
	for gi, g := range groups.Elems {
		key := fmt.Sprintf("hooks.%s[%d]", ev, gi)
		if g.Kind != KindObject {
			return &Error{File: f.Path, Pos: g.Pos, Key: key, Msg: "expected object"}
		}
		if m := g.Fields["matcher"]; m != nil {
			if m.Kind != KindString {
				return &Error{File: f.Path, Pos: m.Pos, Key: key + ".matcher", Msg: "expected string"}
			}
			if err := checkMatcher(m.Str); err != nil {
				return &Error{File: f.Path, Pos: m.Pos, Key: key + ".matcher", Msg: "not a valid regular expression: " + err.Error()}
			}
		}
		hs := g.Fields["hooks"]
		if hs == nil || hs.Kind != KindArray {
			return &Error{File: f.Path, Pos: g.Pos, Key: key + ".hooks", Msg: "expected array of hook handlers"}
		}
		for hi, hh := range hs.Elems {
			if err := validateHandler(f, fmt.Sprintf("%s.hooks[%d]", key, hi), hh); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateHandler(f *File, hkey string, hh *Node) error {
	if hh.Kind != KindObject {
		return &Error{File: f.Path, Pos: hh.Pos, Key: hkey, Msg: "expected object"}
	}
	for _, sk := range []string{"type", "command", "if"} {
		if v := hh.Fields[sk]; v != nil && v.Kind != KindString {
			return &Error{File: f.Path, Pos: v.Pos, Key: hkey + "." + sk, Msg: "expected string"}
		}
	}
	if v := hh.Fields["type"]; v != nil && !slices.Contains(hookTypes, v.Str) {
		return &Error{File: f.Path, Pos: v.Pos, Key: hkey + ".type", Msg: fmt.Sprintf("unknown hook type %q%s; one of command, http, mcp_tool, prompt, agent", v.Str, didYouMean(v.Str, hookTypes))}
	}
	if v := hh.Fields["timeout"]; v != nil && v.Kind != KindNumber {
		return &Error{File: f.Path, Pos: v.Pos, Key: hkey + ".timeout", Msg: "expected number (seconds)"}
	}
	return nil
}

// checkMatcher compiles a matcher that is not a plain name list as a
// regular expression (Claude Code uses JavaScript's; Go's is close enough
// to catch a broken one).
func checkMatcher(m string) error {
	for _, c := range m {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("_- ,|", c)) {
			_, err := regexp.Compile(m)
			return err
		}
	}
	return nil
}

// applyPermissions merges one file's permissions and hooks.
func (s *Settings) applyPermissions(f *File) {
	p := &s.Perm
	untrusted := f.Level.IsProject() && !s.Trusted
	if perm := lookup(f.Root, "permissions"); perm != nil {
		for _, behavior := range []string{"deny", "ask", "allow"} {
			list := perm.Fields[behavior]
			if list == nil {
				continue
			}
			if behavior == "allow" && untrusted && len(list.Elems) > 0 {
				s.Warnings = append(s.Warnings, Warning{File: f.Path, Pos: list.Pos, Key: "permissions.allow",
					Msg: "allow rules from an untrusted project file are not used (trust the project with --trust-project)"})
				continue
			}
			for i, e := range list.Elems {
				p.Rules = append(p.Rules, PermRule{Rule: e.Str, Behavior: behavior, File: f, Index: i, Pos: e.Pos})
			}
		}
		if v := perm.Fields["defaultMode"]; v != nil {
			if untrusted && v.Str == "bypassPermissions" || (v.Str == "auto" && f.Level.IsProject()) {
				s.Warnings = append(s.Warnings, Warning{File: f.Path, Pos: v.Pos, Key: "permissions.defaultMode", Msg: v.Str + " is not taken from a project file, ignored"})
			} else {
				p.DefaultMode = String{V: v.Str, Set: true, File: f}
			}
		}
		if v := perm.Fields["additionalDirectories"]; v != nil {
			if untrusted && len(v.Elems) > 0 {
				s.Warnings = append(s.Warnings, Warning{File: f.Path, Pos: v.Pos, Key: "permissions.additionalDirectories", Msg: "not used from an untrusted project file"})
			} else {
				for _, e := range v.Elems {
					p.AdditionalDirectories = append(p.AdditionalDirectories, Entry{Value: e.Str, File: f, Pos: e.Pos})
				}
			}
		}
		if v := perm.Fields["disableBypassPermissionsMode"]; v != nil && v.Str == "disable" {
			p.DisableBypassMode = true
		}
	}
	if v := lookup(f.Root, "disableAllHooks"); v != nil && v.Kind == KindBool {
		p.DisableAllHooks = Bool{V: v.Bool, Set: true, File: f}
	}
	if v := lookup(f.Root, "sandbox.autoAllowBashIfSandboxed"); v != nil && v.Kind == KindBool {
		if !(untrusted && v.Bool) {
			p.AutoAllowBashIfSandboxed = Bool{V: v.Bool, Set: true, File: f}
		}
	}
	if v := lookup(f.Root, "sandbox.excludedCommands"); v != nil && v.Kind == KindArray && !untrusted {
		for _, e := range v.Elems {
			p.ExcludedCommands = append(p.ExcludedCommands, Entry{Value: e.Str, File: f, Pos: e.Pos})
		}
	}
	// false from an untrusted project file would turn the user's
	// fail-closed hooks open: dropped with a warning (honoured).
	if v := lookup(f.Root, "sbx.hooks.failClosed"); s.honoured(f, "sbx.hooks.failClosed", v) {
		p.HooksFailClosed = Bool{V: v.Bool, Set: true, File: f}
	}
	h := lookup(f.Root, "hooks")
	if h == nil {
		return
	}
	if untrusted && len(h.Keys) > 0 {
		// A hook is a command sbx runs on the host, outside the sandbox.
		s.Warnings = append(s.Warnings, Warning{File: f.Path, Pos: h.Pos, Key: "hooks",
			Msg: "hooks from an untrusted project file are not run (they would run outside the sandbox); trust the project with --trust-project"})
		return
	}
	for _, ev := range h.Keys {
		if !slices.Contains(permEvents, ev) {
			continue // other events belong to an agent's UI, not to the gate
		}
		for _, g := range h.Fields[ev].Elems {
			grp := HookGroup{Event: ev, File: f}
			if m := g.Fields["matcher"]; m != nil {
				grp.Matcher = m.Str
			}
			for _, hh := range g.Fields["hooks"].Elems {
				hd := HookHandler{File: f, Type: "command"}
				if v := hh.Fields["type"]; v != nil {
					hd.Type = v.Str
				}
				if v := hh.Fields["command"]; v != nil {
					hd.Command = v.Str
				}
				if v := hh.Fields["if"]; v != nil {
					hd.If = v.Str
				}
				if v := hh.Fields["timeout"]; v != nil {
					fmt.Sscan(v.Number.String(), &hd.Timeout)
				}
				if v := hh.Fields["args"]; v != nil && v.Kind == KindArray {
					for _, a := range v.Elems {
						hd.Args = append(hd.Args, a.Str)
					}
				}
				grp.Handlers = append(grp.Handlers, hd)
			}
			p.Hooks = append(p.Hooks, grp)
		}
	}
}

// finishPermissions applies the managed-only locks.
func (s *Settings) finishPermissions() {
	p := &s.Perm
	managedOnly := func(key string) bool {
		for _, f := range s.Files {
			if f.Level == LevelManaged {
				if v := lookup(f.Root, key); v != nil && v.Kind == KindBool && v.Bool {
					return true
				}
			}
		}
		return false
	}
	if managedOnly("allowManagedPermissionRulesOnly") {
		p.Rules = slices.DeleteFunc(p.Rules, func(r PermRule) bool { return r.File.Level != LevelManaged })
	}
	if managedOnly("allowManagedHooksOnly") {
		p.Hooks = slices.DeleteFunc(p.Hooks, func(g HookGroup) bool { return g.File.Level != LevelManaged })
	}
	if p.DisableAllHooks.Or(false) && p.DisableAllHooks.File.Level != LevelManaged {
		// A user or project disableAllHooks cannot disable managed hooks.
		p.Hooks = slices.DeleteFunc(p.Hooks, func(g HookGroup) bool { return g.File.Level != LevelManaged })
	} else if p.DisableAllHooks.Or(false) {
		p.Hooks = nil
	}
}

// HasRule reports whether a rule text appears with a behavior (tests).
func (p *Permissions) HasRule(behavior, rule string) bool {
	return slices.ContainsFunc(p.Rules, func(r PermRule) bool {
		return r.Behavior == behavior && strings.TrimSpace(r.Rule) == rule
	})
}

// SplitRule splits a permission rule into its tool name and specifier:
// "Tool" or "Tool(specifier)". It is the only parser of the rule grammar;
// the gate, the sandbox compiler and the settings loader all call it.
// Surrounding space is trimmed; the specifier is returned as written.
func SplitRule(raw string) (tool, spec string, hasSpec bool, err error) {
	raw = strings.TrimSpace(raw)
	i := strings.IndexByte(raw, '(')
	if i < 0 {
		tool = raw
	} else {
		if !strings.HasSuffix(raw, ")") {
			return "", "", false, fmt.Errorf("missing closing parenthesis")
		}
		tool, spec, hasSpec = raw[:i], raw[i+1:len(raw)-1], true
	}
	if tool == "" || strings.ContainsAny(tool, " ()") {
		return "", "", false, fmt.Errorf("bad tool name")
	}
	return tool, spec, hasSpec, nil
}
