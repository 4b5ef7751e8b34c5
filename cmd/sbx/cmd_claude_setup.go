package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// cmdClaude is `sbx claude setup`: it prints, or writes into a Claude Code
// settings file, the one setting that runs every Bash call of Claude Code
// in sbx (CLAUDE_CODE_SHELL_PREFIX).
func cmdClaude(args []string, stdout, stderr io.Writer) (int, error) {
	var user, write bool
	f := pflag.NewFlagSet("claude", pflag.ContinueOnError)
	f.SetOutput(stderr)
	setUsage(f, stderr)
	f.BoolVar(&user, "user", false, "for every project: ~/.claude/settings.json (default: this project's .claude/settings.local.json)")
	f.BoolVar(&write, "write", false, "write the setting into the file instead of printing it")
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		f.Usage()
		return 0, nil
	}
	if len(args) == 0 || args[0] != "setup" {
		return 2, &usageError{"claude: the subcommand is setup (sbx claude setup [--user] [--write])"}
	}
	if err := f.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, nil
		}
		return 2, flagError(f, err)
	}
	prefix, err := shellPrefix(user)
	if err != nil {
		return exitSbxError, err
	}
	file, err := claudeSettingsFile(user)
	if err != nil {
		return exitSbxError, err
	}
	if !write {
		snippet, _ := json.MarshalIndent(map[string]any{"env": map[string]string{"CLAUDE_CODE_SHELL_PREFIX": prefix}}, "", "  ")
		fmt.Fprintf(stdout, "Add to %s (or run sbx claude setup --write%s):\n\n%s\n", file, map[bool]string{true: " --user"}[user], snippet)
		return 0, nil
	}
	old, err := setShellPrefix(file, prefix)
	if err != nil {
		return exitSbxError, err
	}
	switch old {
	case "":
		fmt.Fprintf(stdout, "sbx: %s: env.CLAUDE_CODE_SHELL_PREFIX = %q; every Bash call of Claude Code started from now on runs in sbx\n", file, prefix)
	case prefix:
		fmt.Fprintf(stdout, "sbx: %s already runs Bash calls in sbx\n", file)
	default:
		fmt.Fprintf(stdout, "sbx: %s: env.CLAUDE_CODE_SHELL_PREFIX was %q, now %q\n", file, old, prefix)
	}
	return 0, nil
}

// shellPrefix is this binary's absolute path and --claude-shell, for a
// project (not user) setting --claude-shell=PROJECT. Claude Code takes
// everything before the prefix's last word that starts with a dash for
// the program's path, and splits the rest on spaces: so one such word.
func shellPrefix(user bool) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", err
	}
	if strings.ContainsAny(exe, " \t\n'\"\\$`") {
		return "", fmt.Errorf("sbx is at %q: Claude Code splits CLAUDE_CODE_SHELL_PREFIX on spaces; install sbx at a path without spaces or quotes", exe)
	}
	prefix := exe + " --claude-shell"
	if user {
		return prefix, nil
	}
	cwd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(cwd, " \t\n'\"\\$`") {
		return "", fmt.Errorf("the project is at %q: Claude Code splits CLAUDE_CODE_SHELL_PREFIX on spaces; use sbx claude setup --user, which finds the project at run time", cwd)
	}
	return prefix + "=" + cwd, nil
}

func claudeSettingsFile(user bool) (string, error) {
	if user {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(home, ".claude", "settings.json"), nil
	}
	cwd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return filepath.Join(cwd, ".claude", "settings.local.json"), nil
}

// readClaudeSettings reads the settings file that setShellPrefix rewrites,
// and returns the path to write: the link's target when file is a
// symbolic link (kept a link). A FIFO, a device or a file over 1 MiB is
// refused unread, and so is one that a rewrite would change beyond the
// one key: not a JSON object, or a key given twice (the rewrite would keep
// only the last).
func readClaudeSettings(file string) (string, map[string]json.RawMessage, error) {
	doc := map[string]json.RawMessage{}
	b, err := settings.ReadRegular(file, settings.MaxFileSize)
	if t, err := filepath.EvalSymlinks(file); err == nil {
		file = t
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		return file, doc, nil
	case err != nil:
		return "", nil, fmt.Errorf("%w; sbx claude setup rewrites only a regular file of at most 1 MiB: add the setting by hand (sbx claude setup prints it)", err)
	case len(bytes.TrimSpace(b)) == 0:
		return file, doc, nil
	}
	if _, err := settings.ParseJSON(file, b); err != nil {
		return "", nil, fmt.Errorf("%w; fix the file or add the setting by hand (sbx claude setup prints it)", err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", nil, fmt.Errorf("%s: %w; fix the file or add the setting by hand (sbx claude setup prints it)", file, err)
	}
	return file, doc, nil
}

// setShellPrefix sets env.CLAUDE_CODE_SHELL_PREFIX in a settings file,
// keeping every other key, and returns the value it replaced. A file that
// is not a JSON object is refused, untouched.
func setShellPrefix(file, prefix string) (string, error) {
	file, doc, err := readClaudeSettings(file)
	if err != nil {
		return "", err
	}
	env := map[string]json.RawMessage{}
	if raw, ok := doc["env"]; ok {
		if err := json.Unmarshal(raw, &env); err != nil {
			return "", fmt.Errorf("%s: env is not an object: %w", file, err)
		}
	}
	var old string
	json.Unmarshal(env["CLAUDE_CODE_SHELL_PREFIX"], &old)
	env["CLAUDE_CODE_SHELL_PREFIX"], _ = json.Marshal(prefix)
	doc["env"], _ = json.Marshal(env)
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return "", err
	}
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(file); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp := file + ".sbx-tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), mode); err != nil {
		return "", err
	}
	return old, os.Rename(tmp, file)
}
