package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// readOnlyCommands run without a prompt in every mode (spec §1.5) when
// they write no file.
var readOnlyCommands = []string{"ls", "cat", "echo", "pwd", "head", "tail", "grep", "egrep", "fgrep", "rg", "find",
	"wc", "which", "diff", "stat", "du", "df", "cd", "file", "tree", "whoami", "id", "date", "uname", "printf",
	"true", "false", "test", "[", "realpath", "basename", "dirname", "uniq", "cut", "type", "env", "printenv", "less", "more", "nl", "cmp",
	"nproc", "seq", "tr", "readlink", "md5sum", "sha1sum", "sha256sum", "sha512sum", "base64", "tac", "od", "hexdump", "comm", "paste"}

// readOnlyCommandSet is readOnlyCommands for lookups (read only).
var readOnlyCommandSet = func() map[string]bool {
	m := make(map[string]bool, len(readOnlyCommands))
	for _, c := range readOnlyCommands {
		m[c] = true
	}
	return m
}()

// readOnlyGit are git subcommands that change nothing.
var readOnlyGit = []string{"status", "log", "diff", "show", "rev-parse", "ls-files", "describe", "blame", "grep",
	"shortlog", "ls-tree", "cat-file", "merge-base", "reflog"}

// isReadOnly reports whether a simple command is in the built-in
// read-only set: a known program (by name, or by its path in a system
// directory), no assignment that changes what runs, no arguments from
// stdin, no file written, and none of the flags that make it run code or
// write.
func (g *Gate) isReadOnly(sc SimpleCommand) bool {
	if len(sc.Args) == 0 || sc.Args[0] == "" || sc.ExecWrapper || sc.DynamicName || sc.UnsafeEnv || sc.FromStdin || sc.Privileged || sc.Arith || sc.Unseen != "" {
		return false
	}
	if sc.Linked && len(sc.Args) > 1 {
		return false // an operand may go through a link made earlier in the string
	}
	for _, rd := range sc.Redirects {
		if rd.Output && rd.Path != "/dev/null" {
			return false
		}
	}
	name, system := progName(sc.Args[0])
	if !system {
		return false
	}
	args := sc.Args[1:]
	if slices.ContainsFunc(args, func(a string) bool { return a == "" }) && name != "echo" && name != "printf" {
		return false // a dynamic argument: a path, or an option
	}
	if bad, ok := dangerousFlags[name]; ok && slices.ContainsFunc(args, func(a string) bool {
		return slices.ContainsFunc(bad, func(f string) bool {
			// A long option may be abbreviated (getopt_long, git's parser).
			long, _, _ := strings.Cut(a, "=")
			return a == f || strings.HasPrefix(a, f+"=") || (len(f) == 2 && f[0] == '-' && strings.HasPrefix(a, f) && !strings.HasPrefix(a, "--")) ||
				strings.HasPrefix(f, "--") && strings.HasPrefix(long, "--") && len(long) >= 4 && strings.HasPrefix(f, long)
		})
	}) {
		return false
	}
	switch name {
	case "find":
		return !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "-fprint") || a == "-fls" })
	case "file":
		return !slices.Contains(args, "-m") && !slices.Contains(args, "-f")
	case "env", "printenv":
		return len(args) == 0 || name == "printenv"
	case "uniq":
		ops, _ := operands(sc.Words[1:])
		return len(ops) < 2 // uniq IN OUT writes OUT
	case "git":
		return g.readOnlyGit(sc, args)
	}
	return readOnlyCommandSet[name]
}

// dangerousFlags make an otherwise read-only command run a program or
// write a file.
var dangerousFlags = map[string][]string{
	"rg":   {"--pre", "--pre-glob", "--search-zip", "-z"},
	"grep": {"--include-from"},
	"tree": {"-o"},
	"date": {"-s", "--set"},
	"less": {"-o", "--log-file", "-O", "--LOG-FILE", "-k", "--lesskey-file", "--lesskey-src", "--lesskey-content"},
	"diff": {"--to-file"},
	"sort": {"-o", "--output", "--compress-program"},
	"git":  {"--output", "-O", "--open-files-in-pager", "--ext-diff", "--textconv", "--filters", "-c", "--config-env", "--exec-path", "-C", "--git-dir", "--work-tree"},
}

