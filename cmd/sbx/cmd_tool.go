package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/pipeline"
)

// toolFlags are sbx tool's and sbx serve's flags.
type toolFlags struct {
	gateFlags
	output string
	audit  string
	limits pipeline.LimitFlags
	tx     txFlags
}

func (t *toolFlags) parse(name string, args []string, stderr io.Writer) (int, error) {
	f := pflag.NewFlagSet(name, pflag.ContinueOnError)
	f.SetOutput(stderr)
	t.register(f)
	f.StringVar(&t.output, "output", "result", "`FORMAT`: result (the tool_result) or structured (plus stdout, stderr, exit code, the decision trail)")
	f.StringVar(&t.audit, "audit", "", "append every network decision to `FILE` as JSON Lines")
	registerLimits(f, &t.limits, false)
	registerTx(f, &t.tx)
	if err := f.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, err
		}
		return 2, &usageError{err.Error()}
	}
	if t.output != "result" && t.output != "structured" {
		return 2, &usageError{"--output must be result or structured"}
	}
	return 0, nil
}

// newRunner builds the whole pipeline for tool calls.
func (t *toolFlags) newRunner(stderr io.Writer) (*pipeline.Runner, func(), error) {
	s, err := t.open(stderr, hasTTY())
	if err != nil {
		return nil, nil, err
	}
	fsf := pipeline.FSFlags{HomeWorkspace: t.tx.homeWorkspace, StateDir: pipeline.StateDir(os.Getenv, s.home)}
	pol, err := fsrules.Compile(pipeline.FSInput(s.st, fsf, s.cwd), fsrules.Host{Home: s.home})
	if err != nil {
		return nil, nil, err
	}
	for _, w := range pol.Warnings {
		fmt.Fprintf(stderr, "sbx: warning: %s\n", w)
	}
	netPol, err := pipeline.NetInput(s.st, pipeline.NetFlags{}, false)
	if err != nil {
		return nil, nil, err
	}
	lim, err := pipeline.ResolveLimits(s.st, t.limits, pipeline.DefaultToolLimits())
	if err != nil {
		return nil, nil, err
	}
	b := newBackend(s.st.BwrapPath.V, pipeline.StateDir(os.Getenv, s.home))
	b.platformSettings(s.st, stderr)
	cleanup := func() {}
	exe := b.executor()
	if t.audit != "" {
		a, err := openAudit(t.audit)
		if err != nil {
			return nil, nil, err
		}
		b.setAudit(a)
		cleanup = func() { a.Close() }
		exe = auditedExecutor{exe, a}
	}
	masked, err := creds.MaskEnv(commandEnv(os.Environ()), pipeline.CredentialsConfig(s.st))
	if err != nil {
		return nil, nil, err
	}
	b.setSecrets(masked.Secrets)
	r := &pipeline.Runner{Gate: s.gate, Settings: s.st, Executor: exe, FS: pol, Net: netPol,
		Env: masked.Env, Redactor: creds.NewRedactor(masked.Secrets), Limits: lim, Discard: t.tx.discard}
	if s.gate.Interactive {
		r.Prompt = (&ttyPrompt{}).ask
	}
	return r, cleanup, nil
}

func writeResult(w io.Writer, res *pipeline.ToolResult, structured bool) error {
	enc := json.NewEncoder(w)
	if !structured {
		return enc.Encode(res)
	}
	return enc.Encode(struct {
		*pipeline.ToolResult
		Output *pipeline.BashOutput `json:"output,omitempty"`
	}{res, res.Output})
}

// cmdTool reads one tool_use JSON on stdin and writes one tool_result.
func cmdTool(args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var t toolFlags
	if code, err := t.parse("tool", args, stderr); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, nil
		}
		return code, err
	}
	raw, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
	if err != nil {
		return exitSbxError, err
	}
	r, cleanup, err := t.newRunner(stderr)
	if err != nil {
		// Even a setup failure answers with a tool_result for the same id.
		var id struct {
			ID string `json:"id"`
		}
		json.Unmarshal(raw, &id)
		writeResult(stdout, &pipeline.ToolResult{Type: "tool_result", ToolUseID: id.ID, Content: "Error: sbx: " + err.Error(), IsError: true}, false)
		return 0, err
	}
	defer cleanup()
	res := r.Handle(context.Background(), raw)
	if err := writeResult(stdout, res, t.output == "structured"); err != nil {
		return exitSbxError, err
	}
	return 0, nil
}

// cmdServe handles JSON Lines: one tool_use per line in, one tool_result per
// line out, in order; approvals "for the session" last until stdin closes.
func cmdServe(args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var t toolFlags
	if code, err := t.parse("serve", args, stderr); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, nil
		}
		return code, err
	}
	r, cleanup, err := t.newRunner(stderr)
	if err != nil {
		return exitSbxError, err
	}
	defer cleanup()
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	w := bufio.NewWriter(stdout)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		res := r.Handle(context.Background(), line)
		if err := writeResult(w, res, t.output == "structured"); err != nil {
			return exitSbxError, err
		}
		w.Flush()
	}
	return 0, sc.Err()
}

// auditedExecutor records the limits that stopped a tool call's command.
type auditedExecutor struct {
	pipeline.Executor
	audit *auditLog
}

func (e auditedExecutor) Run(ctx context.Context, s *pipeline.Spec, stdio pipeline.Stdio) (*pipeline.Result, error) {
	res, err := e.Executor.Run(ctx, s, stdio)
	if err == nil {
		e.audit.changes(res.Changes)
		if res.LimitHit != "" {
			e.audit.limit(res.LimitHit, res.ExitCode)
		}
		if res.TimedOut {
			e.audit.limit(fmt.Sprintf("wall clock (timeout %s)", s.Timeout), res.ExitCode)
		}
	}
	return res, err
}
