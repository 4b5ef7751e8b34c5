package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/session"
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
	summary     string
	debug       bool
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
	f.StringVar(&o.audit, "audit", "", "append every decision (gate, run, network, refused changes, limits) to `FILE` as JSON Lines")
	f.StringVar(&o.summary, "summary", "", "write the run's outcome to `FILE` as one JSON object (for CI)")
	registerLimits(f, &o.limits, true)
	f.BoolVar(&o.unsandboxed, "unsandboxed", false, "run WITHOUT any sandbox (explicit opt-out)")
	f.BoolVar(&o.printPolicy, "print-policy", false, "print the compiled policy as JSON and exit without running")
	f.BoolVar(&o.debug, "debug", false, "print the bubblewrap command line and how long each phase of the start-up took, on stderr")
	return f
}

func cmdRun(args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var o runOpts
	f := runFlags(&o)
	f.SetOutput(stderr)
	setUsage(f, stderr)
	if err := f.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, nil
		}
		return 2, flagError(f, err)
	}
	c := session.Command{Shell: o.shell, Argv: f.Args()}
	switch {
	case f.Changed("command") && len(c.Argv) > 0:
		return 2, &usageError{"give either -c 'SHELL STRING' or -- CMD ARGS, not both"}
	case !f.Changed("command") && len(c.Argv) == 0:
		return 2, &usageError{"run: no command given"}
	}
	opts := o.gateFlags.options(stderr, session.IsTerminal(stdin))
	opts.FS, opts.Net, opts.Limits, opts.AuditFile = o.fs, o.net, o.limits, o.audit
	opts.FS.HomeWorkspace, opts.Discard, opts.Unsandboxed = o.tx.homeWorkspace, o.tx.discard, o.unsandboxed
	if opts.Interactive {
		opts.NetAsk = (&ttyAsker{decided: map[string]bool{}}).ask
	}
	ctx := pipeline.WithSignalsKept(context.Background())
	var tr *pipeline.Trace
	if o.debug {
		tr = pipeline.NewTrace(stderr)
		ctx = pipeline.WithTrace(ctx, tr)
	}
	s, err := session.Open(opts)
	if err != nil {
		return exitSbxError, err
	}
	defer s.Close()
	tr.Mark("session: settings loaded")
	if o.printPolicy {
		pol, err := s.Policy()
		if err != nil {
			return exitSbxError, err
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return 0, enc.Encode(pol)
	}
	start := time.Now()
	code, out, err := runCommand(ctx, s, c, o.unsandboxed, pipeline.Stdio{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	tr.Report()
	if o.summary != "" {
		sum := s.Summarize(c.String(), out, err, time.Since(start))
		if werr := writeJSONFile(o.summary, sum); werr != nil {
			return exitSbxError, fmt.Errorf("--summary: %w (the command exited with status %d)", werr, code)
		}
	}
	return code, err
}

// writeJSONFile replaces path with v as indented JSON, mode 0600.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

// printRefusals names on stderr what did not happen as the command asked:
// refused or lost changes, blocked hosts, the limit that stopped it.
func printRefusals(stderr io.Writer, out *session.Outcome) {
	for _, l := range out.Changes.Lines() {
		fmt.Fprintf(stderr, "sbx: %s\n", l)
	}
	for _, l := range out.Blocked {
		fmt.Fprintf(stderr, "sbx: %s\n", l)
	}
	if out.LimitHit != "" {
		fmt.Fprintf(stderr, "sbx: limit reached: %s\n", out.LimitHit)
	}
}

// runCommand runs c in the session and turns the outcome into sbx run's
// stderr lines and exit status; the outcome (nil when nothing ran) is
// returned for the summary.
func runCommand(ctx context.Context, s *session.Session, c session.Command, unsandboxed bool, stdio pipeline.Stdio) (int, *session.Outcome, error) {
	stderr := stdio.Stderr
	names, err := s.MaskedSecrets()
	if err != nil {
		return exitSbxError, nil, err
	}
	if len(names) > 0 {
		fmt.Fprintf(stderr, "sbx: secrets kept from the sandbox: %s\n", strings.Join(names, ", "))
	}
	if unsandboxed {
		fmt.Fprintln(stderr, "sbx: warning: --unsandboxed: the command runs WITHOUT a sandbox if the gate allows it")
	}
	out, err := s.Run(ctx, c, stdio)
	if err != nil {
		return exitSbxError, nil, err
	}
	if out.TimedOut {
		// Its reader may be the one that stopped reading the command's
		// output: sbx still says why it stopped, but does not wait on it.
		stderr = &giveUpWriter{w: stderr, d: time.Second}
	}
	if out.Rewritten != "" {
		fmt.Fprintf(stderr, "sbx: a hook rewrote the command to: %s\n", out.Rewritten)
	}
	for _, w := range out.Warnings {
		fmt.Fprintf(stderr, "sbx: warning: %s\n", w)
	}
	printRefusals(stderr, out)
	switch {
	case out.TimedOut:
		fmt.Fprintf(stderr, "sbx: timed out after %s (--timeout); the sandbox and every process in it were killed%s\n", out.Timeout, timedOutWrites(out.Changes))
		return exitTimeout, out, nil
	case out.Changes.Incomplete():
		fmt.Fprintf(stderr, "sbx: not every change the command made reached the host (named above); the command itself exited with status %d\n", out.ExitCode)
		return exitNotApplied, out, nil
	}
	return out.ExitCode, out, nil
}

// timedOutWrites says what became of a timed-out command's writes.
func timedOutWrites(c *pipeline.Changes) string {
	switch {
	case c == nil: // written directly
		return ""
	case c.Discarded:
		return "; nothing was applied (--discard)"
	}
	return "; what it had written by then was merged, as at any end"
}

// giveUpWriter passes writes on until one is not taken within d (a full
// pipe whose reader does not read); that one and every later one are
// dropped (the stuck one goes on in the background until the reader takes
// it or goes away).
type giveUpWriter struct {
	w     io.Writer
	d     time.Duration
	stuck bool
}

func (g *giveUpWriter) Write(p []byte) (int, error) {
	if g.stuck {
		return 0, errReaderStuck
	}
	p = bytes.Clone(p) // the caller may reuse p once this returns
	done := make(chan error, 1)
	go func() {
		_, err := g.w.Write(p)
		done <- err
	}()
	t := time.NewTimer(g.d)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return 0, err
		}
		return len(p), nil
	case <-t.C:
		g.stuck = true
		return 0, errReaderStuck
	}
}

var errReaderStuck = errors.New("the reader took nothing for a while")
