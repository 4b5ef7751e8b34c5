package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/session"
)

// toolFlags are sbx tool's and sbx serve's flags.
type toolFlags struct {
	gateFlags
	output string
	audit  string
	limits pipeline.LimitFlags
	tx     txFlags
	debug  bool
	// separateStreams keeps stdout and stderr apart (MCP's structured
	// content); --output structured does too.
	separateStreams bool
}

// flags is the flag set of sbx tool, serve and mcp, bound to t.
func (t *toolFlags) flags(name string) *pflag.FlagSet {
	f := pflag.NewFlagSet(name, pflag.ContinueOnError)
	t.register(f)
	f.StringVar(&t.output, "output", "result", "`FORMAT`: result (the tool_result) or structured (plus stdout, stderr, exit code, the decision trail)")
	f.StringVar(&t.audit, "audit", "", "append every decision (gate, run, network, refused changes, limits) to `FILE` as JSON Lines")
	registerLimits(f, &t.limits, false)
	if name != "mcp" {
		f.BoolVar(&t.debug, "debug", false, "print on stderr, for each call, the bubblewrap command line and how long each phase of the start-up took")
	}
	registerTx(f, &t.tx)
	return f
}

func (t *toolFlags) parse(name string, args []string, stderr io.Writer) (int, error) {
	f := t.flags(name)
	f.SetOutput(stderr)
	setUsage(f, stderr)
	if err := f.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, err
		}
		return 2, flagError(f, err)
	}
	if t.output != "result" && t.output != "structured" {
		return 2, &usageError{"--output must be result or structured"}
	}
	return 0, nil
}

// open opens the session for tool calls: prompts on the controlling
// terminal when there is one, limits defaulting to a tool call's.
// A long-lived session (warm) launches each next sandbox ahead.
func (t *toolFlags) open(stderr io.Writer, warm bool) (*session.Session, error) {
	opts := t.gateFlags.options(stderr, hasTTY())
	opts.Warm = warm
	opts.Limits, opts.DefaultLimits, opts.AuditFile = t.limits, pipeline.DefaultToolLimits(), t.audit
	opts.FS.HomeWorkspace, opts.Discard = t.tx.homeWorkspace, t.tx.discard
	// Structured output reports stdout and stderr apart; the tool_result's
	// text alone is one stream, in order, as Claude Code's Bash.
	opts.SeparateStreams = t.output == "structured" || t.separateStreams
	return session.Open(opts)
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
	raw, err := io.ReadAll(io.LimitReader(stdin, maxLine+1))
	if err != nil {
		return exitSbxError, err
	}
	if len(raw) > maxLine {
		writeResult(stdout, &pipeline.ToolResult{Type: "tool_result", Content: "Error: the tool_use is larger than 16 MiB; nothing was run", IsError: true}, false)
		return 1, nil
	}
	s, err := t.open(stderr, false)
	if err != nil {
		// Even a setup failure answers with a tool_result for the same id.
		var id struct {
			ID string `json:"id"`
		}
		json.Unmarshal(raw, &id)
		writeResult(stdout, &pipeline.ToolResult{Type: "tool_result", ToolUseID: id.ID, Content: "Error: sbx: " + err.Error(), IsError: true}, false)
		return 0, err
	}
	defer s.Close()
	res := t.call(pipeline.WithSignalsKept(context.Background()), s, raw, stderr)
	if err := writeResult(stdout, res, t.output == "structured"); err != nil {
		return exitSbxError, err
	}
	switch {
	case res.Invalid:
		return 1, nil // the error result says why; nothing was run
	case res.Stopped != 0:
		return 128 + int(res.Stopped), nil // as sbx run, once the result is out
	}
	return 0, nil
}

// openServer opens a long-lived session (serve, mcp) and prepares it, so
// that bad settings fail at start-up and the first call's sandbox is
// launched; the caller closes it.
func (t *toolFlags) openServer(stderr io.Writer) (*session.Session, error) {
	s, err := t.open(stderr, true)
	if err != nil {
		return nil, err
	}
	if err := s.Prepare(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// call runs one tool_use, traced on stderr with --debug.
func (t *toolFlags) call(ctx context.Context, s *session.Session, raw []byte, stderr io.Writer) *pipeline.ToolResult {
	var tr *pipeline.Trace
	if t.debug {
		tr = pipeline.NewTrace(stderr)
		ctx = pipeline.WithTrace(ctx, tr)
	}
	res := s.Tool(ctx, raw)
	tr.Report()
	return res
}

// maxLine bounds one tool_use (sbx tool's stdin, a line of sbx serve).
const maxLine = 16 << 20

// cmdServe handles JSON Lines: one tool_use per line in, one tool_result per
// line out, in order; approvals "for the session" last until stdin closes.
// SIGINT, SIGTERM or SIGHUP (its terminal gone) ends it: a call under way
// is stopped and answered, the warm sandbox is thrown away.
func cmdServe(args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var t toolFlags
	if code, err := t.parse("serve", args, stderr); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, nil
		}
		return code, err
	}
	s, err := t.openServer(stderr)
	if err != nil {
		return exitSbxError, err
	}
	defer s.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	lines := readLines(stdin)
	w := bufio.NewWriter(stdout)
	for {
		var l line
		select {
		case l = <-lines:
		case <-ctx.Done():
			return 0, nil
		}
		if l.err != nil {
			if errors.Is(l.err, io.EOF) {
				return 0, nil
			}
			return exitSbxError, l.err
		}
		var res *pipeline.ToolResult
		switch {
		case l.tooLong:
			// Answer it, and go on with the next line.
			res = &pipeline.ToolResult{Type: "tool_result", Content: "Error: the tool_use is larger than 16 MiB; nothing was run", IsError: true}
		case len(bytes.TrimSpace(l.text)) == 0:
			continue
		default:
			res = t.call(ctx, s, l.text, stderr)
		}
		if err := writeResult(w, res, t.output == "structured"); err != nil {
			return exitSbxError, err
		}
		if err := w.Flush(); err != nil {
			// Nobody reads the results any more: run nothing else.
			return exitSbxError, fmt.Errorf("writing a tool_result: %w", err)
		}
		if ctx.Err() != nil {
			return 0, nil
		}
	}
}

// line is one line of sbx serve's input (or the error that ended it).
type line struct {
	text    []byte
	tooLong bool
	err     error
}

// readLines reads r's lines on a goroutine of its own, one ahead of the
// caller, until an error (EOF included), which is the last it sends.
func readLines(r io.Reader) <-chan line {
	out := make(chan line)
	go func() {
		lr := &lineReader{r: bufio.NewReaderSize(r, 1<<20)}
		for {
			text, tooLong, err := lr.next()
			out <- line{text, tooLong, err}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// lineReader reads lines of at most maxLine bytes; a longer one is
// skipped to its end and reported as too long.
type lineReader struct{ r *bufio.Reader }

func (l *lineReader) next() (line []byte, tooLong bool, err error) {
	for {
		part, err := l.r.ReadSlice('\n')
		if len(line)+len(part) > maxLine {
			tooLong, line = true, nil
		} else if !tooLong {
			line = append(line, part...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && (len(line) > 0 || tooLong):
			return line, tooLong, nil
		case err != nil:
			return nil, false, err
		}
		return line, tooLong, nil
	}
}
