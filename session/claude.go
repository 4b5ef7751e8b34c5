package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// ClaudeCall is a Bash tool call as Claude Code hands it to its
// CLAUDE_CODE_SHELL_PREFIX command: `PREFIX 'SCRIPT && pwd -P >| CWDFILE'`.
type ClaudeCall struct {
	// Script is the shell string before Claude Code's working-directory
	// report: its snapshot, then `eval 'COMMAND' < /dev/null`.
	Script string
	// CwdFile is where Claude Code reads the working directory back after
	// the call ($TMPDIR/claude-XXXX-cwd).
	CwdFile string
}

// claudeCallRE matches the end Claude Code puts on every Bash call. The
// model's command sits inside the quoted eval before it, so the tail, and
// the file it names, are Claude Code's own.
var claudeCallRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?s)\A(.+) && pwd -P >\| (/[^\s'"\\;&|<>$` + "`" + `]*/claude-[0-9a-f]{1,64}-cwd)\z`)
})

// ParseClaudeCall recognises a Bash tool call of Claude Code; ok is false
// for anything else (a hook command, an MCP server).
func ParseClaudeCall(s string) (c ClaudeCall, ok bool) {
	m := claudeCallRE().FindStringSubmatch(s)
	if m == nil || !strings.Contains(m[1], "eval ") {
		return ClaudeCall{}, false
	}
	return ClaudeCall{Script: m[1], CwdFile: filepath.Clean(m[2])}, true
}

// ClaudeProject finds the project Claude Code runs in, which stays the
// workspace whatever the call's working directory: the working directory
// of the nearest ancestor process that is Claude Code (its executable is
// CLAUDE_CODE_EXECPATH, or was until an update replaced the file; its own
// directory never moves with cd), else CLAUDE_PROJECT_DIR (set for hooks).
// ok is false when neither tells: the caller must be given the workspace;
// the call's own directory, which the model moves, is never taken for it.
func ClaudeProject(getenv func(string) string) (dir string, ok bool) {
	if exe := getenv("CLAUDE_CODE_EXECPATH"); filepath.IsAbs(exe) {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		for pid, n := os.Getppid(), 0; pid > 1 && n < 64; pid, n = parentOf(pid), n+1 {
			proc := "/proc/" + strconv.Itoa(pid)
			pexe, err := os.Readlink(proc + "/exe")
			if err != nil || (strings.TrimSuffix(pexe, " (deleted)") != exe && !sameFile(pexe, exe)) {
				continue
			}
			if cwd, err := os.Readlink(proc + "/cwd"); err == nil && filepath.IsAbs(cwd) {
				return cwd, true
			}
		}
	}
	if d := getenv("CLAUDE_PROJECT_DIR"); filepath.IsAbs(d) {
		return d, true
	}
	return "", false
}

// parentOf is the parent of a process (0 when it is gone).
func parentOf(pid int) int {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// RunClaudeCall runs a Claude Code Bash call in the sandbox, in the
// session opened from o (DecidedUpstream: Claude Code's rules and hooks
// have run), with dir as its working directory, and reports the working
// directory it ends in to Claude Code's file, so `cd` persists. The
// report goes through a folder of its own, a writable root of the call;
// the sandbox's /tmp is private.
func RunClaudeCall(ctx context.Context, o Options, call ClaudeCall, dir string, stdio pipeline.Stdio) (*Outcome, error) {
	report, err := os.MkdirTemp("", "sbx-claude-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(report)
	// A writable root: what the sandbox writes there is staged and
	// merged (counted by the disk budget), not written to the host's disk
	// directly.
	o.FS.AllowWrite = append(slices.Clip(o.FS.AllowWrite), report)
	o.DecidedUpstream = true
	s, err := Open(o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	script := call.Script + " && pwd -P >| " + filepath.Join(report, "cwd")
	out, err := s.Run(ctx, Command{Shell: script, Dir: dir}, stdio)
	if err != nil {
		return nil, err
	}
	if err := copyCwd(filepath.Join(report, "cwd"), call.CwdFile); err != nil {
		return out, fmt.Errorf("the working directory cannot be reported to Claude Code: %w", err)
	}
	return out, nil
}

// copyCwd copies the sandbox's report (an absolute path, one line) to
// Claude Code's file; no report (the command failed) writes nothing.
func copyCwd(from, to string) error {
	f, err := os.OpenFile(from, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return errors.New("the report is not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, 4097))
	if err != nil {
		return err
	}
	line := strings.TrimSuffix(string(b), "\n")
	if len(b) > 4096 || !filepath.IsAbs(line) || strings.IndexFunc(line, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return fmt.Errorf("the report %q is not one absolute path", line)
	}
	if fi, err := os.Stat(line); err != nil || !fi.IsDir() {
		return fmt.Errorf("the working directory %q is not a directory on the host", line)
	}
	w, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := w.WriteString(line + "\n"); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// Inside reports whether this process runs inside an sbx sandbox (Linux:
// the marker and the sandbox's own init; never on macOS, where a nested
// sandbox is refused by the kernel instead).
func Inside(getenv func(string) string) bool { return insideSandbox(getenv) }
