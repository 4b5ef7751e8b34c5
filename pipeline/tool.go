package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// ToolUse is a tool call as the Messages API sends it.
type ToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ToolResult is the answer, paired with the call by ToolUseID on every
// path, errors included.
type ToolResult struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
	// Output is the structured Bash output (for --output structured); not
	// part of the tool_result.
	Output *BashOutput `json:"-"`
	// Invalid is set when the input was not a tool_use sbx could act on
	// (not JSON, duplicate keys, no id, another type, no name): nothing
	// was run.
	Invalid bool `json:"-"`
	// Stopped is the signal that stopped sbx while the sandbox was set up
	// (the command did not run; [InterruptedError]); 0 for none.
	Stopped syscall.Signal `json:"-"`
}

// BashOutput is the Bash tool's structured output.
type BashOutput struct {
	Stdout          string   `json:"stdout"`
	Stderr          string   `json:"stderr"`
	ExitCode        int      `json:"exitCode"`
	Interrupted     bool     `json:"interrupted"`
	TimedOutAfterMs int64    `json:"timedOutAfterMs,omitempty"`
	Sandboxed       bool     `json:"sandboxed"`
	Verdict         *Verdict `json:"decision,omitempty"`
}

// Output limits, as Claude Code's Bash tool.
const (
	DefaultBashTimeout = 2 * time.Minute
	MaxBashTimeout     = 10 * time.Minute
	MaxOutputChars     = 30000
)

// Prompter asks a person about a call; nil means no one can be asked.
type Prompter func(call *Call, v *Verdict) (allow, forSession bool)

// Runner is the whole pipeline for one session: lookup, schema, the gate,
// the sandboxed spawn, PostToolUse hooks and the tool_result.
type Runner struct {
	Gate     *Gate
	Settings *settings.Settings
	Executor Executor
	// FS and Net are the sandbox policy for Bash calls.
	FS  *fsrules.Policy
	Net *NetPolicy
	// FSNow, when set, gives the filesystem policy as the host is at each
	// call (a long-lived session: a denyRead path that appeared since it
	// started is hidden too); an error refuses the call.
	FSNow func() (*fsrules.Policy, error)
	Env   []string
	// Secrets are the masked credentials behind Env's placeholders, and
	// Platform the platform-only keys: both go into every Spec.
	Secrets  []*creds.Secret
	Platform Platform
	// MaskedFiles go into every Spec (see [Spec.MaskedFiles]).
	MaskedFiles []MaskedFile
	// MasksNow, when set, reads the masked credential files again for
	// each Bash call of a long-lived session, under that call's
	// filesystem policy: the files and the secrets behind every
	// placeholder (the environment's too) replace MaskedFiles and Secrets
	// in the call's Spec. RedactorNow is then the redactor of every secret
	// the session has seen, used instead of Redactor.
	MasksNow    func(*fsrules.Policy) ([]MaskedFile, []*creds.Secret)
	RedactorNow func() *creds.Redactor
	// Decided, when set, is told every final decision (for the audit log).
	Decided func(call *Call, v *Verdict)
	// Warn, when set, receives the sandbox's warnings about the host (a
	// limit it could only approximate, …), which are the operator's, not
	// the model's; nil puts them in the tool_result.
	Warn func(string)
	// Prompt answers an "ask"; nil leaves it denied (a session that cannot
	// prompt was already resolved by the gate).
	Prompt Prompter
	// Redactor removes real secret values from everything handed back;
	// nil redacts nothing.
	Redactor *creds.Redactor
	// Limits bound each Bash call; its zero value means
	// DefaultToolLimits' timeout and output cap and no other limit.
	Limits RunLimits
	// Discard runs each command and reports what it would have changed,
	// applying nothing (see [Spec.Discard]).
	Discard bool
	// SeparateStreams keeps a Bash call's stdout and stderr apart (two
	// pipes; the result's text is stdout then stderr). Otherwise they are
	// one stream, in the order the command wrote them, as Claude Code's own
	// Bash tool shows them (its output file holds both): the structured
	// output then has all of it as stdout.
	SeparateStreams bool

	mu       sync.Mutex
	approved []string // commands approved for the session
}

var idPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"id"\s*:\s*"([A-Za-z0-9_\-]{1,200})"`) })

// executable are the tools sbx runs itself: Bash in the sandbox; Read on
// the host, after the gate (Claude Code's Read is not sandboxed either).
var executable = []string{"Bash", "Read"}

func errResult(id, msg string) *ToolResult {
	return &ToolResult{Type: "tool_result", ToolUseID: id, Content: msg, IsError: true}
}

// Handle runs one tool_use given as JSON and always returns a tool_result
// with the caller's id (empty when the id itself could not be read).
func (r *Runner) Handle(ctx context.Context, raw []byte) *ToolResult {
	invalid := func(id, msg string) *ToolResult {
		res := errResult(id, "Error: "+msg+"; nothing was run")
		res.Invalid = true
		return res
	}
	var tu ToolUse
	if err := json.Unmarshal(raw, &tu); err != nil {
		// Pair the error with the id if it can be read at all.
		id := ""
		if m := idPattern().FindSubmatch(raw); m != nil {
			id = string(m[1])
		}
		return invalid(id, "the tool_use is not valid JSON: "+err.Error())
	}
	// Duplicate keys: the JSON decoder would keep the last, another reader
	// the first.
	if _, err := settings.ParseJSON("tool_use", raw); err != nil {
		return invalid(tu.ID, "the tool_use cannot be read one way only: "+err.Error())
	}
	if id, err := exactKeys(raw); err != nil {
		return invalid(id, "the tool_use cannot be read one way only: "+err.Error())
	}
	switch {
	case tu.Type != "" && tu.Type != "tool_use":
		return invalid(tu.ID, fmt.Sprintf("expected a tool_use block, got %q", tu.Type))
	case tu.ID == "":
		return invalid("", "the tool_use has no id")
	case tu.Name == "":
		return invalid(tu.ID, "the tool_use has no name")
	}
	return r.Call(ctx, &tu)
}

// toolUseKeys are the keys of a tool_use that sbx reads.
var toolUseKeys = []string{"type", "id", "name", "input"}

// exactKeys refuses a top-level key that differs from one of toolUseKeys
// only in case: Go's decoder matches keys regardless of case (and takes
// the last), so {"name":"Read","Name":"Bash"} would run Bash where the
// caller's reader sees a Read. It returns the exact "id", for the error.
func exactKeys(raw []byte) (string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", err
	}
	var id string
	_ = json.Unmarshal(m["id"], &id)
	if LostInDecoding(m["id"], id) {
		// A lone surrogate escape: the result would carry U+FFFD instead.
		return "", errors.New("the id holds an escape that is no character (a lone surrogate)")
	}
	keys := slices.Sorted(maps.Keys(m))
	for _, k := range keys {
		for _, f := range toolUseKeys {
			if k != f && strings.EqualFold(k, f) {
				return id, fmt.Errorf("key %q differs from %q only in case", k, f)
			}
		}
	}
	return id, nil
}

// LostInDecoding reports whether s, a JSON string decoded from raw, holds
// a U+FFFD that raw did not: a lone surrogate escape or a byte that is not
// UTF-8, which a reply echoing s would not give back as sent.
func LostInDecoding(raw []byte, s string) bool {
	return strings.ContainsRune(s, utf8.RuneError) && !bytes.ContainsRune(raw, utf8.RuneError) &&
		!bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`))
}

// Call runs one tool use. Everything it returns is redacted.
func (r *Runner) Call(ctx context.Context, tu *ToolUse) *ToolResult {
	res := r.call(ctx, tu)
	red := r.redactor()
	res.Content = red.Redact(res.Content)
	if res.Output != nil {
		res.Output.Stdout = red.Redact(res.Output.Stdout)
		res.Output.Stderr = red.Redact(res.Output.Stderr)
	}
	return res
}

// redactor is the redactor for what a call hands back: RedactorNow's
// when set, else Redactor.
func (r *Runner) redactor() *creds.Redactor {
	if r.RedactorNow != nil {
		return r.RedactorNow()
	}
	return r.Redactor
}