// readOnlyGit: a git subcommand that changes nothing, run in the working
// directories (git in another directory reads that repository's config,
// which can run programs).
func (g *Gate) readOnlyGit(sc SimpleCommand, rest []string) bool {
	for _, d := range sc.Dirs {
		if d == "" || !g.inWorkDirs(d) {
			return false
		}
	}
	if len(rest) == 0 {
		return false
	}
	sub := rest[0]
	switch sub {
	case "branch", "tag", "remote", "stash":
		// Listing forms only.
		for _, a := range rest[1:] {
			if !strings.HasPrefix(a, "-") || !slices.Contains([]string{"-a", "-r", "-v", "-vv", "--list", "-l", "--all"}, a) {
				return sub == "stash" && a == "list"
			}
		}
		return sub != "stash" || len(rest) > 1
	case "config":
		return len(rest) > 1 && (rest[1] == "--get" || rest[1] == "--list" || rest[1] == "-l" || rest[1] == "--get-all")
	case "reflog":
		// show (the default, also with a ref), list and exists; expire,
		// delete and drop remove the entries that recover lost commits.
		return len(rest) == 1 || !slices.Contains([]string{"expire", "delete", "drop"}, rest[1])
	}
	return slices.Contains(readOnlyGit, sub)
}

// allowed is step 8: every subcommand covered by an allow rule or the
// read-only set, the command fully parsed and not too long; a redirect
// target needs its own approval (a Bash allow rule allows the command, not
// the file). For other tools, an allow rule matches the call.
func (g *Gate) allowed(call *Call, pc *ParsedCommand, v *Verdict) (*Rule, bool) {
	if call.Tool != "Bash" {
		for _, r := range g.rules {
			if r.Behavior == BehaviorAllow && r.MatchTool(call.Tool) && g.ruleMatches(r, call) {
				return r, true
			}
		}
		// An Edit allow also grants reading the path.
		if call.Tool == "Read" || call.Tool == "Glob" || call.Tool == "Grep" {
			for _, r := range g.rules {
				if r.Behavior == BehaviorAllow && r.Tool == "Edit" && g.ruleMatches(r, call) {
					return r, true
				}
			}
		}
		return nil, false
	}
	if pc.Unparseable {
		v.Trail = append(v.Trail, "command "+pc.Reason+": no rule may allow it")
		return nil, false
	}
	var last *Rule
	for i := range pc.Commands {
		sc := &pc.Commands[i]
		if sc.Text == "" && len(sc.Redirects) == 0 {
			continue
		}
		covered := sc.Text == "" || g.isReadOnly(*sc)
		if !covered && g.needsEyes(sc) {
			why := "its program or a file it reads or writes is known only when it runs"
			if sc.Unseen != "" {
				why = sc.Unseen
			}
			v.Trail = append(v.Trail, "no allow rule can vouch for "+sc.Text+": "+why)
			return nil, false
		}
		if !covered {
			for _, r := range g.bashAllow {
				if !r.HasSpec && r.Param == "" {
					covered, last = true, r
					break
				}
				if r.bashRe == nil || (sc.ExecWrapper && !r.bashExact) {
					continue
				}
				if r.matchBash(sc.AllowText) {
					covered, last = true, r
					break
				}
			}
		}
		if !covered {
			return nil, false
		}
		for _, rd := range sc.Redirects {
			if !rd.Output || rd.Path == "/dev/null" {
				continue
			}
			paths, ok := g.resolveWord(sc, rd.Word)
			if !ok || rd.Path == "" || rd.Word.Glob {
				return nil, false // a target that cannot be read statically
			}
			for _, p := range paths {
				if !g.editAllowed(p) {
					return nil, false
				}
			}
		}
	}
	return last, true
}

