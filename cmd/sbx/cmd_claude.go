package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/session"
)

type claudeShellFlags struct {
	workspace    string
	settings     []string
	trustProject bool
}

// cmdClaudeShell is Claude Code's CLAUDE_CODE_SHELL_PREFIX: Claude Code
// runs `sbx --claude-shell 'STRING'` for every Bash call (after its own
// rules and hooks decided), for its hook commands and its MCP stdio
// servers. A Bash call runs in the sandbox with no second decision; a hook
// or an MCP server (CLAUDE_PROJECT_DIR set, CLAUDE_CODE_EXECPATH not) runs
// as Claude Code would run it; anything else (a Bash call in a format this
// sbx does not know) runs in the sandbox too.
func cmdClaudeShell(args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var o claudeShellFlags
	f := pflag.NewFlagSet("claude-shell", pflag.ContinueOnError)
	f.SetInterspersed(false)
	f.SetOutput(stderr)
	f.StringVar(&o.workspace, "workspace", "", "the project `DIR` (default: Claude Code's own working directory)")
	f.StringArrayVar(&o.settings, "settings", nil, "extra settings `FILE` (or inline JSON); repeatable")
	f.BoolVar(&o.trustProject, "trust-project", false, "honour project settings that loosen the sandbox")
	if err := f.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, nil
		}
		return 2, flagError(f, err)
	}
	if f.NArg() != 1 {
		return 2, &usageError{"claude-shell: want one shell string (CLAUDE_CODE_SHELL_PREFIX is \"/path/to/sbx --claude-shell\"; sbx claude setup prints it)"}
	}
	script := f.Arg(0)
	call, isBash := session.ParseClaudeCall(script)
	hook := !isBash && os.Getenv("CLAUDE_PROJECT_DIR") != "" && os.Getenv("CLAUDE_CODE_EXECPATH") == ""
	if session.Inside(os.Getenv) || hook {
		// Already in a sandbox (nothing nests), or one of the user's own
		// hooks: run it as Claude Code would without sbx.
		return exitSbxError, syscall.Exec(session.ShellPath(), []string{session.ShellPath(), "-c", script}, os.Environ())
	}
	cwd, err := os.Getwd()
	if err != nil {
		return exitSbxError, err
	}
	workspace := o.workspace
	if workspace == "" {
		var ok bool
		if workspace, ok = session.ClaudeProject(os.Getenv); !ok {
			return exitSbxError, errors.New("cannot tell which project Claude Code runs in (no Claude Code process above this one); run \"sbx claude setup --write\" in the project, which names it (--claude-shell=DIR)")
		}
	}
	notices := newNotices(stderr)
	opts := session.Options{Dir: workspace, Settings: o.settings, Claude: true, TrustProject: o.trustProject,
		DecidedUpstream: true, Warn: notices.once,
		DefaultLimits: pipeline.RunLimits{Limits: pipeline.DefaultToolLimits().Limits}}
	stdio := pipeline.Stdio{Stdin: stdin, Stdout: stdout, Stderr: stderr}
	var out *session.Outcome
	if isBash {
		out, err = session.RunClaudeCall(pipeline.WithSignalsKept(context.Background()), opts, call, cwd, stdio)
	} else {
		out, err = runUpstream(opts, script, cwd, stdio)
	}
	if out == nil {
		return exitSbxError, err
	}
	if err != nil {
		fmt.Fprintf(stderr, "sbx: %v\n", err)
	}
	return claudeOutcome(out, notices, stderr), nil
}

// runUpstream runs a shell string that is not a Bash call in the sandbox.
func runUpstream(o session.Options, script, dir string, stdio pipeline.Stdio) (*session.Outcome, error) {
	s, err := session.Open(o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Run(pipeline.WithSignalsKept(context.Background()), session.Command{Shell: script, Dir: dir}, stdio)
}

// claudeOutcome prints what the model needs to know about the call (what
// the sandbox refused, limits, lost changes) and returns the exit status;
// warnings about the host or the settings go out once per Claude Code
// session.
func claudeOutcome(out *session.Outcome, n *notices, stderr io.Writer) int {
	for _, w := range out.Warnings {
		n.once(w)
	}
	printRefusals(stderr, out)
	if out.Changes.Incomplete() {
		fmt.Fprintf(stderr, "sbx: not every change reached the host (named above); the command exited with status %d\n", out.ExitCode)
		return exitNotApplied
	}
	return out.ExitCode
}

// notices prints a warning once per Claude Code session
// (CLAUDE_CODE_SESSION_ID), remembered in sbx's state directory; without
// a session id, every time.
type notices struct {
	w   io.Writer
	dir string
}

var sessionIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\A[A-Za-z0-9-]{1,64}\z`) })

func newNotices(w io.Writer) *notices {
	n := &notices{w: w}
	if id := os.Getenv("CLAUDE_CODE_SESSION_ID"); sessionIDRE().MatchString(id) {
		if home, err := os.UserHomeDir(); err == nil {
			n.dir = filepath.Join(pipeline.StateDir(os.Getenv, home), "claude-notices", id)
		}
	}
	return n
}

func (n *notices) once(msg string) {
	if n.dir != "" {
		sum := sha256.Sum256([]byte(msg))
		if os.MkdirAll(n.dir, 0o700) == nil {
			f, err := os.OpenFile(filepath.Join(n.dir, hex.EncodeToString(sum[:8])), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if errors.Is(err, os.ErrExist) {
				return // said already in this session
			}
			if err == nil {
				f.Close()
			}
		}
	}
	fmt.Fprintf(n.w, "sbx: warning: %s\n", msg)
}