func (r *Runner) call(ctx context.Context, tu *ToolUse) *ToolResult {
	name := tu.Name
	if canon, ok := toolAliases[name]; ok {
		name = canon
	}
	known := false
	for _, t := range executable {
		known = known || t == name
	}
	if !known {
		return errResult(tu.ID, fmt.Sprintf("Error: No such tool available: %s", tu.Name))
	}
	if len(tu.Input) == 0 {
		tu.Input = json.RawMessage("{}")
	}
	if err := ValidateInput(name, tu.Input); err != nil {
		return errResult(tu.ID, "InputValidationError: "+err.Error())
	}
	call := &Call{ID: tu.ID, Tool: name, Input: tu.Input}
	if err := call.parse(); err != nil {
		return errResult(tu.ID, "InputValidationError: "+err.Error())
	}
	v, err := r.Decide(ctx, call)
	if err != nil {
		return errResult(tu.ID, "Error: "+err.Error())
	}
	if v.Decision != DecisionAllow {
		res := errResult(tu.ID, fmt.Sprintf("Permission to use %s has been denied. %s", name, v.Reason))
		res.Output = &BashOutput{ExitCode: -1, Verdict: v} // it did not run
		return res
	}
	// Run the input as decided (hooks may have rewritten it).
	call.Input = v.Input
	if err := call.parse(); err != nil {
		return errResult(tu.ID, "Error: "+err.Error())
	}
	if name == "Read" {
		return r.runRead(ctx, call)
	}
	return r.runBash(ctx, call, v)
}

// runRead reads a text file with line numbers, as Claude Code's Read does:
// from line offset (1-based), at most limit lines (default 2000), long lines
// cut at 2000 characters.
func (r *Runner) runRead(ctx context.Context, call *Call) *ToolResult {
	p := call.str("file_path")
	if !strings.HasPrefix(p, "/") {
		return errResult(call.ID, "InputValidationError: file_path must be absolute")
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return errResult(call.ID, "Error: "+err.Error())
	}
	// The Read tool runs on the host, but what the sandbox hides (denyRead,
	// the credential files) stays hidden from it too: as the policy is
	// now, for a long-lived session (a denied file made since its start).
	fs, err := r.fsNow()
	if err != nil {
		return errResult(call.ID, "Error: "+err.Error())
	}
	if fs != nil {
		for _, cand := range []string{p, real} {
			if hiddenByPolicy(fs, cand) {
				return errResult(call.ID, fmt.Sprintf("Error: %s is hidden by the sandbox policy (denyRead); re-open it with allowRead", p))
			}
		}
	}
	// A link (one the sandbox may have made in the workspace) is read only
	// if the gate allows reading what it points to as well.
	if real != p {
		in, _ := json.Marshal(map[string]string{"file_path": real})
		v, err := r.Decide(ctx, &Call{ID: call.ID, Tool: "Read", Input: in})
		if err != nil || v.Decision != DecisionAllow {
			return errResult(call.ID, fmt.Sprintf("Error: %s is a link to %s, which may not be read here", p, real))
		}
	}
	data, err := settings.ReadRegular(real, maxReadBytes)
	if err != nil {
		return errResult(call.ID, "Error: "+err.Error())
	}
	offset, limit := 1, 2000
	if n, ok := call.m["offset"].(json.Number); ok {
		if v, err := n.Int64(); err == nil && v > 0 {
			offset = int(v)
		}
	}
	if n, ok := call.m["limit"].(json.Number); ok {
		if v, err := n.Int64(); err == nil && v > 0 {
			limit = int(v)
		}
	}
	lines := strings.SplitAfter(string(data), "\n")
	var b strings.Builder
	for i := offset - 1; i < len(lines) && i < offset-1+limit; i++ {
		l := strings.TrimRight(lines[i], "\n")
		if i == len(lines)-1 && l == "" {
			break
		}
		if utf8.RuneCountInString(l) > 2000 {
			l = string([]rune(l)[:2000]) + "…"
		}
		fmt.Fprintf(&b, "%6d\t%s\n", i+1, l)
	}
	return &ToolResult{Type: "tool_result", ToolUseID: call.ID, Content: capOutput(b.String(), MaxOutputChars, 0)}
}

// maxReadBytes bounds the file the Read tool reads.
const maxReadBytes = 16 << 20

// Decide runs the gate for a call and settles an "ask": approved earlier
// in this session, answered by Prompt, or denied when no one can be asked.
// The verdict is never "ask".
func (r *Runner) Decide(ctx context.Context, call *Call) (*Verdict, error) {
	v, err := r.decide(ctx, call)
	if err == nil && r.Decided != nil {
		r.Decided(call, v)
	}
	return v, err
}