// needsEyes reports whether an allow rule must not vouch for a command:
// its program is computed at run time, or a file it reads or writes is, or
// it is arithmetic that can run code, or it runs what no rule sees
// (Unseen).
func (g *Gate) needsEyes(sc *SimpleCommand) bool {
	return sc.DynamicName || sc.Arith || sc.Unseen != "" || g.commandPaths(sc).unknown
}

// editAllowed reports whether writing p is approved without a prompt: an
// Edit allow rule, or acceptEdits inside the working directories.
func (g *Gate) editAllowed(p string) bool {
	for _, r := range g.rules {
		if r.Behavior == BehaviorAllow && r.Tool == "Edit" && r.pathRule != nil && g.pathMatches(r, p, BehaviorAllow) {
			return true
		}
	}
	return (g.Mode == ModeAcceptEdits) && g.inWorkDirs(p)
}

// acceptEditsCommands are the file commands acceptEdits runs on in-scope
// paths.
var acceptEditsCommands = []string{"mkdir", "touch", "rm", "rmdir", "mv", "cp", "sed"}

// modeBaseline is step 9.
func (g *Gate) modeBaseline(ctx context.Context, call *Call, pc *ParsedCommand, v *Verdict) (Decision, string, string, *Rule) {
	trail := func(s string, a ...any) { v.Trail = append(v.Trail, fmt.Sprintf(s, a...)) }
	mode := "mode: " + string(g.Mode)
	switch call.Tool {
	case "Read", "Glob", "Grep":
		paths := g.callPaths(call)
		if len(paths) == 0 {
			paths = []string{g.Cwd}
		}
		in := true
		for _, p := range paths {
			in = in && g.inWorkDirs(p)
		}
		if in {
			trail("read inside the working directories")
			return DecisionAllow, "reads inside the working directories need no approval", mode, nil
		}
		return DecisionAsk, "reading outside the working directories needs approval", mode, nil
	case "Edit", "Write", "MultiEdit", "NotebookEdit":
		if g.Mode == ModePlan {
			trail("plan mode blocks edits")
			return DecisionDeny, "plan mode: edits are blocked until the plan is approved", mode, nil
		}
		paths := g.callPaths(call)
		if g.Mode == ModeAcceptEdits || g.Mode == ModeAuto {
			in := len(paths) > 0
			for _, p := range paths {
				in = in && g.inWorkDirs(p)
			}
			if in {
				trail("%s: edit inside the working directories", g.Mode)
				return DecisionAllow, "edits inside the working directories are accepted in " + string(g.Mode), mode, nil
			}
		}
		return DecisionAsk, "editing needs approval", mode, nil
	case "Bash":
		if g.Mode == ModeAcceptEdits && !pc.Unparseable && g.inScopeFileCommands(pc) {
			trail("acceptEdits: file commands on in-scope paths")
			return DecisionAllow, "acceptEdits: file commands inside the working directories", mode, nil
		}
	}
	if g.Mode == ModeAuto {
		return g.classify(ctx, call, v)
	}
	return DecisionAsk, call.Tool + " needs approval", mode, nil
}

// inScopeFileCommands reports whether every subcommand is an acceptEdits
// file command (or read-only) whose files, read and written, are all known
// and inside the working directories (a sed script that runs commands is
// not a file command).
func (g *Gate) inScopeFileCommands(pc *ParsedCommand) bool {
	if len(pc.Commands) == 0 {
		return false
	}
	for _, sc := range pc.Commands {
		if g.isReadOnly(sc) {
			continue
		}
		if len(sc.Args) == 0 || sc.Dynamic || sc.DynamicName || sc.UnsafeEnv || sc.Privileged || sc.FromStdin {
			return false
		}
		name, system := progName(sc.Args[0])
		if !system || !slices.Contains(acceptEditsCommands, name) {
			return false
		}
		if name == "sed" && sedMayRunCode(sc.Words[1:]) {
			return false
		}
		bp := g.commandPaths(&sc)
		if bp.unknown || len(bp.writes) == 0 && name != "sed" {
			return false
		}
		for _, p := range append(bp.reads, bp.writes...) {
			if !g.inWorkDirs(p) {
				return false
			}
		}
	}
	return true
}

