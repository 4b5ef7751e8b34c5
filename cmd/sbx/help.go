package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// commandHelp is what `sbx COMMAND --help` (and `sbx help COMMAND`) says
// before the flags: the synopsis, what the command reads and writes, and
// examples to copy.
type commandHelp struct {
	synopsis, text string
	examples       []string
}

// helpTexts are the subcommands' help texts, by flag set name.
func helpTexts() map[string]commandHelp {
	return map[string]commandHelp{
		"run": {
			synopsis: "sbx run [flags] -- CMD [ARGS...]\n       sbx run [flags] -c 'SHELL STRING'",
			text:     "Runs one command in the sandbox after the permission gate; its exit status passes through\n(122: some changes did not reach the host, 124: timed out, 125: sbx could not run it).",
			examples: []string{
				"sbx run -- npm test",
				"sbx run --allow-domain registry.example.com -c 'npm ci && npm test'",
				"sbx run --max-memory 2G --max-procs 512 --timeout 10m -- make",
				"sbx run --discard -- ./configure     # what would it change? nothing is applied",
				"sbx run --debug -- true              # the bubblewrap argv and the start-up phases",
			},
		},
		"tool": {
			synopsis: "sbx tool [flags] < tool_use.json",
			text: "Reads one tool_use (Claude Code's content block) on stdin, runs it through the gate and the\n" +
				"sandbox, and writes one tool_result on stdout. Exit 1 when the input is not a tool_use it can act on.\n\n" +
				"  in:  {\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"Bash\",\"input\":{\"command\":\"npm test\",\"timeout\":120000}}\n" +
				"  out: {\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":\"…\",\"is_error\":false}",
			examples: []string{
				`echo '{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}' | sbx tool`,
				`sbx tool --output structured < call.json   # plus stdout, stderr, exit code, the decision trail`,
			},
		},
		"serve": {
			synopsis: "sbx serve [flags]",
			text: "JSON Lines: one tool_use per line on stdin, one tool_result per line on stdout, in order, until\n" +
				"stdin closes (or SIGINT/SIGTERM/SIGHUP). Each call's sandbox is launched while the caller thinks (warm).",
			examples: []string{
				`printf '%s\n' '{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"pwd"}}' | sbx serve`,
				`sbx serve --settings ./agent-policy.json --audit audit.jsonl`,
			},
		},
		"mcp": {
			synopsis: "sbx mcp [flags]",
			text: "A Model Context Protocol server on stdin/stdout with two tools: bash (the sandboxed shell) and\n" +
				"read_file. Register it as a stdio server whose working directory is the workspace.",
			examples: []string{
				`{"mcpServers": {"sbx": {"command": "sbx", "args": ["mcp"]}}}   # an MCP client's configuration`,
			},
		},
		"check": {
			synopsis: "sbx check --tool NAME --input JSON [flags]",
			text:     "The permission decision only, nothing runs: exit 0 allow, 1 deny, 3 ask, 2 bad usage.",
			examples: []string{
				`sbx check --tool Bash --input '{"command":"rm -rf build"}'`,
				`sbx check --json --tool Read --input '{"file_path":"/etc/shadow"}'`,
			},
		},
		"probe": {
			synopsis: "sbx probe [--json|--summary] [--only NAMES] [--list]",
			text:     "Proves on this host that the sandbox holds: each probe runs real calls and checks their effects from outside.",
			examples: []string{"sbx probe", "sbx probe --summary          # one line per probe", "sbx probe --only filesystem,network --json"},
		},
		"claude": {
			synopsis: "sbx claude setup [--user] [--write]",
			text: "Prints (or, with --write, writes) the one Claude Code setting that runs every Bash call in sbx:\n" +
				"env.CLAUDE_CODE_SHELL_PREFIX = \"/path/to/sbx --claude-shell\" (with the project for a project file).\n" +
				"Claude Code's own rules keep deciding; sbx only sandboxes. --write keeps every other key of the file.",
			examples: []string{
				"sbx claude setup                  # print the snippet for this project's .claude/settings.local.json",
				"sbx claude setup --write          # write it there",
				"sbx claude setup --user --write   # every project: ~/.claude/settings.json",
			},
		},
		"completion": {
			synopsis: "sbx completion bash|zsh|fish",
			text:     "Prints a completion script for the shell: the subcommands, then each one's flags.",
			examples: []string{
				`source <(sbx completion bash)                                  # this bash session`,
				`sbx completion bash > ~/.local/share/bash-completion/completions/sbx`,
				`sbx completion zsh > "${fpath[1]}/_sbx"`,
				`sbx completion fish > ~/.config/fish/completions/sbx.fish`,
			},
		},
		"doctor": {
			synopsis: "sbx doctor [--json] [--clean]",
			text:     "What this host supports and why not, with the fix; exit 1 when no sandbox can be built.",
			examples: []string{"sbx doctor", "sbx doctor --clean   # finish what runs killed with SIGKILL left behind"},
		},
	}
}

// setUsage makes f's usage the command's help text, examples and flags.
func setUsage(f *pflag.FlagSet, w io.Writer) {
	h, ok := helpTexts()[f.Name()]
	if !ok {
		return
	}
	f.Usage = func() {
		var b strings.Builder
		fmt.Fprintf(&b, "Usage: %s\n\n%s\n", h.synopsis, h.text)
		if len(h.examples) > 0 {
			b.WriteString("\nExamples:\n")
			for _, e := range h.examples {
				fmt.Fprintf(&b, "  %s\n", e)
			}
		}
		fmt.Fprintf(&b, "\nFlags:\n%s", f.FlagUsages())
		io.WriteString(w, b.String())
	}
}
