package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// HookResult is what one hook command did.
type HookResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	TimedOut bool
	// Err is set when the hook could not be started or was killed.
	Err error
	// Done is when it finished; the last updatedInput to finish wins.
	Done time.Time
}

// HookRunner runs one hook handler with input on stdin. The Gate's default
// runs command hooks as real processes; tests may inject another.
type HookRunner func(ctx context.Context, h settings.HookHandler, input []byte, env []string, dir string) HookResult

// DefaultHookTimeout is Claude Code's default for command hooks.
const DefaultHookTimeout = 600 * time.Second

// maxHookOutput bounds what is read from a hook.
const maxHookOutput = 1 << 20

// RunCommandHook runs a command hook: through sh -c, or in exec form when
// args are given; in its own session with no controlling terminal; killed
// with its process group at the timeout.
func RunCommandHook(ctx context.Context, h settings.HookHandler, input []byte, env []string, dir string) HookResult {
	timeout := DefaultHookTimeout
	if h.Timeout > 0 {
		timeout = time.Duration(h.Timeout * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var cmd *exec.Cmd
	if len(h.Args) > 0 {
		cmd = exec.CommandContext(ctx, h.Command, h.Args...)
	} else {
		cmd = exec.CommandContext(ctx, "/bin/sh", "-c", h.Command)
	}
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = bytes.NewReader(input)
	stdout, stderr := NewCapBuffer(maxHookOutput), NewCapBuffer(maxHookOutput)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	res := HookResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Done: time.Now()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		res.TimedOut, res.Err = true, fmt.Errorf("timed out after %s", timeout)
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
		if res.ExitCode < 0 {
			res.Err = err
		}
	case err != nil:
		res.ExitCode, res.Err = 127, err
	}
	return res
}

var exactMatcher = regexp.MustCompile(`^[A-Za-z0-9_\- ,|]*$`)

// MatchHookMatcher applies Claude Code's matcher rules: "", "*" and none
// match everything; only letters, digits, _ - space , | means exact names
// (a list); anything else is an unanchored regular expression.
func MatchHookMatcher(matcher, tool string) bool {
	m := strings.TrimSpace(matcher)
	if m == "" || m == "*" {
		return true
	}
	if exactMatcher.MatchString(m) {
		for _, name := range strings.FieldsFunc(m, func(r rune) bool { return r == '|' || r == ',' }) {
			if strings.TrimSpace(name) == tool {
				return true
			}
		}
		return false
	}
	re, err := regexp.Compile(m)
	if err != nil {
		return false
	}
	return re.MatchString(tool)
}

// hookInput is the JSON a hook reads on stdin.
type hookInput struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	PermissionMode string          `json:"permission_mode"`
	HookEventName  string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id,omitempty"`
	ToolResponse   json.RawMessage `json:"tool_response,omitempty"`
	Error          string          `json:"error,omitempty"`
	DurationMs     int64           `json:"duration_ms,omitempty"`
}

// hookOutput is the JSON a hook may print.
type hookOutput struct {
	Continue           *bool  `json:"continue"`
	StopReason         string `json:"stopReason"`
	SystemMessage      string `json:"systemMessage"`
	Decision           string `json:"decision"` // legacy approve|block
	Reason             string `json:"reason"`
	HookSpecificOutput *struct {
		HookEventName            string          `json:"hookEventName"`
		PermissionDecision       string          `json:"permissionDecision"`
		PermissionDecisionReason string          `json:"permissionDecisionReason"`
		UpdatedInput             json.RawMessage `json:"updatedInput"`
		AdditionalContext        string          `json:"additionalContext"`
		Decision                 *struct {
			Behavior     string          `json:"behavior"`
			UpdatedInput json.RawMessage `json:"updatedInput"`
			Message      string          `json:"message"`
		} `json:"decision"`
	} `json:"hookSpecificOutput"`
}

// hookOutcome is the combined result of the hooks of one event.
type hookOutcome struct {
	blocked      bool     // a PreToolUse hook exited 2
	decision     Decision // "" for none
	reason       string
	source       string
	updatedInput json.RawMessage
	warnings     []string
	contexts     []string
}

// decisionRank orders hook decisions: deny > defer > ask > allow.
func decisionRank(d string) int {
	switch d {
	case "deny":
		return 4
	case "defer":
		return 3
	case "ask":
		return 2
	case "allow":
		return 1
	}
	return 0
}

// runHooks runs every matching handler of event in parallel (identical
// handlers once) and combines their answers.
func (g *Gate) runHooks(ctx context.Context, event string, call *Call) *hookOutcome {
	out := &hookOutcome{}
	type job struct {
		h settings.HookHandler
	}
	var jobs []job
	seen := map[string]bool{}
	for _, grp := range g.settings.Perm.Hooks {
		if grp.Event != event || !MatchHookMatcher(grp.Matcher, call.Tool) {
			continue
		}
		for _, h := range grp.Handlers {
			if h.Type != "command" {
				out.warnings = append(out.warnings, fmt.Sprintf("%s hook of type %q is not supported by sbx, skipped", event, h.Type))
				continue
			}
			key := h.Command + "\x00" + strings.Join(h.Args, "\x00")
			if seen[key] {
				continue
			}
			if h.If != "" && !g.hookIfMatches(h.If, call) {
				continue
			}
			seen[key] = true
			jobs = append(jobs, job{h})
		}
	}
	if len(jobs) == 0 {
		return out
	}
	in := hookInput{SessionID: g.SessionID, Cwd: g.Cwd, PermissionMode: string(g.Mode), HookEventName: event,
		ToolName: call.Tool, ToolInput: call.Input}
	if event != "PermissionRequest" {
		in.ToolUseID = call.ID
	}
	data, _ := json.Marshal(in)
	env := append(os.Environ(), "CLAUDE_PROJECT_DIR="+g.Cwd, "SBX_PROJECT_DIR="+g.Cwd)
	run := g.HookRunner
	if run == nil {
		run = RunCommandHook
	}
	results := make([]HookResult, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = run(ctx, j.h, data, env, g.Cwd)
		}()
	}
	wg.Wait()
	var lastUpdate time.Time
	for i, r := range results {
		src := fmt.Sprintf("%s hook %q (%s)", event, jobs[i].h.Command, jobs[i].h.File.Path)
		g.combineHook(out, event, src, r, &lastUpdate)
	}
	return out
}

