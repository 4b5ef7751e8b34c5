package pipeline

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func texts(pc *ParsedCommand) []string {
	var out []string
	for _, c := range pc.Commands {
		if c.Text != "" {
			out = append(out, c.Text)
		}
	}
	return out
}

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		cmd  string
		want []string
	}{
		{"ls -la", []string{"ls -la"}},
		{"git status && npm test", []string{"git status", "npm test"}},
		{"a || b; c | d |& e & f", []string{"a", "b", "c", "d", "e", "f"}},
		{"a\nb", []string{"a", "b"}},
		{`echo "$(git clean -f)"`, []string{`echo "$(git clean -f)"`, "git clean -f"}},
		{"echo `rm x`", []string{"echo `rm x`", "rm x"}},
		{"(cd /tmp && git clean -f)", []string{"cd /tmp", "git clean -f"}},
		{"for f in *; do rm $f; done", []string{"rm $f"}},
		{"if true; then curl x; fi", []string{"true", "curl x"}},
		{"f() { curl x; }; f", []string{"curl x", "f"}},
		{"diff <(ls a) <(ls b)", []string{"diff <(ls a) <(ls b)", "ls a", "ls b"}},
		{"timeout 30 npm test", []string{"npm test"}},
		{"nice -n 5 nohup npm test", []string{"npm test"}},
		{"command -v git", []string{"command -v git"}},
		{"xargs grep x", []string{"grep x"}},
		{"xargs -n1 grep x", []string{"grep x"}},
		{"FOO=1 npm test", []string{"npm test"}},
		{"cat <<EOF\nhi\nEOF", []string{"cat"}},
	}
	for _, tt := range tests {
		pc := SplitCommand(tt.cmd)
		if pc.Unparseable {
			t.Errorf("%q: unparseable: %s", tt.cmd, pc.Reason)
			continue
		}
		got := texts(pc)
		slices.Sort(got)
		want := slices.Clone(tt.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", tt.cmd, got, want)
		}
	}
}

func TestSplitCommandDetails(t *testing.T) {
	pc := SplitCommand("FOO=1 NODE_ENV=test npm test > out.txt 2>&1 < in.txt")
	c := pc.Commands[0]
	if c.Text != "npm test" || !strings.HasPrefix(c.AllowText, "FOO=1") {
		t.Errorf("text %q allow %q", c.Text, c.AllowText)
	}
	if len(c.Redirects) != 2 || c.Redirects[0].Path != "out.txt" || !c.Redirects[0].Output || c.Redirects[1].Output {
		t.Errorf("redirects %+v", c.Redirects)
	}
	if c := SplitCommand("NODE_ENV=test npm test").Commands[0]; c.AllowText != "npm test" {
		t.Errorf("safe assignment kept: %q", c.AllowText)
	}
	for _, bad := range []string{"npm test &&", "echo 'unterminated", "if then", strings.Repeat("a", MaxCommandLen+1)} {
		if !SplitCommand(bad).Unparseable {
			t.Errorf("%q parsed", bad[:min(20, len(bad))])
		}
	}
	watch := SplitCommand("watch -n1 make").Commands // make as watch's command, then watch
	if !slices.ContainsFunc(watch, func(c SimpleCommand) bool { return c.Args[0] == "watch" && c.ExecWrapper }) ||
		!slices.ContainsFunc(watch, func(c SimpleCommand) bool { return c.Args[0] == "make" }) ||
		!SplitCommand("find . -delete").Commands[0].ExecWrapper {
		t.Error("exec wrappers not flagged")
	}
}

// simpleList matches inputs made only of lowercase words joined by
// && || ; | and newlines: there, bash runs exactly one command per part,
// unless a word is reserved (for a do a; done runs a once per argument).
var simpleList = regexp.MustCompile(`^ *[a-z]+( +[a-z]+)* *((&&|\|\||;|\||\n) *[a-z]+( +[a-z]+)* *)*$`)
var listSep = regexp.MustCompile(`&&|\|\||;|\||\n`)

// reservedWord reports whether a word of cmd is one of bash's reserved
// words.
func reservedWord(cmd string) bool {
	for _, w := range strings.Fields(listSep.ReplaceAllString(cmd, " ")) {
		switch w {
		case "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do", "done", "in", "function", "time", "coproc":
			return true
		}
	}
	return false
}

// FuzzSplitCommand: the splitter never panics, and on plain command lists
// never returns fewer commands than bash would run.
func FuzzSplitCommand(f *testing.F) {
	for _, s := range []string{"ls && rm -rf /", "echo $(a; b) `c`", "for i in 1; do x; done", "a |& b", "f(){ g; }", "x <(y) >(z)", "npm test &&", "a && b || c ; d | e", "bash <<< 'rm x'", "sh -s <<EOF\nrm x\nEOF\n", "git -c alias.x='!rm x' -c alias.p=push p", "env BASH_FUNC_a%%={'() { x; }',y}{1,2} git -c alias.a=b rebase -x 'rm x' a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		pc := SplitCommand(cmd)
		for _, sc := range pc.Commands {
			// The normal form of static words is the program's name and
			// the arguments, one space apart (norm's fast path reuses
			// the text when it is exactly that); checked on the code
			// before the fast path too.
			// (Declarations and arithmetic have no words: their normal
			// form is their text.)
			if len(sc.Args) == 0 || len(sc.Words) == 0 || slices.ContainsFunc(sc.Words, func(w Word) bool { return w.Dynamic }) {
				continue
			}
			name, _ := progName(sc.Args[0])
			want := ""
			for _, a := range append([]string{name}, sc.Args[1:]...) {
				if want != "" { // leading empty words leave no space
					want += " "
				}
				want += a
			}
			if sc.Norm != want {
				t.Fatalf("%q: Norm %q, want %q", cmd, sc.Norm, want)
			}
		}
		if pc.Unparseable || !simpleList.MatchString(cmd) || reservedWord(cmd) {
			return
		}
		want := len(listSep.Split(cmd, -1))
		if got := len(texts(pc)); got < want {
			t.Fatalf("%q split into %d commands, bash runs %d", cmd, got, want)
		}
	})
}
