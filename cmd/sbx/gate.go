package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/session"
)

// gateFlags are the flags sbx run, tool, serve and check share.
type gateFlags struct {
	mode           string
	settings       []string
	claude         bool
	trustProject   bool
	nonInteractive bool
	classifier     string
}

func (g *gateFlags) register(f *pflag.FlagSet) {
	f.StringVar(&g.mode, "mode", "", "permission `MODE`: default, acceptEdits, plan, auto, dontAsk, bypassPermissions (default: permissions.defaultMode)")
	f.StringArrayVar(&g.settings, "settings", nil, "extra settings `FILE` (or inline JSON), command-line level; repeatable")
	f.BoolVar(&g.claude, "claude", false, "also read Claude Code's settings files at every level")
	f.BoolVar(&g.trustProject, "trust-project", false, "honour settings in the workspace that loosen the sandbox or add allow rules and hooks")
	f.BoolVar(&g.nonInteractive, "non-interactive", false, "no one can answer a prompt: an ask that no PermissionRequest hook answers is denied")
	f.StringVar(&g.classifier, "classifier", "", "auto mode: external classifier `CMD` (PreToolUse hook contract), run with sh -c")
}

// options turns the shared flags into session options; interactive says
// someone can answer prompts on the terminal.
func (g *gateFlags) options(stderr io.Writer, interactive bool) session.Options {
	o := session.Options{Mode: g.mode, Settings: g.settings, Claude: g.claude, TrustProject: g.trustProject,
		Interactive: interactive && !g.nonInteractive,
		Warn:        func(msg string) { fmt.Fprintf(stderr, "sbx: warning: %s\n", msg) }}
	if o.Interactive {
		o.Prompt = (&ttyPrompt{}).ask
	}
	if g.classifier != "" {
		o.Classifier = []string{"/bin/sh", "-c", g.classifier}
	}
	return o
}

// ttyPrompt asks on the controlling terminal (never the command's stdin):
// allow once, allow for the session, or deny.
type ttyPrompt struct{ mu sync.Mutex }

func (p *ttyPrompt) ask(call *pipeline.Call, v *pipeline.Verdict) (allow, session bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return false, false
	}
	defer tty.Close()
	fmt.Fprintf(tty, "\nsbx: %s wants to run:\n  %s\n  (%s)\n  [y] yes once   [s] yes for this session   [n] no (default)\n> ", call.Tool, summary(call), v.Reason)
	line, _ := bufio.NewReader(tty).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, false
	case "s":
		return true, true
	}
	return false, false
}

func summary(c *pipeline.Call) string {
	s := string(c.Input)
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// hasTTY reports whether a controlling terminal can be opened for prompts.
func hasTTY() bool {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}
