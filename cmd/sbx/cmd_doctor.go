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
	"golang.org/x/term"

	"github.com/sbx-sandbox/sbx/pipeline"
)

func cmdDoctor(args []string, stdout, stderr io.Writer) (int, error) {
	f := pflag.NewFlagSet("doctor", pflag.ContinueOnError)
	f.SetOutput(stderr)
	setUsage(f, stderr)
	asJSON := f.Bool("json", false, "print the report as JSON")
	clean := f.Bool("clean", false, "finish the merges of killed runs (protected files they wrote go to the quarantine) and remove what they left (run and proxy directories, cgroups)")
	if err := f.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, nil
		}
		return 2, flagError(f, err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return exitSbxError, fmt.Errorf("cannot find the home directory: %w (set HOME)", err)
	}
	b := newBackend("", pipeline.StateDir(os.Getenv, home))
	if *clean {
		rep, err := b.clean()
		enc := json.NewEncoder(stdout)
		if !*asJSON {
			enc.SetIndent("", "  ")
			fmt.Fprintln(stdout, "sbx doctor --clean: what killed runs left behind, and what was done with it:")
		}
		enc.Encode(rep)
		if err != nil {
			return 1, err
		}
		return 0, nil
	}
	rep := b.doctor(context.Background())
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return exitSbxError, err
		}
	} else {
		printReport(stdout, rep, termWidth(stdout))
	}
	if !b.usable(rep) {
		return 1, nil
	}
	return 0, nil
}

// termWidth is the terminal's width, or 100 columns when w is not one.
func termWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols >= 60 {
			return cols
		}
	}
	return 100
}

// wrap breaks s into lines of at most width columns at spaces, every line
// after the first indented by indent spaces (the first starts there).
func wrap(s string, width, indent int) string {
	var b strings.Builder
	col := indent
	for i, word := range strings.Fields(s) {
		if i > 0 && col+1+len(word) > width {
			b.WriteString("\n" + strings.Repeat(" ", indent))
			col = indent
		} else if i > 0 {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(word)
		col += len(word)
	}
	return b.String()
}

// printReport renders a report for people, from its JSON form so every
// backend's report prints the same way.
func printReport(w io.Writer, rep any, width int) {
	data, _ := json.Marshal(rep)
	var r struct {
		OS, Arch, Kernel, Detail string
		Usable                   bool
		Checks                   []struct {
			Name, Detail, Fix string
			OK, Required      bool
		}
	}
	json.Unmarshal(data, &r)
	fmt.Fprintf(w, "sbx doctor: %s/%s kernel %s\n", r.OS, r.Arch, r.Kernel)
	if r.Detail != "" {
		fmt.Fprintln(w, r.Detail)
	}
	for _, c := range r.Checks {
		mark := "ok  "
		switch {
		case !c.OK && c.Required:
			mark = "FAIL"
		case !c.OK:
			mark = "no  "
		}
		fmt.Fprintf(w, "  [%s] %-16s %s\n", mark, c.Name, wrap(c.Detail, width, 26))
		if !c.OK && c.Fix != "" {
			fmt.Fprintf(w, "         %-16s %s\n", "", wrap("fix: "+c.Fix, width, 26))
		}
	}
	if r.Usable {
		fmt.Fprintln(w, "the sandbox can be built on this host")
	} else {
		fmt.Fprintln(w, "the sandbox CANNOT be built on this host: nothing will run (see FAIL above)")
	}
}
