package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// Command is what Run runs: a shell string (Shell), or an argv; Dir is its
// working directory ("" means the workspace).
type Command struct {
	Shell string
	Argv  []string
	Dir   string
}

// String is the command as the gate sees it (the argv shell-quoted).
func (c Command) String() string {
	t, err := c.text()
	if err != nil {
		return strings.Join(c.Argv, " ")
	}
	return t
}

// text is the command as the gate sees it, as a Bash tool call: the shell
// string, or the shell-quoted argv.
func (c Command) text() (string, error) {
	if c.Shell != "" || len(c.Argv) == 0 {
		return c.Shell, nil
	}
	q := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		s, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			return "", fmt.Errorf("argument %q cannot be quoted for bash: %w", a, err)
		}
		q[i] = s
	}
	return strings.Join(q, " "), nil
}

// ShellPath returns bash if the host has it, else sh.
func ShellPath() string {
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash"
	}
	return "/bin/sh"
}

// DeniedError is a command the gate did not allow: nothing was run.
type DeniedError struct{ Verdict *pipeline.Verdict }

func (e *DeniedError) Error() string {
	v := e.Verdict
	where := v.Source
	if v.Rule != "" {
		where = v.Rule + " (" + v.Source + ")"
	}
	return fmt.Sprintf("denied: %s [%s]; nothing was run", v.Reason, where)
}

// Outcome is how a command that ran ended.
type Outcome struct {
	pipeline.Result
	// Verdict is the gate's decision.
	Verdict *pipeline.Verdict
	// Rewritten is the command a hook rewrote it to ("" when none did).
	Rewritten string
	// Timeout is the wall-clock limit that applied (zero: none).
	Timeout time.Duration
}

// Run decides a command at the gate and runs it in the sandbox, with the
// session's limits; stdout and stderr are redacted unless they are
// terminals, and capped by the output limit. An error means nothing ran
// (*DeniedError from the gate; pipeline.ErrUnavailable when the sandbox
// cannot be built) or the sandbox failed; the command's own failure is in
// the Outcome.
func (s *Session) Run(ctx context.Context, c Command, stdio pipeline.Stdio) (*Outcome, error) {
	if en := s.st.Enabled; en.Set && !en.V && !s.opts.Unsandboxed && !s.opts.DecidedUpstream {
		return nil, fmt.Errorf("%w: sandbox.enabled is false in %s; sbx runs without a sandbox only when asked to (--unsandboxed)", ErrNotSandboxed, en.File.Path)
	}
	text, err := c.text()
	if err != nil {
		return nil, err
	}
	argv := c.Argv
	if c.Shell != "" || len(argv) == 0 {
		argv = []string{ShellPath(), "-c", c.Shell}
	}
	tr := pipeline.TraceFrom(ctx)
	sb, err := s.prepare()
	if err != nil {
		return nil, err
	}
	tr.Mark("session: policy compiled")
	input, _ := json.Marshal(map[string]string{"command": text})
	v, err := s.decide(ctx, sb, input)
	if err != nil {
		return nil, err
	}
	tr.Mark("session: gate decided")
	out := &Outcome{Verdict: v, Timeout: sb.limits.Timeout}
	if !bytes.Equal(v.Input, input) {
		// A hook rewrote the command: run what was decided.
		var in struct{ Command string }
		if err := json.Unmarshal(v.Input, &in); err != nil || in.Command == "" {
			return nil, errors.New("a hook's updatedInput has no command")
		}
		out.Rewritten = in.Command
		argv = []string{ShellPath(), "-c", in.Command}
	}
	dir := s.dir
	if c.Dir != "" {
		dir = c.Dir
	}
	spec := &pipeline.Spec{Argv: argv, Env: sb.env, Dir: dir, FS: sb.fs, Net: sb.net, Timeout: sb.limits.Timeout,
		Limits: sb.limits.Limits, Discard: s.opts.Discard, Secrets: sb.secrets, Platform: s.platform(), MaskedFiles: sb.masked}
	exe := sb.exec
	if s.opts.Unsandboxed && !s.opts.DecidedUpstream {
		if sb.limits.Limits != (pipeline.Limits{}) || sb.limits.MaxOutput > 0 {
			return nil, errors.New("resource limits need the sandbox; --unsandboxed honours only --timeout")
		}
		exe = audited{signalsCaught{unsandboxed{}}, sb.audit}
	}
	stdio, closeStreams := s.streams(sb, stdio)
	res, err := exe.Run(ctx, spec, stdio)
	closeStreams(res)
	if err != nil {
		return nil, s.explain(err)
	}
	out.Result = *res
	return out, nil
}

