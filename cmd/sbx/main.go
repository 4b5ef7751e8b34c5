// Command sbx runs untrusted commands in an OS-level sandbox.
//
// This is not Docker's agent-sandbox CLI of the same name.
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	_ "github.com/sbx-sandbox/sbx/internal/prefault"

	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
	"github.com/sbx-sandbox/sbx/session"
)

// Exit statuses of sbx itself; a command's own status passes through.
const (
	exitNotApplied = 122 // some of the command's changes conflicted or were lost (named on stderr)
	exitTimeout    = 124 // --timeout killed the command, as timeout(1)
	exitSbxError   = 125 // sbx could not run the command at all
)

// usageError is a bad command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// commands are sbx's subcommands, for "did you mean".
var commands = []string{"run", "check", "tool", "serve", "mcp", "probe", "doctor", "claude", "completion", "version", "help"}

// flagError turns a flag parse error into a usage error, with the closest
// flag for an unknown one.
func flagError(f *pflag.FlagSet, err error) error {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return &usageError{msg}
	}
	var known []string
	f.VisitAll(func(fl *pflag.Flag) { known = append(known, fl.Name) })
	if s := settings.Suggest(name, known); s != "" {
		msg += " (did you mean --" + s + "?)"
	}
	return &usageError{msg}
}

func main() {
	// The in-sandbox init and the helpers dispatch before anything else:
	// no flag parsing, no settings.
	session.Reexec()
	oneProc()
	closeLeakedFDs()
	// sbx's writes to a pipe whose reader is gone fail with EPIPE instead
	// of ending sbx by SIGPIPE (Go's default on descriptors 1 and 2): the
	// relay of the command's output then closes the command's end, which
	// gets SIGPIPE as it would writing there itself, and sbx goes on to
	// merge and exit with the command's status. A handler, not an ignored
	// signal: the command starts with SIGPIPE at its default.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	// The standard logger is the libraries' (net/http's transport logs an
	// upstream's unsolicited bytes with it, quoting them, real values of
	// bound credentials included): nothing of it reaches sbx's stderr,
	// which an agent shows its model. sbx's own messages do not use it.
	log.SetOutput(io.Discard)
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// oneProc runs sbx's own process on one P unless GOMAXPROCS is set. Its
// work is waiting and relaying (the proxy's goroutines hand each request
// and response to one another): with more Ps, every hand-off wakes an idle
// thread. Measured on 2 vCPUs through the HTTP proxy from a sandbox
// (three runs each, interleaved): 2,000 keep-alive GETs of 1 KiB
// 1,075-1,095 -> 750-850 ms, 1,000 new connections 1,345-1,355 ->
// 1,085-1,250 ms; 100 MiB downloads, warm and cold starts unchanged.
// The sandbox's helper and init dispatch before this (session.Reexec) and
// keep the default, and nothing of it reaches the command's environment.
func oneProc() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

const usage = `sbx: run untrusted commands in an OS-level sandbox

Usage:
  sbx run [flags] -- CMD [ARGS...]   run a command in the sandbox
  sbx run [flags] -c 'SHELL STRING'  run a shell string with bash (or sh)
  sbx check --tool NAME --input JSON  the permission decision only, with the rule and its source
  sbx tool < tool_use.json           one tool_use in, one tool_result out (Bash, sandboxed)
  sbx serve                          JSON Lines: tool_use per line in, tool_result per line out
  sbx mcp                            an MCP server (stdio): a sandboxed bash tool and read_file
  sbx probe [--json] [--only NAMES]  prove on this host that the sandbox holds, with evidence
  sbx claude setup [--user] [--write]  run every Bash call of Claude Code in sbx (one setting)
  sbx --claude-shell 'STRING'        what that setting runs (CLAUDE_CODE_SHELL_PREFIX)
  sbx doctor [--json] [--clean]      what this host supports, and why not
  sbx completion bash|zsh|fish      a shell completion script
  sbx help COMMAND                   that command's flags (as sbx COMMAND --help)
  sbx version

Run "sbx run --help" for the flags.
`

// Main runs sbx with args (without the program name) and returns the exit
// status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	code := 0
	// Claude Code splits its shell prefix only before its last word that
	// starts with a dash: the workspace rides in that one word.
	if ws, ok := strings.CutPrefix(args[0], "--claude-shell="); ok {
		args = append([]string{"--claude-shell", "--workspace", ws}, args[1:]...)
	}
	switch args[0] {
	case "run":
		code, err = cmdRun(args[1:], stdin, stdout, stderr)
	case "doctor":
		code, err = cmdDoctor(args[1:], stdout, stderr)
	case "check":
		code, err = cmdCheck(args[1:], stdout, stderr)
	case "tool":
		code, err = cmdTool(args[1:], stdin, stdout, stderr)
	case "serve":
		code, err = cmdServe(args[1:], stdin, stdout, stderr)
	case "probe":
		code, err = cmdProbe(args[1:], stdout, stderr)
	case "mcp":
		code, err = cmdMCP(args[1:], stdin, stdout, stderr)
	case "claude":
		code, err = cmdClaude(args[1:], stdout, stderr)
	case "claude-shell", "--claude-shell":
		code, err = cmdClaudeShell(args[1:], stdin, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "sbx", versionString())
		return 0
	case "help", "-h", "--help":
		if len(args) > 1 && slices.Contains(commands, args[1]) && args[1] != "help" {
			return Main([]string{args[1], "--help"}, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	case "completion":
		code, err = cmdCompletion(args[1:], stdout, stderr)
	default:
		msg := fmt.Sprintf("unknown command %q", args[0])
		if s := settings.Suggest(args[0], commands); s != "" {
			msg += " (did you mean " + s + "?)"
		}
		err = &usageError{msg}
	}
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "sbx: %v\n\n%s", err, usage)
			return 2
		}
		fmt.Fprintf(stderr, "sbx: %v\n", err)
		var ie *pipeline.InterruptedError
		switch {
		case errors.As(err, &ie):
			code = ie.ExitCode() // as if the signal had ended sbx
		case code == 0:
			code = exitSbxError
		}
	}
	return code
}

// version is set at build time with -ldflags "-X main.version=…";
// otherwise the module version of `go install …@v1.2.3` is used.
var version = "dev"

// versionString is the version, with the commit and whether the tree had
// changes, from the build info.
func versionString() string {
	v := version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			rev = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev != "" && !strings.Contains(v, rev) {
		v += " (commit " + rev + dirty + ")"
	}
	return v + " " + bi.GoVersion
}
