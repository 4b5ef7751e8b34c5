//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/pipeline"
)

// stubbed are the programs that only log that they ran; the wrappers
// (env, xargs, timeout, nice, nohup, stdbuf) are the real ones, so what
// they run is logged too. A name in neither set is logged by bash's
// command_not_found_handle.
var stubbed = []string{"git", "rm", "cat", "ls", "curl", "npm", "make", "touch", "cp", "mv", "sed", "find", "grep", "go", "python3", "node", "head", "tail", "tee", "dd", "sudo", "doas"}

// FuzzGateSeesWhatBashRuns runs each command with bash inside an sbx
// sandbox (nothing of it applied, no network), every program name it
// executes logged, and checks that the gate saw every one of them as a
// command, unless the gate could not read the command at all, or a
// program name is computed (or evaluated in arithmetic), or what runs is
// otherwise unseen (SimpleCommand.Unseen): no rule may then allow it. Seeds: the bypass corpus and more; go test runs them, go test
// -fuzz explores.
func FuzzGateSeesWhatBashRuns(f *testing.F) {
	for _, s := range differentialSeeds(f) {
		f.Add(s)
	}
	var e *env
	f.Cleanup(func() {
		if e != nil {
			os.RemoveAll(e.ws)
			os.RemoveAll(e.home)
		}
	})
	f.Fuzz(func(t *testing.T, cmd string) {
		if len(cmd) > 2000 || strings.ContainsAny(cmd, "\x00") {
			return
		}
		if e == nil {
			e = newEnv(t)
			// Not below newEnv's folder (removed with this input's test)
			// and not shared with the other fuzzing processes.
			ws, err := os.MkdirTemp("", fmt.Sprintf("sbx-diff-%d-", os.Getpid()))
			if err != nil {
				t.Fatal(err)
			}
			home, err := os.MkdirTemp("/var/tmp", fmt.Sprintf("sbx-diff-home-%d-", os.Getpid()))
			if err != nil {
				t.Fatal(err)
			}
			e.ws, e.home = ws, home
		}
		pc := pipeline.SplitCommandAt(cmd, e.ws, e.home)
		if pc.Unparseable {
			return // the gate asks for it, whatever it runs
		}
		seen := map[string]bool{}
		dynamicName := false
		for _, sc := range pc.Commands {
			if len(sc.Args) > 0 {
				seen[sc.Args[0][strings.LastIndexByte(sc.Args[0], '/')+1:]] = true
			}
			for _, w := range sc.Wrappers {
				seen[w] = true
			}
			dynamicName = dynamicName || sc.DynamicName || sc.Arith || sc.Unseen != ""
		}
		for _, name := range ranByBash(t, e, cmd) {
			if !seen[name] && !dynamicName {
				t.Errorf("bash ran %s for %q; the gate saw only %v", name, cmd, keys(seen))
			}
		}
	})
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ranByBash runs cmd with bash in a sandbox and returns the program names
// it executed.
func ranByBash(t *testing.T, e *env, cmd string) []string {
	t.Helper()
	// In the workspace: the sandbox's /tmp is its own.
	stubs := filepath.Join(e.ws, ".stubs")
	if _, err := os.Stat(stubs); err != nil {
		os.MkdirAll(stubs, 0o755)
		for _, n := range stubbed {
			os.WriteFile(filepath.Join(stubs, n), []byte("#!/bin/sh\nprintf '@EXEC:%s\\0' \"${0##*/}\" >&9\n"), 0o755)
		}
		for _, n := range []string{"env", "xargs", "timeout", "nice", "nohup", "stdbuf"} {
			if p, err := execLook(n); err == nil {
				os.Symlink(p, filepath.Join(stubs, n))
			}
		}
	}
	// The log goes to fd 9, which pipes and redirections leave alone. The
	// command ends the string, as sbx runs it (bash -c, no newline after).
	script := "exec 9>&1; printf '\\n@START\\n' >&9\ncommand_not_found_handle() { printf '@EXEC:%s\\0' \"$1\" >&9; return 127; }\n" + cmd
	pol, err := fsrules.Compile(fsrules.Input{Workspace: e.ws}, fsrules.Host{Home: e.home})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	spec := &pipeline.Spec{Argv: []string{"/bin/bash", "-c", script}, Dir: e.ws, FS: pol, Discard: true, Timeout: 10e9,
		Env: []string{"PATH=" + stubs, "HOME=" + e.home}}
	if _, err := e.executor().Run(context.Background(), spec, pipeline.Stdio{Stdout: &out}); err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	if !strings.Contains(out.String(), "@START") {
		t.Fatalf("the script did not run in the sandbox: %q", out.String())
	}
	var names []string
	for _, rec := range strings.Split(out.String(), "@EXEC:")[1:] {
		n, _, _ := strings.Cut(rec, "\x00")
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

func execLook(name string) (string, error) {
	for _, d := range []string{"/usr/bin", "/bin"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return filepath.Join(d, name), nil
		}
	}
	return "", os.ErrNotExist
}

// differentialSeeds are the commands of the bypass corpus and more.
func differentialSeeds(f *testing.F) []string {
	var out []string
	data, err := os.ReadFile(filepath.Join("..", "pipeline", "testdata", "bypass.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var c struct{ Cmd string }
		if json.Unmarshal([]byte(line), &c) == nil && c.Cmd != "" && c.Cmd != "LONG_RM" {
			out = append(out, c.Cmd)
		}
	}
	return append(out,
		`eval "git push origin"`, `eval git\ push`, `x=git; $x push`, `"$(echo git)" push`,
		`env -i PATH="$PATH" git push`, `nice -n 1 timeout 5 git status`, `xargs -0 -n1 rm -rf < /dev/null`,
		`bash -c 'sh -c "git push"'`, `{ git push; } 2>&1`, `if cat x; then ls; fi`, `while false; do rm x; done`,
		`f() { git "$@"; }; f push`, `alias g=git; g push`, `command git push`, `builtin exec git push`,
		`time git push`, `coproc git push`, `git push & wait`, `echo $(git push)`, "echo `git push`",
		`cat <(git log) >(tee x)`, `case x in x) git push;; esac`, `[[ -n $(git push) ]]`, `for i in 1; do git push; done`,
		`exec 3>&1; git push >&3`, `trap 'git push' EXIT`, `select x in a; do git push; break; done < /dev/null`)
}
