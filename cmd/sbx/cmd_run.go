package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/pipeline"
)

type runOpts struct {
	gateFlags
	shell       string
	fs          pipeline.FSFlags
	net         pipeline.NetFlags
	audit       string
	limits      pipeline.LimitFlags
	tx          txFlags
	unsandboxed bool
	printPolicy bool
}

func runFlags(o *runOpts) *pflag.FlagSet {
	f := pflag.NewFlagSet("run", pflag.ContinueOnError)
	f.SetInterspersed(false) // everything after CMD belongs to CMD
	f.StringVarP(&o.shell, "command", "c", "", "run this shell string with bash (sh when bash is missing)")
	o.gateFlags.register(f)
	f.StringArrayVar(&o.fs.AllowWrite, "allow-write", nil, "make `PATH` writable; repeatable")
	f.StringArrayVar(&o.fs.DenyWrite, "deny-write", nil, "keep `PATH` read-only even inside a writable root; repeatable")
	f.StringArrayVar(&o.fs.DenyRead, "deny-read", nil, "hide `PATH`; repeatable")
	f.StringArrayVar(&o.fs.AllowRead, "allow-read", nil, "re-open `PATH` inside a denyRead path; repeatable")
	registerTx(f, &o.tx)
	f.StringArrayVar(&o.net.AllowDomain, "allow-domain", nil, "let the sandbox reach `HOST` through the proxy (example.com, *.example.com, host:port, an IP); repeatable")
	f.StringArrayVar(&o.net.DenyDomain, "deny-domain", nil, "never let the sandbox reach `HOST`; repeatable")
	f.StringVar(&o.audit, "audit", "", "append every network decision to `FILE` as JSON Lines")
	registerLimits(f, &o.limits, true)
	f.BoolVar(&o.unsandboxed, "unsandboxed", false, "run WITHOUT any sandbox (explicit opt-out)")
	f.BoolVar(&o.printPolicy, "print-policy", false, "print the compiled policy as JSON and exit without running")
	return f
}