func (r *Runner) decide(ctx context.Context, call *Call) (*Verdict, error) {
	v, err := r.Gate.Decide(ctx, call)
	if err != nil || v.Decision != DecisionAsk {
		return v, err
	}
	prompt := r.Prompt
	if p := prompterFrom(ctx); p != nil {
		prompt = p
	}
	switch {
	case r.sessionApproved(call):
		v.Decision, v.Reason, v.Source = DecisionAllow, "approved earlier in this session", "session"
	case prompt != nil:
		allow, session := prompt(call, v)
		if !allow {
			v.Decision, v.Reason = DecisionDeny, v.Reason+"; refused at the prompt"
			break
		}
		v.Decision, v.Reason, v.Source = DecisionAllow, "approved at the prompt", "prompt"
		if session {
			r.approve(call)
		}
	default:
		v.Decision, v.Reason = DecisionDeny, v.Reason+"; no one was asked"
	}
	return v, nil
}

func (r *Runner) sessionApproved(call *Call) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.approved, approvalKey(call))
}

func (r *Runner) approve(call *Call) {
	r.mu.Lock()
	r.approved = append(r.approved, approvalKey(call))
	r.mu.Unlock()
}

// approvalKey is what an approval "for the session" covers: this Bash
// command (whatever its timeout or description), or this tool with this
// exact input (a Read of one file), never another tool's call or another
// file.
func approvalKey(call *Call) string {
	if call.Tool == "Bash" {
		return "Bash\x00" + call.command()
	}
	return call.Tool + "\x00" + string(call.Input)
}

type prompterKey struct{}

// WithPrompter returns a context whose calls' asks p answers, before
// Runner.Prompt (a caller who can ask its own user, as an MCP client with
// elicitation).
func WithPrompter(ctx context.Context, p Prompter) context.Context {
	return context.WithValue(ctx, prompterKey{}, p)
}

func prompterFrom(ctx context.Context) Prompter {
	p, _ := ctx.Value(prompterKey{}).(Prompter)
	return p
}

// BashSpec is the sandbox spec of a Bash call running command (with no
// timeout: the call sets it).
func (r *Runner) BashSpec(command string) (*Spec, error) {
	shell := "/bin/bash"
	if _, err := os.Stat(shell); err != nil {
		shell = "/bin/sh"
	}
	fs, err := r.fsNow()
	if err != nil {
		return nil, err
	}
	masked, secrets := r.MaskedFiles, r.Secrets
	if r.MasksNow != nil {
		masked, secrets = r.MasksNow(fs)
	}
	return &Spec{Argv: []string{shell, "-c", command}, Env: r.Env, Dir: r.Gate.Cwd, FS: fs, Net: r.Net, Limits: r.Limits.Limits, Discard: r.Discard,
		Secrets: secrets, Platform: r.Platform, MaskedFiles: masked, OneStream: !r.SeparateStreams}, nil
}

// fsNow is the filesystem policy for a call: as the host is now (FSNow) for a
// long-lived session, the session's otherwise.
func (r *Runner) fsNow() (*fsrules.Policy, error) {
	if r.FSNow != nil {
		return r.FSNow()
	}
	return r.FS, nil
}

// tracedSpec is BashSpec, with the phases marked in the call's trace.
func (r *Runner) tracedSpec(ctx context.Context, command string) (*Spec, error) {
	tr := TraceFrom(ctx)
	tr.Mark("sbx: call read and decided")
	spec, err := r.BashSpec(command)
	if err == nil && r.FSNow != nil {
		tr.Mark("sbx: filesystem policy as the host is now (compiled, or the last one if what it read is unchanged)")
	}
	return spec, err
}