// classify asks the external classifier in auto mode (PreToolUse hook
// contract); anything but an allow is an ask.
func (g *Gate) classify(ctx context.Context, call *Call, v *Verdict) (Decision, string, string, *Rule) {
	in, _ := json.Marshal(hookInput{SessionID: g.SessionID, Cwd: g.Cwd, PermissionMode: string(g.Mode),
		HookEventName: "PreToolUse", ToolName: call.Tool, ToolInput: call.Input, ToolUseID: call.ID})
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.Classifier[0], g.Classifier[1:]...)
	cmd.Stdin, cmd.Dir = bytes.NewReader(in), g.Cwd
	out, err := cmd.Output()
	src := "auto-mode classifier " + strings.Join(g.Classifier, " ")
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 2 {
			return DecisionDeny, "the classifier blocked the call: " + strings.TrimSpace(string(ee.Stderr)), src, nil
		}
		v.Warnings = append(v.Warnings, src+" failed: "+err.Error())
		return DecisionAsk, "the classifier did not answer", src, nil
	}
	var o hookOutput
	if json.Unmarshal(bytes.TrimSpace(out), &o) == nil && o.HookSpecificOutput != nil {
		switch o.HookSpecificOutput.PermissionDecision {
		case "allow":
			return DecisionAllow, "approved by the classifier", src, nil
		case "deny":
			return DecisionDeny, "blocked by the classifier: " + o.HookSpecificOutput.PermissionDecisionReason, src, nil
		}
	}
	return DecisionAsk, "the classifier asks for approval", src, nil
}

// criticalRemove reports why an rm/rmdir targets a critical path: /, a
// direct child of /, the home directory, a working directory or one of its
// parents, a glob directly under one of those, a path built from a
// variable or substitution, or targets read from stdin (xargs).
func (g *Gate) criticalRemove(pc *ParsedCommand) string {
	for _, sc := range pc.Commands {
		if len(sc.Args) == 0 {
			continue
		}
		if sc.DynamicName {
			for _, w := range sc.Words[1:] {
				if w.Values[0] == "-rf" || w.Values[0] == "-fr" || w.Values[0] == "-r" || w.Values[0] == "--recursive" {
					return "a recursive removal by a program named at run time"
				}
			}
			continue
		}
		if name, _ := progName(sc.Args[0]); name != "rm" && name != "rmdir" {
			continue
		}
		if sc.FromStdin {
			return "targets read from standard input (xargs)"
		}
		ops, _ := operands(sc.Words[1:])
		for _, w := range ops {
			if why := g.criticalWord(&sc, w); why != "" {
				return why
			}
		}
	}
	return ""
}

// criticalWord checks one rm target, in every directory the command may
// run in.
func (g *Gate) criticalWord(sc *SimpleCommand, w Word) string {
	if w.Dynamic {
		return "a path built from a variable or substitution"
	}
	for _, a := range w.Values {
		dirs := sc.Dirs
		if len(dirs) == 0 {
			dirs = []string{g.Cwd}
		}
		for _, d := range dirs {
			if d == "" && !filepath.IsAbs(a) {
				return "a path relative to a directory known only at run time"
			}
			p := filepath.Clean(a)
			if !filepath.IsAbs(p) {
				p = filepath.Join(d, p)
			}
			dir := p
			if w.Glob {
				dir = filepath.Dir(p)
			}
			if why := g.criticalDir(dir); why != "" && (w.Glob || dir == p) {
				return why
			}
		}
	}
	return ""
}