func cmdRun(args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var o runOpts
	f := runFlags(&o)
	f.SetOutput(stderr)
	f.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sbx run [flags] -- CMD [ARGS...]\n       sbx run [flags] -c 'SHELL STRING'\n\nFlags:\n%s", f.FlagUsages())
	}
	if err := f.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, nil
		}
		return 2, &usageError{err.Error()}
	}
	argv := f.Args()
	switch {
	case f.Changed("command") && len(argv) > 0:
		return 2, &usageError{"give either -c 'SHELL STRING' or -- CMD ARGS, not both"}
	case f.Changed("command"):
		argv = []string{shellPath(), "-c", o.shell}
	case len(argv) == 0:
		return 2, &usageError{"run: no command given"}
	}

	// The same gate as a Bash tool call: the command is the shell string,
	// or the shell-quoted argv.
	command := o.shell
	if !f.Changed("command") {
		var err error
		if command, err = bashCommand(argv); err != nil {
			return exitSbxError, err
		}
	}
	interactive := isTerminal(stdin)
	sess, err := o.gateFlags.open(stderr, interactive)
	if err != nil {
		return exitSbxError, err
	}
	st, cwd, home := sess.st, sess.cwd, sess.home
	if en := st.Enabled; en.Set && !en.V && !o.unsandboxed {
		return exitSbxError, fmt.Errorf("sandbox.enabled is false in %s; sbx runs without a sandbox only with --unsandboxed", en.File.Path)
	}
	if o.unsandboxed {
		// Unsandboxed, the sandbox's auto-allow does not apply.
		sess.gate.SandboxAvailable = false
	}
	input, _ := json.Marshal(map[string]string{"command": command})
	v, err := sess.gate.Decide(context.Background(), &pipeline.Call{ID: "sbx-run", Tool: "Bash", Input: input})
	if err != nil {
		return exitSbxError, err
	}
	if v.Decision == pipeline.DecisionAsk {
		call := &pipeline.Call{ID: "sbx-run", Tool: "Bash", Input: v.Input}
		if allow, _ := (&ttyPrompt{}).ask(call, v); allow {
			v.Decision = pipeline.DecisionAllow
		} else {
			v.Decision, v.Reason = pipeline.DecisionDeny, v.Reason+"; refused at the prompt"
		}
	}
	if v.Decision != pipeline.DecisionAllow {
		where := v.Source
		if v.Rule != "" {
			where = v.Rule + " (" + v.Source + ")"
		}
		return exitSbxError, fmt.Errorf("denied: %s [%s]; nothing was run", v.Reason, where)
	}
	if !bytes.Equal(v.Input, input) {
		// A hook rewrote the command: run what was decided.
		var in struct{ Command string }
		if err := json.Unmarshal(v.Input, &in); err != nil || in.Command == "" {
			return exitSbxError, errors.New("a hook's updatedInput has no command")
		}
		fmt.Fprintf(stderr, "sbx: a hook rewrote the command to: %s\n", in.Command)
		argv = []string{shellPath(), "-c", in.Command}
	}
	o.fs.HomeWorkspace, o.fs.StateDir = o.tx.homeWorkspace, pipeline.StateDir(os.Getenv, home)
	pol, err := fsrules.Compile(pipeline.FSInput(st, o.fs, cwd), fsrules.Host{Home: home})
	if err != nil {
		return exitSbxError, err
	}
	for _, w := range pol.Warnings {
		fmt.Fprintf(stderr, "sbx: warning: %s\n", w)
	}
	netPol, err := pipeline.NetInput(st, o.net, interactive)
	if err != nil {
		return exitSbxError, err
	}
	// sbx run has no limits unless flags or settings set them.
	lim, err := pipeline.ResolveLimits(st, o.limits, pipeline.RunLimits{})
	if err != nil {
		return exitSbxError, err
	}
	if o.printPolicy {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return 0, enc.Encode(struct {
			FS  *fsrules.Policy     `json:"filesystem"`
			Net *pipeline.NetPolicy `json:"network"`
		}{pol, netPol})
	}
	var audit *auditLog
	if o.audit != "" {
		if audit, err = openAudit(o.audit); err != nil {
			return exitSbxError, err
		}
		defer audit.Close()
	}

	masked, err := creds.MaskEnv(commandEnv(os.Environ()), pipeline.CredentialsConfig(st))
	if err != nil {
		return exitSbxError, err
	}
	env := masked.Env
	if len(masked.Secrets) > 0 {
		var names []string
		for _, s := range masked.Secrets {
			names = append(names, fmt.Sprintf("%s (%s)", s.Name, s.Mode))
		}
		fmt.Fprintf(stderr, "sbx: secret variables kept from the sandbox: %s\n", strings.Join(names, ", "))
	}
	redactor := creds.NewRedactor(masked.Secrets)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	if o.unsandboxed {
		fmt.Fprintln(stderr, "sbx: warning: --unsandboxed: running WITHOUT a sandbox")
		if lim.Limits != (pipeline.Limits{}) || lim.MaxOutput > 0 {
			return exitSbxError, errors.New("resource limits need the sandbox; --unsandboxed honours only --timeout")
		}
		return runUnsandboxed(ctx, argv, env, cwd, lim.Timeout, stdin, stdout, stderr)
	}

	b := newBackend(st.BwrapPath.V, pipeline.StateDir(os.Getenv, home))
	b.platformSettings(st, stderr)
	b.setSecrets(masked.Secrets)
	// What sbx hands back is redacted; a terminal is passed through as is
	// (the command never holds a real value to print).
	if !isTerminalW(stdout) {
		rw := redactor.Writer(stdout)
		defer rw.Close()
		stdout = rw
	}
	if !isTerminalW(stderr) {
		rw := redactor.Writer(stderr)
		defer rw.Close()
		stderr = rw
	}
	if audit != nil {
		b.setAudit(audit)
	}
	if !netPol.Strict && interactive {
		b.setAsk((&ttyAsker{decided: map[string]bool{}}).ask)
	}
	cmdOut, cmdErr := stdout, stderr
	var oc *outputCap
	if lim.MaxOutput > 0 {
		oc = &outputCap{max: lim.MaxOutput}
		cmdOut, cmdErr = oc.wrap(stdout), oc.wrap(stderr)
	}
	res, err := b.executor().Run(ctx, &pipeline.Spec{
		Argv: argv, Env: env, Dir: cwd, FS: pol, Net: netPol, Timeout: lim.Timeout, Limits: lim.Limits, Discard: o.tx.discard,
	}, pipeline.Stdio{Stdin: stdin, Stdout: cmdOut, Stderr: cmdErr})
	if err != nil {
		if errors.Is(err, pipeline.ErrUnavailable) {
			fi := st.FailIfUnavailable
			if fi.Set && !fi.V {
				return exitSbxError, fmt.Errorf("%w\nsandbox.failIfUnavailable is false in %s, but sbx runs without a sandbox only with --unsandboxed; run \"sbx doctor\" for the cause", err, fi.File.Path)
			}
			return exitSbxError, fmt.Errorf("%w\nnothing was run; \"sbx doctor\" explains what this host lacks", err)
		}
		return exitSbxError, err
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "sbx: warning: %s\n", w)
	}
	for _, l := range res.Changes.Lines() {
		fmt.Fprintf(stderr, "sbx: %s\n", l)
	}
	if audit != nil {
		audit.changes(res.Changes)
	}
	if oc != nil {
		if n := oc.note(); n != "" {
			fmt.Fprintf(stderr, "sbx: %s\n", n)
		}
	}
	if res.LimitHit != "" {
		fmt.Fprintf(stderr, "sbx: limit reached: %s\n", res.LimitHit)
	}
	if audit != nil {
		if res.LimitHit != "" {
			audit.limit(res.LimitHit, res.ExitCode)
		}
		if res.TimedOut {
			audit.limit(fmt.Sprintf("wall clock (--timeout %s)", lim.Timeout), exitTimeout)
		}
		if oc != nil && oc.note() != "" {
			audit.limit(oc.note(), res.ExitCode)
		}
	}
	if res.TimedOut {
		fmt.Fprintf(stderr, "sbx: timed out after %s (--timeout); the sandbox and every process in it were killed\n", lim.Timeout)
		return exitTimeout, nil
	}
	if res.Changes.Incomplete() {
		fmt.Fprintf(stderr, "sbx: not every change the command made reached the host (named above); the command itself exited with status %d\n", res.ExitCode)
		return exitNotApplied, nil
	}
	return res.ExitCode, nil
}

func absOrEmpty(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return ""
}

// shellPath returns bash if the host has it, else sh.
func shellPath() string {
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash"
	}
	return "/bin/sh"
}

// commandEnv is the command's environment: sbx's own, with TMPDIR pointing
// at the sandbox's private /tmp.
func commandEnv(environ []string) []string {
	out := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if strings.HasPrefix(kv, "TMPDIR=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "TMPDIR=/tmp")
}

// runUnsandboxed runs the command directly, for --unsandboxed.
func runUnsandboxed(ctx context.Context, argv, env []string, dir string, timeout time.Duration, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 127, err
	}
	go func() {
		for s := range sigs {
			_ = syscall.Kill(-cmd.Process.Pid, s.(syscall.Signal))
		}
	}()
	err := cmd.Wait()
	if ctx.Err() == context.DeadlineExceeded {
		fmt.Fprintf(stderr, "sbx: timed out after %s\n", timeout)
		return exitTimeout, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, err
}