func (g *Gate) combineHook(out *hookOutcome, event, src string, r HookResult, lastUpdate *time.Time) {
	set := func(d, reason string) {
		if !out.blocked && decisionRank(d) > decisionRank(string(out.decision)) {
			out.decision, out.reason, out.source = Decision(d), reason, src
		}
	}
	failClosed := g.settings.Perm.HooksFailClosed.Or(false) && event == "PreToolUse"
	if r.TimedOut || (r.Err != nil && r.ExitCode != 2) {
		msg := fmt.Sprintf("%s did not answer: %v", src, r.Err)
		out.warnings = append(out.warnings, msg)
		if failClosed {
			set("deny", msg+" (sbx.hooks.failClosed)")
		}
		return
	}
	if r.ExitCode == 2 {
		if event != "PreToolUse" {
			return // PermissionRequest: not honoured; Post*: shown, nothing to decide
		}
		reason := strings.TrimSpace(string(r.Stderr))
		var o hookOutput
		// A JSON blocking reason (a deny's) wins over stderr.
		if json.Unmarshal(bytes.TrimSpace(r.Stdout), &o) == nil {
			if hs := o.HookSpecificOutput; hs != nil && hs.PermissionDecision == "deny" && hs.PermissionDecisionReason != "" {
				reason = hs.PermissionDecisionReason
			} else if o.Decision == "block" && o.Reason != "" {
				reason = o.Reason
			}
		}
		if reason == "" {
			reason = "blocked by hook"
		}
		// Exit 2 blocks outright, above any JSON decision.
		if !out.blocked {
			out.blocked, out.reason, out.source = true, reason, src
		}
		out.decision = DecisionDeny
		return
	}
	trimmed := bytes.TrimSpace(r.Stdout)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		if r.ExitCode != 0 {
			out.warnings = append(out.warnings, fmt.Sprintf("%s failed with non-blocking status code %d", src, r.ExitCode))
			if failClosed {
				set("deny", fmt.Sprintf("%s failed with status %d (sbx.hooks.failClosed)", src, r.ExitCode))
			}
		}
		return
	}
	var o hookOutput
	if err := json.Unmarshal(trimmed, &o); err != nil {
		out.warnings = append(out.warnings, fmt.Sprintf("%s printed invalid JSON (%v); ignored", src, err))
		if failClosed {
			set("deny", src+" printed invalid JSON (sbx.hooks.failClosed)")
		}
		return
	}
	if o.Continue != nil && !*o.Continue {
		reason := o.StopReason
		if reason == "" {
			reason = "a hook stopped the session"
		}
		set("deny", reason)
		return
	}
	hs := o.HookSpecificOutput
	switch event {
	case "PreToolUse":
		d, reason := "", ""
		if hs != nil {
			d, reason = hs.PermissionDecision, hs.PermissionDecisionReason
			if hs.AdditionalContext != "" {
				out.contexts = append(out.contexts, hs.AdditionalContext)
			}
			if len(hs.UpdatedInput) > 0 && string(hs.UpdatedInput) != "null" && !r.Done.Before(*lastUpdate) {
				out.updatedInput, *lastUpdate = hs.UpdatedInput, r.Done
			}
		}
		if d == "" {
			switch o.Decision { // legacy top-level form
			case "approve":
				d, reason = "allow", o.Reason
			case "block":
				d, reason = "deny", o.Reason
			}
		}
		switch d {
		case "", "allow", "ask", "deny":
		case "defer":
			out.warnings = append(out.warnings, src+` answered "defer", which only applies to a single -p tool call; ignored`)
			d = ""
		default:
			out.warnings = append(out.warnings, fmt.Sprintf("%s: unknown permissionDecision %q; ignored", src, d))
			d = ""
		}
		if d != "" {
			if reason == "" {
				reason = "hook decision"
			}
			set(d, reason)
		}
	case "PermissionRequest":
		if hs == nil || hs.Decision == nil {
			return
		}
		switch hs.Decision.Behavior {
		case "allow":
			set("allow", "approved by "+src)
			if len(hs.Decision.UpdatedInput) > 0 && string(hs.Decision.UpdatedInput) != "null" {
				out.updatedInput = hs.Decision.UpdatedInput
			}
		case "deny":
			msg := hs.Decision.Message
			if msg == "" {
				msg = "denied by " + src
			}
			set("deny", msg)
		default:
			out.warnings = append(out.warnings, fmt.Sprintf("%s: unknown decision.behavior %q; ignored", src, hs.Decision.Behavior))
		}
	}
}

// hookIfMatches evaluates a handler's `if` rule against the call; an
// unparseable rule or command fails open (the hook runs), as documented.
func (g *Gate) hookIfMatches(rule string, call *Call) bool {
	r, _, err := ParseRule(settings.PermRule{Rule: rule, Behavior: "ask"}, g.Home)
	if err != nil || r == nil {
		return true
	}
	if !r.MatchTool(call.Tool) {
		return false
	}
	if call.Tool == "Bash" {
		if pc := SplitCommand(call.command()); pc.Unparseable {
			return true
		}
	}
	return g.ruleMatches(r, call)
}
