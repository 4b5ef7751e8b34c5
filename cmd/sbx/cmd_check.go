package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/session"
)

func cmdCheck(args []string, stdout, stderr io.Writer) (int, error) {
	var gf gateFlags
	f := pflag.NewFlagSet("check", pflag.ContinueOnError)
	f.SetOutput(stderr)
	setUsage(f, stderr)
	gf.register(f)
	tool := f.String("tool", "", "tool `NAME` (Bash, Read, Edit, Write, WebFetch, mcp__server__tool …)")
	input := f.String("input", "", "tool input as `JSON` (required)")
	asJSON := f.Bool("json", false, "print one JSON object: decision, reason, rule, source, level, trail")
	if err := f.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, nil
		}
		return 2, flagError(f, err)
	}
	if *tool == "" {
		return 2, &usageError{"check: --tool is required"}
	}
	if !f.Changed("input") {
		return 2, &usageError{"check: --input is required (the tool's input as JSON, e.g. '{\"command\":\"ls\"}')"}
	}
	// A check never prompts: an ask is reported as ask, unless
	// --non-interactive says no one could answer it.
	s, err := session.Open(gf.options(stderr, true))
	if err != nil {
		return exitSbxError, err
	}
	v, err := s.Check(context.Background(), *tool, json.RawMessage(*input))
	if err != nil {
		return exitSbxError, err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return exitSbxError, err
		}
	} else {
		fmt.Fprintf(stdout, "%s: %s\n", v.Decision, v.Reason)
		if v.Rule != "" {
			fmt.Fprintf(stdout, "  rule:   %s\n", v.Rule)
		}
		if v.Source != "" {
			fmt.Fprintf(stdout, "  source: %s\n", v.Source)
		}
		if v.Level != "" {
			fmt.Fprintf(stdout, "  level:  %s\n", v.Level)
		}
		for _, t := range v.Trail {
			fmt.Fprintf(stdout, "  - %s\n", t)
		}
	}
	return checkStatus(v.Decision), nil
}

// Exit statuses of sbx check, by decision (usage errors are 2).
const (
	checkAllow = 0
	checkDeny  = 1
	checkAsk   = 3
)

func checkStatus(d pipeline.Decision) int {
	switch d {
	case pipeline.DecisionAllow:
		return checkAllow
	case pipeline.DecisionAsk:
		return checkAsk
	}
	return checkDeny
}