func (g *Gate) criticalDir(p string) string {
	switch {
	case p == "/":
		return "/"
	case filepath.Dir(p) == "/":
		return "a top-level directory " + p
	case p == g.Home:
		return "the home directory"
	}
	for _, d := range g.workDirs {
		if fsrules.Within(d, p) {
			return "the working directory or a parent of it"
		}
	}
	return ""
}

// protectedPath reports why writing p is never auto-approved (spec §2).
func protectedPath(p, _, _ string) string {
	comps := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	for i, c := range comps {
		last := i == len(comps)-1
		switch c {
		case ".git", ".vscode", ".idea", ".husky", ".cargo", ".devcontainer", ".yarn", ".mvn":
			return c + " is a protected directory"
		case ".claude":
			if i+1 < len(comps) && comps[i+1] == "worktrees" {
				continue
			}
			return ".claude is a protected directory"
		case ".config":
			if i+1 < len(comps) && comps[i+1] == "git" {
				return ".config/git is a protected directory"
			}
		}
		if last {
			for _, f := range fsrules.ProtectedFiles() {
				if c == f {
					return c + " is a protected file"
				}
			}
		}
	}
	return ""
}

// toolSchemas lists, per tool, the input fields and their JSON kinds; a
// required field is marked with a leading "!".
var toolSchemas = map[string]map[string]string{
	"Bash":         {"!command": "string", "timeout": "number", "description": "string", "run_in_background": "bool", "dangerouslyDisableSandbox": "bool"},
	"Read":         {"!file_path": "string", "offset": "number", "limit": "number", "pages": "string"},
	"Write":        {"!file_path": "string", "!content": "string"},
	"Edit":         {"!file_path": "string", "!old_string": "string", "!new_string": "string", "replace_all": "bool"},
	"MultiEdit":    {"!file_path": "string", "!edits": "array"},
	"NotebookEdit": {"!notebook_path": "string", "!new_source": "string", "cell_id": "string", "cell_type": "string", "edit_mode": "string"},
	"WebFetch":     {"!url": "string", "!prompt": "string"},
	"Glob":         {"!pattern": "string", "path": "string"},
	"Grep":         {"!pattern": "string"},
}

// ValidateInput checks a tool input against its schema (types, required
// fields; Bash's timeout at most 600000 ms). Unknown tools and fields of
// tools without a schema pass: MCP and other tools have their own.
func ValidateInput(tool string, input json.RawMessage) error {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return errors.New("input must be a JSON object")
	}
	schema, ok := toolSchemas[tool]
	if !ok {
		return nil
	}
	for key, kind := range schema {
		name := strings.TrimPrefix(key, "!")
		val, present := m[name]
		if !present {
			if strings.HasPrefix(key, "!") {
				return fmt.Errorf("the required parameter `%s` is missing", name)
			}
			continue
		}
		okKind := false
		switch kind {
		case "string":
			_, okKind = val.(string)
		case "number":
			_, okKind = val.(json.Number)
		case "bool":
			_, okKind = val.(bool)
		case "array":
			_, okKind = val.([]any)
		}
		if !okKind {
			return fmt.Errorf("the parameter `%s` type is expected as `%s`", name, kind)
		}
	}
	if tool == "Bash" {
		if n, ok := m["timeout"].(json.Number); ok {
			if f, err := n.Float64(); err != nil || f < 0 || f > 600000 {
				return errors.New("the parameter `timeout` must be between 0 and 600000 ms")
			}
		}
		if strings.TrimSpace(m["command"].(string)) == "" {
			return errors.New("the parameter `command` is empty")
		}
		if b, _ := m["run_in_background"].(bool); b {
			return errors.New("run_in_background is not supported by sbx: run the command in the foreground")
		}
	}
	for name := range m {
		if _, ok := schema[name]; !ok {
			if _, ok := schema["!"+name]; !ok {
				return fmt.Errorf("an unexpected parameter `%s` was provided", name)
			}
		}
	}
	return nil
}
