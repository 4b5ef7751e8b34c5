package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Probe statuses.
const (
	StatusPass           = "pass"
	StatusFail           = "fail"
	StatusNotImplemented = "not-implemented"
	// StatusLimited: this host cannot enforce some of what the probe
	// asks (resource limits without a cgroup); sbx refused those runs
	// and nothing ran, which the probe checked. Not a failure.
	StatusLimited = "limited"
)

// Check is one side effect verified from outside the sandbox.
type Check struct {
	What   string `json:"what"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Step is one tool call a probe made through the real pipeline (`sbx tool`
// as a separate process) and what it found.
type Step struct {
	Ran        string          `json:"ran"`        // the tool_use sent
	Flags      []string        `json:"flags"`      // sbx tool's flags
	Decision   string          `json:"decision"`   // from the structured output
	ToolResult json.RawMessage `json:"toolResult"` // the tool_result as received
	ExitStatus int             `json:"exitStatus"` // of the sbx process
	Checks     []Check         `json:"checks"`
	stderr     string
}

// ProbeResult is a probe's evidence.
type ProbeResult struct {
	Name   string  `json:"name"`
	Status string  `json:"status"`
	Detail string  `json:"detail,omitempty"`
	Steps  []*Step `json:"steps"`
}

// Probe proves one property of the sandbox on this host.
type Probe struct {
	Name        string
	Description string
	Run         func(ctx context.Context, p *ProbeEnv, res *ProbeResult)
}

// ProbeEnv is where probes run: the sbx binary, and a temporary folder
// holding a workspace and a home that every probe creates and removes.
type ProbeEnv struct {
	Sbx  string
	Root string
	WS   string
	Home string
}

// Probes returns every probe, in the order they run.
func Probes() []Probe {
	return []Probe{
		{"filesystem", "a write inside the workspace lands; writes to a denyWrite target, a git hook and a shell start-up file are refused by the merge, named, and stay absent", probeFilesystem},
		{"network", "with a strict empty allowlist a local server gets 0 hits; with its address allowed, exactly 1", probeNetwork},
		{"hook-deny", "a PreToolUse hook that denies a Read of a marker file: the tool is not called and the marker never appears", probeHookDeny},
		{"persistence", "shell start-up files and git hooks cannot be planted in the workspace", probePersistence},
		{"unix-sockets", "a host Unix socket cannot be connected to from the sandbox", probeUnixSockets},
		{"process-isolation", "host processes are invisible in the sandbox and nothing it starts survives it", probeProcesses},
		{"credential-masking", "a masked variable's real value is never visible and reaches only its bound host", probeCredentials},
		{"resource-limits", "a process flood stays under --max-procs, a memory balloon is stopped at --max-memory and a disk-filling loop at --max-disk; every result names the limit", probeLimits},
	}
}

// RunProbes runs the named probes (all when names is empty), each in its
// own temporary folder, removed afterwards.
func RunProbes(ctx context.Context, sbx string, names []string) ([]*ProbeResult, error) {
	return RunProbesProgress(ctx, sbx, names, nil)
}

// RunProbesProgress is RunProbes that calls done (when not nil) as each
// probe ends: its number from 1, how many run, and its result.
func RunProbesProgress(ctx context.Context, sbx string, names []string, done func(i, n int, r *ProbeResult)) ([]*ProbeResult, error) {
	var out []*ProbeResult
	var run []Probe
	for _, pr := range Probes() {
		if len(names) == 0 || contains(names, pr.Name) {
			run = append(run, pr)
		}
	}
	for _, pr := range run {
		root, err := os.MkdirTemp("", "sbx-probe-")
		if err != nil {
			return nil, err
		}
		env := &ProbeEnv{Sbx: sbx, Root: root, WS: filepath.Join(root, "ws"), Home: filepath.Join(root, "home")}
		os.MkdirAll(env.WS, 0o755)
		os.MkdirAll(env.Home, 0o755)
		res := &ProbeResult{Name: pr.Name}
		pr.Run(ctx, env, res)
		if res.Status == "" {
			res.Status = StatusPass
			for _, s := range res.Steps {
				for _, c := range s.Checks {
					if !c.OK {
						res.Status = StatusFail
					}
				}
			}
		}
		os.RemoveAll(root)
		out = append(out, res)
		if done != nil {
			done(len(out), len(run), res)
		}
	}
	return out, nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// call runs one tool_use through `sbx tool` in the probe's workspace.
func (p *ProbeEnv) call(ctx context.Context, tool string, input any, flags ...string) *Step {
	return p.callEnv(ctx, nil, tool, input, flags...)
}

// callEnv is call with extra environment variables for sbx.
func (p *ProbeEnv) callEnv(ctx context.Context, extraEnv []string, tool string, input any, flags ...string) *Step {
	in, _ := json.Marshal(input)
	tu, _ := json.Marshal(map[string]any{"type": "tool_use", "id": "toolu_probe_" + strconv.FormatInt(time.Now().UnixNano(), 36), "name": tool, "input": json.RawMessage(in)})
	st := &Step{Ran: string(tu), Flags: append([]string{"--non-interactive", "--output", "structured"}, flags...)}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.Sbx, append([]string{"tool"}, st.Flags...)...)
	cmd.Dir = p.WS
	cmd.Env = append([]string{"HOME=" + p.Home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"}, extraEnv...)
	cmd.Stdin = bytes.NewReader(tu)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		st.ExitStatus = ee.ExitCode()
	} else if err != nil {
		st.ExitStatus = -1
	}
	st.ToolResult = json.RawMessage(bytes.TrimSpace(stdout.Bytes()))
	st.stderr = stderr.String()
	var res struct {
		ToolUseID string `json:"tool_use_id"`
		Output    *struct {
			Decision *struct {
				Decision string `json:"decision"`
			} `json:"decision"`
		} `json:"output"`
	}
	if json.Unmarshal(st.ToolResult, &res) != nil {
		st.check("sbx tool printed one JSON tool_result", false, stdout.String()+stderr.String())
		return st
	}
	if res.Output != nil && res.Output.Decision != nil {
		st.Decision = res.Output.Decision.Decision
	}
	var sent struct{ ID string }
	json.Unmarshal(tu, &sent)
	st.check("the tool_result is paired with the same tool_use_id", res.ToolUseID == sent.ID, res.ToolUseID)
	st.check("the sbx process exited 0", st.ExitStatus == 0, stderr.String())
	return st
}

func (s *Step) check(what string, ok bool, detail string) {
	if len(detail) > 300 {
		detail = detail[:300] + "…"
	}
	s.Checks = append(s.Checks, Check{What: what, OK: ok, Detail: strings.TrimSpace(detail)})
}

func (s *Step) isError() bool {
	var r struct {
		IsError bool `json:"is_error"`
	}
	json.Unmarshal(s.ToolResult, &r)
	return r.IsError
}

func (s *Step) content() string {
	var r struct {
		Content string `json:"content"`
	}
	json.Unmarshal(s.ToolResult, &r)
	return r.Content
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func probeFilesystem(ctx context.Context, p *ProbeEnv, res *ProbeResult) {
	settings := `{"sandbox": {"filesystem": {"denyWrite": ["./protected.txt"]}}}`
	ok := p.call(ctx, "Bash", map[string]string{"command": "echo probe-content > inside.txt"}, "--mode", "bypassPermissions", "--settings", settings)
	data, _ := os.ReadFile(filepath.Join(p.WS, "inside.txt"))
	ok.check("the write inside the workspace succeeded", !ok.isError(), ok.content())
	ok.check("the file holds what was written", string(data) == "probe-content\n", string(data))
	res.Steps = append(res.Steps, ok)

	denied := p.call(ctx, "Bash", map[string]string{"command": "echo evil > protected.txt; mkdir -p a/.git/hooks; echo evil > a/.git/hooks/pre-commit; echo evil > .bashrc"},
		"--mode", "bypassPermissions", "--settings", settings)
	for _, f := range []string{"protected.txt", "a/.git/hooks/pre-commit", ".bashrc"} {
		denied.check("the tool_result names the refused "+f, strings.Contains(denied.content(), "refused to create "+filepath.Join(p.WS, f)), denied.content())
		denied.check(f+" does not exist afterwards", !exists(filepath.Join(p.WS, f)), "")
	}
	res.Steps = append(res.Steps, denied)
}

// countingServer is a local HTTP server on 127.0.0.1 with a hit counter.
func countingServer() (*http.Server, int, *atomic.Int32, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, 0, nil, err
	}
	var hits atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "probe-server-reached")
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return srv, ln.Addr().(*net.TCPAddr).Port, &hits, nil
}

func probeNetwork(ctx context.Context, p *ProbeEnv, res *ProbeResult) {
	srv, port, hits, err := countingServer()
	if err != nil {
		res.Status, res.Detail = StatusFail, err.Error()
		return
	}
	defer srv.Close()
	curl := fmt.Sprintf("curl -fsS -m 5 --noproxy '' http://127.0.0.1:%d/", port)
	strict := `{"sandbox": {"network": {"strictAllowlist": true}}}`
	blocked := p.call(ctx, "Bash", map[string]string{"command": curl}, "--settings", strict)
	time.Sleep(50 * time.Millisecond)
	blocked.check("the request is an error tool_result", blocked.isError(), blocked.content())
	blocked.check("the server's hit count is 0", hits.Load() == 0, fmt.Sprintf("hits=%d", hits.Load()))
	res.Steps = append(res.Steps, blocked)

	allowed := p.call(ctx, "Bash", map[string]string{"command": curl},
		"--settings", `{"sandbox": {"network": {"strictAllowlist": true, "allowedDomains": ["127.0.0.1"]}}}`)
	allowed.check("the request succeeds through the proxy", !allowed.isError() && strings.Contains(allowed.content(), "probe-server-reached"), allowed.content())
	allowed.check("the server's hit count is exactly 1", hits.Load() == 1, fmt.Sprintf("hits=%d", hits.Load()))
	res.Steps = append(res.Steps, allowed)
}

func probeHookDeny(ctx context.Context, p *ProbeEnv, res *ProbeResult) {
	marker := "sbx-probe-marker-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	file := filepath.Join(p.WS, "secret.txt")
	os.WriteFile(file, []byte(marker), 0o644)
	hook := filepath.Join(p.Root, "deny-read.sh")
	os.WriteFile(hook, []byte(`#!/bin/sh
cat >/dev/null
echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "probe hook: reading secret.txt is not allowed"}}'
`), 0o755)
	settings := fmt.Sprintf(`{"hooks": {"PreToolUse": [{"matcher": "Read", "hooks": [{"type": "command", "command": %q}]}]}}`, hook)
	st := p.call(ctx, "Read", map[string]string{"file_path": file}, "--settings", settings)
	st.check("the result is an error", st.isError(), st.content())
	st.check("the result carries the hook's reason", strings.Contains(st.content(), "probe hook: reading secret.txt is not allowed"), st.content())
	st.check("the marker never appears in the output", !strings.Contains(string(st.ToolResult), marker), "")
	st.check("the gate denied the call before the tool ran", st.Decision == "deny", "decision="+st.Decision)
	res.Steps = append(res.Steps, st)
}

func probePersistence(ctx context.Context, p *ProbeEnv, res *ProbeResult) {
	os.MkdirAll(filepath.Join(p.WS, ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(p.WS, ".git", "config"), []byte("[core]\n\tbare = false\n"), 0o644)
	os.WriteFile(filepath.Join(p.WS, ".bashrc"), []byte("# original\n"), 0o644)
	st := p.call(ctx, "Bash", map[string]string{"command": "echo evil >> .bashrc; echo evil > .profile; echo evil > .git/hooks/pre-commit; " +
		"echo '[core] fsmonitor = evil' >> .git/config; mkdir -p sub && echo evil > sub/.zshrc; true"}, "--mode", "bypassPermissions")
	bashrc, _ := os.ReadFile(filepath.Join(p.WS, ".bashrc"))
	config, _ := os.ReadFile(filepath.Join(p.WS, ".git", "config"))
	st.check("an existing .bashrc is unchanged", string(bashrc) == "# original\n", string(bashrc))
	st.check("a new .profile was not created", !exists(filepath.Join(p.WS, ".profile")), "")
	st.check("no git hook was planted", !exists(filepath.Join(p.WS, ".git", "hooks", "pre-commit")), "")
	st.check(".git/config is unchanged", string(config) == "[core]\n\tbare = false\n", string(config))
	st.check("a nested .zshrc did not stay in the workspace", !exists(filepath.Join(p.WS, "sub", ".zshrc")), "")
	res.Steps = append(res.Steps, st)
}

// countAccepts accepts on ln until it is closed, answers each connection
// with greeting (nil: nothing) and closes it; the count it returns is what
// a test checks from outside the sandbox.
func countAccepts(ln net.Listener, greeting []byte) *atomic.Int32 {
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			if greeting != nil {
				c.Write(greeting)
			}
			c.Close()
		}
	}()
	return &n
}

func probeUnixSockets(ctx context.Context, p *ProbeEnv, res *ProbeResult) {
	sock := filepath.Join(p.WS, "host.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		res.Status, res.Detail = StatusFail, err.Error()
		return
	}
	defer ln.Close()
	accepted := countAccepts(ln, nil)
	st := p.call(ctx, "Bash", map[string]string{"command": "curl -sS -m 5 --unix-socket " + sock + " http://x/"})
	time.Sleep(50 * time.Millisecond)
	st.check("the connection attempt fails", st.isError(), st.content())
	st.check("the host socket accepted 0 connections", accepted.Load() == 0, fmt.Sprintf("accepted=%d", accepted.Load()))
	res.Steps = append(res.Steps, st)
}

func probeProcesses(ctx context.Context, p *ProbeEnv, res *ProbeResult) {
	pid := strconv.Itoa(os.Getpid())
	hostMarker := "4" + pid + ".25"
	// The pattern does not contain the marker itself, so the grep (and the
	// shell running it) do not count.
	pattern := "[4]" + pid + "[.]25"
	host := exec.Command("sleep", hostMarker)
	if err := host.Start(); err != nil {
		res.Status, res.Detail = StatusFail, err.Error()
		return
	}
	defer func() { host.Process.Kill(); host.Wait() }()
	inner := "3" + strconv.Itoa(os.Getpid()) + ".75"
	// Linux: a pid namespace, so the host process must not be listed at
	// all. macOS has no such thing: Seatbelt must keep the command from
	// reading the host process's arguments and from signalling it.
	look := fmt.Sprintf("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c '%s'; test -e /proc/%d && echo host-pid-visible", pattern, host.Process.Pid)
	what := "the host process is invisible in the sandbox"
	if runtime.GOOS == "darwin" {
		look = fmt.Sprintf("ps -axww -o command= 2>/dev/null | grep -c '%s'; kill -0 %d 2>/dev/null && echo host-pid-visible", pattern, host.Process.Pid)
		what = "the host process's arguments cannot be read, nor the process signalled, from the sandbox"
	}
	st := p.call(ctx, "Bash", map[string]string{"command": look + fmt.Sprintf("; (setsid sleep %s &) ; nohup sleep %s >/dev/null 2>&1 & echo started", inner, inner)})
	st.check(what, strings.HasPrefix(strings.TrimSpace(st.content()), "0") && !strings.Contains(st.content(), "host-pid-visible"), st.content())
	deadline := time.Now().Add(5 * time.Second)
	for len(PidsWith(inner)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	st.check("nothing the command started survives the sandbox", len(PidsWith(inner)) == 0, fmt.Sprintf("pids=%v", PidsWith(inner)))
	res.Steps = append(res.Steps, st)
}

func probeCredentials(ctx context.Context, p *ProbeEnv, res *ProbeResult) {
	var mu sync.Mutex
	var received []string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		res.Status, res.Detail = StatusFail, err.Error()
		return
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	real := "sbxprobe-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-realsecret"
	settings := `{"sandbox": {"network": {"allowedDomains": ["127.0.0.1"]}, "credentials": {"envVars": {"PROBE_API_TOKEN": {"hosts": ["127.0.0.1"]}}}}}`
	st := p.callEnv(ctx, []string{"PROBE_API_TOKEN=" + real}, "Bash", map[string]string{"command": fmt.Sprintf(
		`echo "env: $PROBE_API_TOKEN"; env | grep PROBE_API_TOKEN; curl -fsS -m 5 --noproxy '' -H "Authorization: Bearer $PROBE_API_TOKEN" http://127.0.0.1:%d/`, port)},
		"--settings", settings)
	mu.Lock()
	got := append([]string(nil), received...)
	mu.Unlock()
	st.check("the sandbox saw a placeholder, not the value", strings.Contains(st.content(), "env: ") && !strings.Contains(st.content(), real), st.content())
	st.check("the bound host received the real value", len(got) == 1 && got[0] == "Bearer "+real, fmt.Sprintf("%d requests", len(got)))
	st.check("the real value appears nowhere in the result or sbx's stderr", !strings.Contains(string(st.ToolResult), real) && !strings.Contains(st.stderr, real), "")
	res.Steps = append(res.Steps, st)
}

