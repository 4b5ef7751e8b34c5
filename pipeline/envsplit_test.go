package pipeline

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// envSplit against GNU env itself: each string is given to env -S behind
// a program that prints its arguments, and env's words must be envSplit's.
func TestEnvSplitMatchesEnv(t *testing.T) {
	env, err := exec.LookPath("env")
	if err == nil {
		err = exec.Command(env, "-S", "true").Run()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("GNU env with -S is needed: %v", err)
		}
		t.Skipf("no GNU env with -S: %v", err)
	}
	for _, s := range []string{
		`rm -rf x`, `rm\_-rf\_x`, `"rm\_x" y`, `'a\_b' c`, `a'b'c "d e"`, `'' x`, `""`, `a#b #c d`, `a \#b`,
		`a\tb "c\td"`, `x\cy z`, `'x\cy' z`, `a\\b 'c\\d' 'e\'f'`, `"a'b" 'c"d'`, `  lead  trail  `,
		"tab\there\nnl", `\$x \"q`, `a\nb`, `'it''s'`, `"\_"`, `a\_\_b`, `#all`, `x '#y'`,
		// refused by env (or dynamic): envSplit says not ok
		`a\qb`, `"open`, `'open`, `"\c"`, `${HOME}/x`, `$x`, `a\`,
	} {
		words, ok := envSplit(s)
		out, err := exec.Command(env, "-S", `printf [%s] `+s).Output()
		if !ok {
			if err == nil && !strings.Contains(s, "$") {
				t.Errorf("%q: envSplit refused it, env ran it: %s", s, out)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: env refused it (%v), envSplit gave %q", s, err, words)
			continue
		}
		want := ""
		for _, w := range words {
			want += "[" + w + "]"
		}
		if len(words) == 0 {
			want = "[]" // printf with no argument prints its format once
		}
		if string(out) != want {
			t.Errorf("%q: env gave %q, envSplit %q", s, out, want)
		}
	}
}

// envQuote quotes a word for env -S (single quotes, \\ and \' inside).
func envQuote(w string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(w) + "'"
}

func FuzzEnvSplit(f *testing.F) {
	for _, s := range []string{`rm\_-rf\_x`, `"a b" 'c\'d' #e`, `x\cy`, `${A}`, `a\tb`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, ok := envSplit(s)
		if !ok {
			return
		}
		// What envSplit reads, quoted back, reads the same.
		q := make([]string, len(words))
		for i, w := range words {
			q[i] = envQuote(w)
		}
		again, ok := envSplit(strings.Join(q, " "))
		if !ok || !slices.Equal(again, words) {
			t.Fatalf("%q: %q, quoted back %q: %q (%v)", s, words, strings.Join(q, " "), again, ok)
		}
	})
}
