package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// cmdCompletion prints a completion script for bash, zsh or fish: the
// subcommands, then each one's flags (from its own flag set).
func cmdCompletion(args []string, stdout, stderr io.Writer) (int, error) {
	f := pflag.NewFlagSet("completion", pflag.ContinueOnError)
	f.SetOutput(stderr)
	setUsage(f, stderr)
	if err := f.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, nil
		}
		return 2, flagError(f, err)
	}
	args = f.Args()
	if len(args) != 1 {
		return 2, &usageError{"completion: name the shell: bash, zsh or fish"}
	}
	cmds := strings.Join(commands, " ")
	flags := map[string]string{
		"run":   flagNames(runFlags(&runOpts{})),
		"tool":  flagNames(toolFlagSet()),
		"serve": flagNames(toolFlagSet()),
		"mcp":   flagNames(toolFlagSet()),
	}
	names := slices.Sorted(maps.Keys(flags))
	switch args[0] {
	case "bash", "zsh":
		var cases strings.Builder
		for _, c := range names {
			fmt.Fprintf(&cases, "    %s) COMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", c, flags[c])
		}
		script := "_sbx() {\n  local cur=${COMP_WORDS[COMP_CWORD]}\n  if ((COMP_CWORD == 1)); then\n    COMPREPLY=($(compgen -W %q -- \"$cur\"))\n    return\n  fi\n  case ${COMP_WORDS[1]} in\n%s    *) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n  esac\n}\ncomplete -o default -F _sbx sbx\n"
		if args[0] == "zsh" {
			fmt.Fprintln(stdout, "autoload -U +X bashcompinit && bashcompinit")
		}
		fmt.Fprintf(stdout, script, cmds, cases.String())
	case "fish":
		fmt.Fprintf(stdout, "complete -c sbx -f -n __fish_use_subcommand -a %q\n", cmds)
		for _, c := range names {
			for _, f := range strings.Fields(flags[c]) {
				fmt.Fprintf(stdout, "complete -c sbx -n '__fish_seen_subcommand_from %s' -l %s\n", c, strings.TrimPrefix(f, "--"))
			}
		}
	default:
		return 2, &usageError{fmt.Sprintf("completion: unknown shell %q (bash, zsh or fish)", args[0])}
	}
	return 0, nil
}

// flagNames lists a flag set's long flags, space-separated.
func flagNames(f *pflag.FlagSet) string {
	var out []string
	f.VisitAll(func(fl *pflag.Flag) { out = append(out, "--"+fl.Name) })
	return strings.Join(out, " ")
}

// toolFlagSet is the flag set of sbx tool, serve and mcp.
func toolFlagSet() *pflag.FlagSet {
	var t toolFlags
	return t.flags("tool")
}