func (r *Runner) runBash(ctx context.Context, call *Call, v *Verdict) *ToolResult {
	timeout := DefaultBashTimeout
	if r.Limits.Timeout > 0 {
		timeout = r.Limits.Timeout
	}
	maxOut := MaxOutputChars
	if r.Limits.MaxOutput > 0 {
		maxOut = int(min(r.Limits.MaxOutput, 1<<30))
	}
	if n, ok := call.m["timeout"].(json.Number); ok {
		if ms, err := n.Float64(); err == nil && ms > 0 {
			// Whole milliseconds, rounded up: 0.5 is a timeout, not none.
			timeout = min(time.Duration(math.Ceil(ms))*time.Millisecond, MaxBashTimeout)
		}
	}
	// Head and tail of each stream, as Claude Code keeps them: a summary
	// or a final error is at the end.
	stdout, stderr := NewHeadTail(4*maxOut), NewHeadTail(4*maxOut)
	spec, err := r.tracedSpec(ctx, call.command())
	if err != nil {
		return errResult(call.ID, "Error: the sandbox's filesystem policy cannot be compiled: "+err.Error()+"; nothing was run")
	}
	// Redacted on the way in: the cut between head and tail must not
	// split a secret the redaction would no longer see whole. After the
	// spec: its masks may have added secrets.
	red := r.redactor()
	redOut, redErr := red.Writer(stdout), red.Writer(stderr)
	stdio := Stdio{Stdout: redOut, Stderr: redErr}
	if !r.SeparateStreams {
		stdio.Stderr = redOut
	}
	spec.Timeout = timeout
	if !v.Sandboxed {
		return errResult(call.ID, "Error: this command would run outside the sandbox (the sandbox is disabled or unavailable), which sbx does not do from a tool call")
	}
	start := time.Now()
	res, err := r.Executor.Run(ctx, spec, stdio)
	redOut.Close()
	redErr.Close()
	out := &BashOutput{Stdout: stdout.String(), Sandboxed: true, Verdict: v}
	if r.SeparateStreams {
		out.Stderr = stderr.String()
	}
	if err != nil {
		msg := "Error: the sandbox could not run the command: " + err.Error()
		if ctx.Err() != nil {
			msg = "Error: the call was stopped before the command ended (" + ctx.Err().Error() + "); the sandbox and every process in it were killed"
		}
		if errors.Is(err, ErrUnavailable) {
			msg += " (nothing was run; sbx doctor explains)"
		}
		// No exit status: it did not run, or was stopped (interrupted).
		out.ExitCode, out.Interrupted = -1, ctx.Err() != nil
		r.postHooks(ctx, "PostToolUseFailure", call, out, msg, time.Since(start))
		tr := errResult(call.ID, msg)
		if ie := (*InterruptedError)(nil); errors.As(err, &ie) {
			tr.Content, tr.Stopped = "Error: sbx was "+ie.Error(), ie.Signal
		}
		if ctx.Err() != nil {
			// What the command wrote before it was stopped, as after a
			// timeout.
			tr.Content = capOutput(msg+"\n"+combine(out.Stdout, out.Stderr), maxOut, stdout.Dropped()+stderr.Dropped())
		}
		tr.Output = out
		return tr
	}
	out.ExitCode = res.ExitCode
	if res.TimedOut {
		out.Interrupted, out.TimedOutAfterMs = true, timeout.Milliseconds()
	}
	content := combine(out.Stdout, out.Stderr)
	isErr := out.ExitCode != 0 || res.TimedOut || res.Changes.Incomplete()
	switch {
	case res.TimedOut:
		content = fmt.Sprintf("Command timed out after %s\n%s", timeout, content)
	case out.ExitCode > 128 && out.ExitCode < 128+65:
		content = fmt.Sprintf("Exit code %d (killed by signal %d)\n%s", out.ExitCode, out.ExitCode-128, content)
	case out.ExitCode != 0:
		content = fmt.Sprintf("Exit code %d\n%s", out.ExitCode, content)
	}
	if res.LimitHit != "" {
		content = fmt.Sprintf("[sbx: limit reached: %s]\n%s", res.LimitHit, content)
	}
	for _, w := range res.Warnings {
		if r.Warn != nil {
			r.Warn(w)
			continue
		}
		content += "\n[sbx: warning: " + w + "]"
	}
	for _, l := range res.Changes.Lines() {
		content += "\n[sbx: " + l + "]"
	}
	for _, l := range res.Blocked {
		content += "\n[sbx: " + l + "]"
	}
	event := "PostToolUse"
	if isErr {
		event = "PostToolUseFailure"
	}
	if extra := r.postHooks(ctx, event, call, out, firstLine(content), time.Since(start)); extra != "" {
		content += "\n" + extra
	}
	tr := &ToolResult{Type: "tool_result", ToolUseID: call.ID, Content: capOutput(content, maxOut, stdout.Dropped()+stderr.Dropped()),
		IsError: isErr, Output: out}
	return tr
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// postHooks runs PostToolUse or PostToolUseFailure hooks and returns text
// to add to the result (a block reason, exit-2 stderr). An updatedToolOutput
// that does not match the Bash output schema is ignored with a warning.
func (r *Runner) postHooks(ctx context.Context, event string, call *Call, out *BashOutput, errText string, d time.Duration) string {
	red := r.redactor()
	resp, _ := json.Marshal(map[string]any{"stdout": red.Redact(out.Stdout), "stderr": red.Redact(out.Stderr), "interrupted": out.Interrupted, "isImage": false})
	var extra []string
	g := r.Gate
	run := g.HookRunner
	if run == nil {
		run = RunCommandHook
	}
	for _, grp := range g.settings.Perm.Hooks {
		if grp.Event != event || !MatchHookMatcher(grp.Matcher, call.Tool) {
			continue
		}
		for _, h := range grp.Handlers {
			if h.Type != "command" {
				continue
			}
			in := hookInput{SessionID: g.SessionID, Cwd: g.Cwd, PermissionMode: string(g.Mode), HookEventName: event,
				ToolName: call.Tool, ToolInput: call.Input, ToolUseID: call.ID, DurationMs: d.Milliseconds()}
			if event == "PostToolUse" {
				in.ToolResponse = resp
			} else {
				in.Error = errText
			}
			data, _ := json.Marshal(in)
			hr := run(ctx, h, data, append(os.Environ(), "CLAUDE_PROJECT_DIR="+g.Cwd), g.Cwd)
			if hr.ExitCode == 2 {
				extra = append(extra, strings.TrimSpace(string(hr.Stderr)))
				continue
			}
			var o struct {
				Decision           string `json:"decision"`
				Reason             string `json:"reason"`
				HookSpecificOutput *struct {
					AdditionalContext string          `json:"additionalContext"`
					UpdatedToolOutput json.RawMessage `json:"updatedToolOutput"`
				} `json:"hookSpecificOutput"`
			}
			trimmed := bytes.TrimSpace(hr.Stdout)
			if len(trimmed) == 0 || trimmed[0] != '{' {
				continue // plain text, as for PreToolUse: not a decision
			}
			if err := json.Unmarshal(trimmed, &o); err != nil {
				extra = append(extra, fmt.Sprintf("[sbx: a %s hook printed invalid JSON (%v); ignored]", event, err))
				continue
			}
			if o.Decision == "block" && o.Reason != "" {
				extra = append(extra, o.Reason)
			}
			if hs := o.HookSpecificOutput; hs != nil {
				if hs.AdditionalContext != "" {
					extra = append(extra, hs.AdditionalContext)
				}
				if len(hs.UpdatedToolOutput) > 0 {
					var upd struct {
						Stdout      *string `json:"stdout"`
						Stderr      *string `json:"stderr"`
						Interrupted *bool   `json:"interrupted"`
					}
					dec := json.NewDecoder(bytes.NewReader(hs.UpdatedToolOutput))
					dec.DisallowUnknownFields()
					if dec.Decode(&upd) == nil && upd.Stdout != nil && upd.Stderr != nil {
						out.Stdout, out.Stderr = *upd.Stdout, *upd.Stderr
					} else {
						extra = append(extra, "[sbx: a PostToolUse hook's updatedToolOutput does not match the Bash output schema and was ignored]")
					}
				}
			}
		}
	}
	return strings.Join(extra, "\n")
}

// combine puts stdout and stderr together the way the model reads them.
func combine(stdout, stderr string) string {
	switch {
	case stderr == "":
		return stdout
	case stdout == "":
		return stderr
	}
	return strings.TrimRight(stdout, "\n") + "\n" + stderr
}

// capOutput cuts the middle of s to at most max characters, with a note
// saying how much was cut (dropped: bytes the output buffers had cut
// before).
func capOutput(s string, max int, dropped int64) string {
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	r := []rune(s)
	keep := max / 2
	cut := n - 2*keep
	note := fmt.Sprintf("%d characters cut", cut)
	if dropped > 0 {
		// The output buffers had cut the middle already, and their note
		// was in what was just cut.
		note += fmt.Sprintf(", and %d bytes of output before that", dropped)
	}
	return string(r[:keep]) + "\n\n... [" + note + "] ...\n\n" + string(r[n-keep:])
}

// hiddenByPolicy reports whether the filesystem policy hides p: inside a
// denyRead path and not re-opened by a more specific allowRead.
func hiddenByPolicy(pol *fsrules.Policy, p string) bool {
	deny, allow := "", ""
	for _, d := range pol.DenyRead {
		if fsrules.Within(p, d.Path) && len(d.Path) > len(deny) {
			deny = d.Path
		}
	}
	for _, a := range pol.AllowRead {
		if fsrules.Within(p, a.Path) && len(a.Path) > len(allow) {
			allow = a.Path
		}
	}
	return deny != "" && len(allow) <= len(deny)
}
