package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sbx-sandbox/sbx/integration"
	"github.com/sbx-sandbox/sbx/session"
)

// cmdProbe runs the enforcement probes through the real pipeline and
// sandbox on this host and prints the evidence.
func cmdProbe(args []string, stdout, stderr io.Writer) (int, error) {
	f := pflag.NewFlagSet("probe", pflag.ContinueOnError)
	f.SetOutput(stderr)
	setUsage(f, stderr)
	asJSON := f.Bool("json", false, "print the evidence as JSON")
	only := f.StringSlice("only", nil, "run only these probes (comma-separated names)")
	list := f.Bool("list", false, "list the probes and exit")
	brief := f.Bool("summary", false, "one line per probe (name, status, and what failed) instead of the evidence")
	if err := f.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, nil
		}
		return 2, flagError(f, err)
	}
	if *list {
		for _, p := range integration.Probes() {
			fmt.Fprintf(stdout, "%-20s %s\n", p.Name, p.Description)
		}
		return 0, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return exitSbxError, err
	}
	var progress func(i, n int, r *integration.ProbeResult)
	if session.IsTerminal(stderr) {
		// The probes take seconds: say where they are.
		progress = func(i, n int, r *integration.ProbeResult) {
			fmt.Fprintf(stderr, "sbx: probe %d/%d %s: %s\n", i, n, r.Name, r.Status)
		}
	}
	results, err := integration.RunProbesProgress(context.Background(), exe, *only, progress)
	if err != nil {
		return exitSbxError, err
	}
	failed := 0
	for _, r := range results {
		if r.Status == integration.StatusFail {
			failed++
		}
	}
	switch {
	case *brief:
		for _, r := range results {
			why := failedChecks(r)
			if why == "" && r.Status != integration.StatusPass && r.Detail != "" {
				why = ": " + r.Detail
			}
			fmt.Fprintf(stdout, "%-18s %s%s\n", r.Name, r.Status, why)
		}
	case *asJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(results)
	default:
		for _, r := range results {
			fmt.Fprintf(stdout, "== %s: %s %s\n", r.Name, strings.ToUpper(r.Status), r.Detail)
			for _, s := range r.Steps {
				fmt.Fprintf(stdout, "   ran:        sbx tool %s <<< %s\n", strings.Join(s.Flags, " "), s.Ran)
				fmt.Fprintf(stdout, "   decision:   %s\n", s.Decision)
				fmt.Fprintf(stdout, "   tool_result: %s\n", s.ToolResult)
				fmt.Fprintf(stdout, "   exit status: %d\n", s.ExitStatus)
				for _, c := range s.Checks {
					mark := "ok  "
					if !c.OK {
						mark = "FAIL"
					}
					fmt.Fprintf(stdout, "   [%s] %s", mark, c.What)
					if !c.OK && c.Detail != "" {
						fmt.Fprintf(stdout, " (%s)", c.Detail)
					}
					fmt.Fprintln(stdout)
				}
			}
		}
		fmt.Fprintln(stdout, "\n| probe | status |\n|---|---|")
		for _, r := range results {
			fmt.Fprintf(stdout, "| %s | %s |\n", r.Name, r.Status)
		}
	}
	if failed > 0 {
		return 1, fmt.Errorf("%d probe(s) failed", failed)
	}
	return 0, nil
}

// failedChecks lists what failed in a probe, for its summary line.
func failedChecks(r *integration.ProbeResult) string {
	var out []string
	for _, s := range r.Steps {
		for _, c := range s.Checks {
			if !c.OK {
				out = append(out, c.What)
			}
		}
	}
	if len(out) == 0 {
		return ""
	}
	return ": " + strings.Join(out, "; ")
}