func probeLimits(ctx context.Context, p *ProbeEnv, res *ProbeResult) {
	if runtime.GOOS != "linux" {
		res.Status, res.Detail = StatusNotImplemented, "resource limits are implemented on Linux only; elsewhere sbx refuses a limit the user sets"
		return
	}
	marker := "7" + strconv.Itoa(os.Getpid()) + ".5"
	w := WatchPeak(func() int { return len(PidsWith(marker)) })
	st := p.call(ctx, "Bash", map[string]any{"command": "for i in $(seq 100); do sleep " + marker + " & done 2>/dev/null; wait", "timeout": 3000},
		"--max-procs", "32", "--mode", "bypassPermissions")
	peak := w.Stop()
	var missing []string // limits this host cannot enforce (runs asking for them refused)
	switch {
	case refusedLimit(st, "--max-procs", peak == 0):
		missing = append(missing, "--max-procs")
	case strings.Contains(st.content()+st.stderr, "RLIMIT_NPROC"):
		// No cgroup for a caller who is not root: RLIMIT_NPROC in the
		// sandbox's user namespace stands in, and cannot report a hit.
		st.check("processes seen from outside stay within --max-procs 32 (RLIMIT_NPROC)", peak > 0 && peak <= 32, fmt.Sprintf("peak %d processes (the shell and its sleeps)", peak))
	default:
		// The shell's own command line holds the marker too: it counts,
		// as it does in the cgroup.
		st.check("processes seen from outside stay within --max-procs 32", peak > 0 && peak <= 32, fmt.Sprintf("peak %d processes (the shell and its sleeps)", peak))
		st.check("the tool_result names the process limit", strings.Contains(st.content(), "limit reached: process limit (--max-procs 32)"), st.content())
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(PidsWith(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	st.check("no process of the flood survives", len(PidsWith(marker)) == 0, fmt.Sprintf("pids=%v", PidsWith(marker)))
	res.Steps = append(res.Steps, st)

	st = p.call(ctx, "Bash", map[string]string{"command": "echo kept > kept.txt; head -c 1G /dev/zero | tail -n 1 >/dev/null; echo \"tail: $?\""},
		"--max-memory", "64M", "--mode", "bypassPermissions")
	b, err := os.ReadFile(filepath.Join(p.WS, "kept.txt"))
	if refusedLimit(st, "--max-memory", errors.Is(err, fs.ErrNotExist)) {
		missing = append(missing, "--max-memory")
	} else {
		st.check("the balloon is killed at --max-memory 64M", strings.Contains(st.content(), "tail: 137"), st.content())
		st.check("the tool_result names the memory limit", strings.Contains(st.content(), "limit reached: memory limit"), st.content())
		st.check("a file written before the limit stays", string(b) == "kept\n", string(b))
	}
	res.Steps = append(res.Steps, st)

	before := allocated(p.WS)
	st = p.call(ctx, "Bash", map[string]string{"command": "echo kept > kept-disk.txt; i=0; while head -c 1048576 /dev/zero > fill$i; do i=$((i+1)); done; echo \"files: $i\""},
		"--max-disk", "4M", "--mode", "bypassPermissions")
	added := allocated(p.WS) - before
	st.check("what the loop added, measured from outside, stays within --max-disk 4M", added > 0 && added <= 4<<20+64<<10, fmt.Sprintf("%d bytes added", added))
	st.check("the tool_result names the disk budget", strings.Contains(st.content(), "limit reached: the disk budget is spent"), st.content())
	b, _ = os.ReadFile(filepath.Join(p.WS, "kept-disk.txt"))
	st.check("a file written before the limit stays", string(b) == "kept\n", string(b))
	res.Steps = append(res.Steps, st)
	if len(missing) > 0 {
		res.Status, res.Detail = StatusLimited, "this host cannot enforce "+strings.Join(missing, " and ")+
			" (no cgroup: sbx doctor says how to get one); runs that ask for them are refused, and nothing ran"
		for _, s := range res.Steps {
			for _, c := range s.Checks {
				if !c.OK {
					res.Status = StatusFail
				}
			}
		}
	}
}

// refusedLimit reports whether a run asking for limit was refused because
// this host cannot enforce it, and then checks the refusal held: the
// tool_result names the limit and nothing ran (ranNothing, seen from
// outside).
func refusedLimit(st *Step, limit string, ranNothing bool) bool {
	if !strings.Contains(st.content(), "cannot enforce") || !strings.Contains(st.content(), limit) {
		return false
	}
	st.check("refused, naming "+limit+", since this host cannot enforce it", strings.Contains(st.content(), "nothing was run"), st.content())
	st.check("nothing of the command ran (seen from outside)", ranNothing, "")
	return true
}

// allocated sums the blocks the files under dir occupy, as du does.
func allocated(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}
