package main

import (
	"bytes"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rnu", "--", "true"}, `unknown command "rnu" (did you mean run?)`},
		{[]string{"run", "--alow-domain", "x", "--", "true"}, "unknown flag: --alow-domain (did you mean --allow-domain?)"},
		{[]string{"tool", "--outptu", "structured"}, "(did you mean --output?)"},
	} {
		var out, errb bytes.Buffer
		if code := Main(tc.args, strings.NewReader(""), &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("sbx %v: %d %q, want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

func TestHelpCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"help", "run"}, strings.NewReader(""), &out, &errb); code != 0 || !strings.Contains(out.String()+errb.String(), "--allow-domain") {
		t.Errorf("sbx help run: %d %q %q", code, out.String(), errb.String())
	}
}

func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		var out, errb bytes.Buffer
		if code := Main([]string{"completion", sh}, strings.NewReader(""), &out, &errb); code != 0 || !strings.Contains(out.String(), "allow-domain") {
			t.Errorf("completion %s: %d %q", sh, code, errb.String())
		}
		if sh == "bash" {
			if b, err := exec.Command("bash", "-n", "-c", out.String()).CombinedOutput(); err != nil {
				t.Errorf("the bash completion does not parse: %v %s", err, b)
			}
		}
	}
}

func TestWrap(t *testing.T) {
	got := wrap("aaaa bbbb cccc dddd", 20, 10)
	if got != "aaaa bbbb\n          cccc dddd" {
		t.Errorf("%q", got)
	}
	if long := wrap(strings.Repeat("x", 50), 20, 10); long != strings.Repeat("x", 50) {
		t.Errorf("a long word was split: %q", long)
	}
}

// Every subcommand's help has its synopsis, examples and flags, and every
// flag an example uses is one of the command's.
func TestHelpEveryCommand(t *testing.T) {
	flagRE := regexp.MustCompile(`(?:^|\s)(--[a-z][a-z-]*)`)
	for name, h := range helpTexts() {
		var out, errb bytes.Buffer
		if code := Main([]string{"help", name}, strings.NewReader(""), &out, &errb); code != 0 {
			t.Errorf("sbx help %s: %d %s", name, code, errb.String())
			continue
		}
		got := out.String() + errb.String()
		if !strings.Contains(got, "Usage: sbx "+name) || !strings.Contains(got, "Examples:") || !strings.Contains(got, "Flags:") {
			t.Errorf("sbx help %s:\n%s", name, got)
		}
		flags := got[strings.Index(got, "Flags:"):]
		for _, ex := range h.examples {
			for _, m := range flagRE.FindAllStringSubmatch(ex, -1) {
				if !strings.Contains(flags, m[1]+" ") && !strings.Contains(flags, m[1]+"[") {
					t.Errorf("sbx %s: example %q uses %s, not a flag of the command", name, ex, m[1])
				}
			}
		}
	}
}

// blockedWriter never finishes a write until released.
type blockedWriter struct{ release chan struct{} }

func (b blockedWriter) Write(p []byte) (int, error) {
	<-b.release
	return len(p), nil
}

func TestGiveUpWriter(t *testing.T) {
	var ok strings.Builder
	g := &giveUpWriter{w: &ok, d: time.Second}
	if n, err := g.Write([]byte("taken\n")); n != 6 || err != nil || ok.String() != "taken\n" {
		t.Fatalf("%d %v %q", n, err, ok.String())
	}
	b := blockedWriter{make(chan struct{})}
	defer close(b.release)
	g = &giveUpWriter{w: b, d: 20 * time.Millisecond}
	start := time.Now()
	if _, err := g.Write([]byte("stuck")); !errors.Is(err, errReaderStuck) {
		t.Fatalf("a write nobody takes: %v", err)
	}
	if _, err := g.Write([]byte("later")); !errors.Is(err, errReaderStuck) || time.Since(start) > 5*time.Second {
		t.Fatalf("a write after a stuck one: %v after %s", err, time.Since(start))
	}
}