// decide is the gate's verdict on a Bash call, or, for a session whose
// caller decided already, an allow that says so. A verdict other than
// allow is a *DeniedError.
func (s *Session) decide(ctx context.Context, sb *sandbox, input json.RawMessage) (*pipeline.Verdict, error) {
	if s.opts.DecidedUpstream {
		v := &pipeline.Verdict{Decision: pipeline.DecisionAllow, Reason: "decided by the caller (Claude Code's own rules and hooks)",
			Source: "upstream", Input: input, Sandboxed: true}
		if sb.audit != nil {
			sb.audit.Gate(&pipeline.Call{ID: "upstream", Tool: "Bash", Input: input}, v)
		}
		return v, nil
	}
	v, err := sb.runner.Decide(ctx, &pipeline.Call{ID: "sbx-run", Tool: "Bash", Input: input})
	if err != nil {
		return nil, err
	}
	if v.Decision != pipeline.DecisionAllow {
		return nil, &DeniedError{v}
	}
	return v, nil
}

// streams puts the redaction and the output cap around the command's
// stdout and stderr. Terminals are passed through as they are (the command
// never holds a real value to print). The returned function flushes them
// and records what the cap dropped in the result.
func (s *Session) streams(sb *sandbox, stdio pipeline.Stdio) (pipeline.Stdio, func(*pipeline.Result)) {
	var closers []io.Closer
	wrap := func(w io.Writer) io.Writer {
		if w == nil || IsTerminal(w) {
			return w
		}
		rw := sb.masks.redactor().Writer(w)
		closers = append(closers, rw)
		return rw
	}
	// One stream behind both (Claude Code's output file, `2>&1`): one
	// writer, so the sandbox gets one pipe and the order is kept.
	merged := sameStream(stdio.Stdout, stdio.Stderr)
	stdio.Stdout = wrap(stdio.Stdout)
	stdio.Stderr = wrap(stdio.Stderr)
	if merged {
		stdio.Stderr = stdio.Stdout
	}
	var c *pipeline.Cap
	if max := sb.limits.MaxOutput; max > 0 {
		c = pipeline.NewCap(max)
		stdio.Stdout = c.Writer(stdio.Stdout)
		stdio.Stderr = stdio.Stdout
		if !merged {
			stdio.Stderr = c.Writer(stdio.Stderr)
		}
	}
	return stdio, func(res *pipeline.Result) {
		for _, cl := range closers {
			cl.Close()
		}
		if c == nil || res == nil || c.Dropped() == 0 {
			return
		}
		note := fmt.Sprintf("output limit (--max-output %d bytes): %d more bytes of output were discarded", sb.limits.MaxOutput, c.Dropped())
		if sb.audit != nil {
			sb.audit.Limit(note, res.ExitCode)
		}
		if res.LimitHit == "" {
			res.LimitHit = note
		} else {
			res.Warnings = append(res.Warnings, note)
		}
	}
}

// sameStream reports whether two writers are one stream: the same value,
// or files open on the same file.
func sameStream(a, b io.Writer) bool {
	fa, ok1 := a.(*os.File)
	fb, ok2 := b.(*os.File)
	if !ok1 || !ok2 {
		return a != nil && b != nil && isComparable(a) && isComparable(b) && a == b
	}
	if fa == fb {
		return true
	}
	sa, err1 := fa.Stat()
	sb, err2 := fb.Stat()
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// isComparable reports whether == on w cannot panic.
func isComparable(w io.Writer) bool { return reflect.TypeOf(w).Comparable() }

// explain adds what the user can do to a sandbox that cannot be built.
func (s *Session) explain(err error) error {
	if !errors.Is(err, pipeline.ErrUnavailable) {
		return err
	}
	if fi := s.st.FailIfUnavailable; fi.Set && !fi.V {
		return fmt.Errorf("%w\nsandbox.failIfUnavailable is false in %s, but sbx runs without a sandbox only with --unsandboxed; run \"sbx doctor\" for the cause", err, fi.File.Path)
	}
	return fmt.Errorf("%w\nnothing was run; \"sbx doctor\" explains what this host lacks", err)
}
