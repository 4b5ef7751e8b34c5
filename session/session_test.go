package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/pipeline"
)

// realToken is a secret in the session's environment.
const realToken = "ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// fake is an executor that records the spec and writes out to stdout.
type fake struct {
	spec *pipeline.Spec
	out  string
	res  pipeline.Result
	err  error // returned instead of running
}

func (f *fake) Run(_ context.Context, s *pipeline.Spec, stdio pipeline.Stdio) (*pipeline.Result, error) {
	if f.err != nil {
		return nil, f.err
	}
	f.spec = s
	if stdio.Stdout != nil {
		stdio.Stdout.Write([]byte(f.out))
	}
	res := f.res
	return &res, nil
}

func open(t *testing.T, settings string, ex pipeline.Executor, mod func(*Options)) *Session {
	t.Helper()
	root := t.TempDir()
	ws, home := filepath.Join(root, "ws"), filepath.Join(root, "home")
	os.MkdirAll(filepath.Join(ws, ".sbx"), 0o755)
	os.MkdirAll(home, 0o755)
	if settings != "" {
		os.WriteFile(filepath.Join(ws, ".sbx", "settings.json"), []byte(settings), 0o644)
	}
	o := Options{Dir: ws, Home: home, Environ: []string{"PATH=/usr/bin:/bin", "HOME=" + home, "GITHUB_TOKEN=" + realToken},
		Executor: ex, TrustProject: true}
	if mod != nil {
		mod(&o)
	}
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRun(t *testing.T) {
	tests := []struct {
		name, settings string
		cmd            Command
		mod            func(*Options)
		out            string // what the command prints
		denied         bool
		wantArgv       string // the last argv element run
		wantOut        string
		wantLimit      bool
	}{
		{name: "allowed argv", cmd: Command{Argv: []string{"echo", "a b"}}, out: "a b\n", wantArgv: "a b", wantOut: "a b\n"},
		{name: "shell", cmd: Command{Shell: "echo hi"}, wantArgv: "echo hi"},
		{name: "denied by rule", settings: `{"permissions": {"deny": ["Bash(rm *)"]}}`, cmd: Command{Shell: "true && rm -rf x"}, denied: true},
		{name: "ask with no one to ask", settings: `{"permissions": {"ask": ["Bash(make *)"]}}`, cmd: Command{Shell: "make all"}, denied: true},
		{name: "ask answered", settings: `{"permissions": {"ask": ["Bash(make *)"]}}`, cmd: Command{Shell: "make all"}, wantArgv: "make all",
			mod: func(o *Options) {
				o.Interactive = true
				o.Prompt = func(*pipeline.Call, *pipeline.Verdict) (bool, bool) { return true, false }
			}},
		{name: "secret redacted", cmd: Command{Shell: "leak"}, out: "token " + realToken + "\n", wantArgv: "leak", wantOut: "token [REDACTED:GITHUB_TOKEN]\n"},
		{name: "output capped", cmd: Command{Shell: "big"}, out: strings.Repeat("x", 100), wantArgv: "big", wantOut: strings.Repeat("x", 10), wantLimit: true,
			mod: func(o *Options) { o.Limits.MaxOutput = "10" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fake{out: tt.out}
			s := open(t, tt.settings, f, tt.mod)
			var stdout bytes.Buffer
			out, err := s.Run(context.Background(), tt.cmd, pipeline.Stdio{Stdout: &stdout})
			var de *DeniedError
			if tt.denied {
				if !errors.As(err, &de) || f.spec != nil {
					t.Fatalf("err %v, ran %v; want denied and nothing run", err, f.spec)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.spec.Argv[len(f.spec.Argv)-1]; got != tt.wantArgv {
				t.Errorf("ran %q, want %q", f.spec.Argv, tt.wantArgv)
			}
			if tt.wantOut != "" && !strings.Contains(stdout.String(), tt.wantOut) || strings.Contains(stdout.String(), realToken) {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.wantOut)
			}
			if (out.LimitHit != "") != tt.wantLimit {
				t.Errorf("limit hit %q, want %v", out.LimitHit, tt.wantLimit)
			}
			if strings.Contains(strings.Join(f.spec.Env, "\n"), realToken) || len(f.spec.Secrets) != 1 {
				t.Errorf("the spec's environment holds the real token, or the secrets are not in the spec: %d", len(f.spec.Secrets))
			}
		})
	}
}

// A timeout is audited with 124 whichever entry point ran the command.
func TestAuditTimeout(t *testing.T) {
	for _, entry := range []string{"run", "tool"} {
		audit := filepath.Join(t.TempDir(), "audit.jsonl")
		f := &fake{res: pipeline.Result{ExitCode: 137, TimedOut: true}}
		s := open(t, "", f, func(o *Options) { o.AuditFile = audit })
		if entry == "run" {
			if _, err := s.Run(context.Background(), Command{Shell: "sleep 9"}, pipeline.Stdio{}); err != nil {
				t.Fatal(err)
			}
		} else {
			s.Tool(context.Background(), []byte(`{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"sleep 9"}}`))
		}
		s.Close()
		data, _ := os.ReadFile(audit)
		limits := 0
		for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			var ev struct {
				Event    string
				ExitCode int
			}
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatalf("%s: not JSON: %s", entry, line)
			}
			if ev.Event == "limit" {
				limits++
				if ev.ExitCode != ExitTimeout {
					t.Errorf("%s: limit event %s, want exit code %d", entry, line, ExitTimeout)
				}
			}
		}
		if limits != 1 {
			t.Errorf("%s: %d limit events, want one:\n%s", entry, limits, data)
		}
	}
}

// A tool call's result pairs with its id even when the sandbox policy
// cannot be compiled.
func TestToolSetupFailure(t *testing.T) {
	s := open(t, "", &fake{}, func(o *Options) { o.Dir = o.Home }) // the home directory as workspace is refused
	res := s.Tool(context.Background(), []byte(`{"type":"tool_use","id":"toolu_9","name":"Bash","input":{"command":"true"}}`))
	if res.ToolUseID != "toolu_9" || !res.IsError || !strings.Contains(res.Content, "home directory") {
		t.Errorf("result %+v", res)
	}
}

func TestSandboxDisabledNeedsUnsandboxed(t *testing.T) {
	f := &fake{}
	s := open(t, `{"sandbox": {"enabled": false}}`, f, nil)
	if _, err := s.Run(context.Background(), Command{Shell: "true"}, pipeline.Stdio{}); !errors.Is(err, ErrNotSandboxed) || f.spec != nil {
		t.Errorf("err %v, ran %v", err, f.spec)
	}
}

// An approval "for the session" covers that call only: the same Bash
// command again, never another command, another tool or another file.
func TestSessionApprovalScope(t *testing.T) {
	var asked []string
	s := open(t, `{"permissions": {"ask": ["Bash(make *)", "Read(./secret*)"]}}`, &fake{}, func(o *Options) {
		o.Interactive = true
		o.Prompt = func(c *pipeline.Call, _ *pipeline.Verdict) (bool, bool) {
			asked = append(asked, c.Tool+" "+c.Summary())
			return true, true
		}
	})
	dir := s.Dir()
	os.WriteFile(filepath.Join(dir, "secret1"), []byte("one"), 0o644)
	os.WriteFile(filepath.Join(dir, "secret2"), []byte("two"), 0o644)
	for i, in := range []string{
		`{"name":"Bash","input":{"command":"make all"}}`,
		`{"name":"Bash","input":{"command":"make all","description":"again"}}`,
		`{"name":"Bash","input":{"command":"make clean"}}`,
		`{"name":"Read","input":{"file_path":"` + filepath.Join(dir, "secret1") + `"}}`,
		`{"name":"Read","input":{"file_path":"` + filepath.Join(dir, "secret1") + `"}}`,
		`{"name":"Read","input":{"file_path":"` + filepath.Join(dir, "secret2") + `"}}`,
	} {
		s.Tool(context.Background(), []byte(fmt.Sprintf(`{"type":"tool_use","id":"t%d",%s`, i, in[1:])))
	}
	want := []string{"Bash make all", "Bash make clean", "Read " + filepath.Join(dir, "secret1"), "Read " + filepath.Join(dir, "secret2")}
	if !slices.Equal(asked, want) {
		t.Errorf("asked %q, want %q", asked, want)
	}
}

// allowMachLookup: a service through which a command could leave the
// sandbox is refused with the file's name; a good one is carried to the
// platform (Linux ignores it with a warning, macOS opens it).
func TestAllowMachLookup(t *testing.T) {
	s := open(t, `{"sandbox": {"network": {"allowMachLookup": ["com.apple.lsd.*"]}}}`, &fake{}, nil)
	if _, err := s.Run(context.Background(), Command{Shell: "true"}, pipeline.Stdio{}); err == nil ||
		!strings.Contains(err.Error(), "settings.json") || !strings.Contains(err.Error(), "com.apple.lsd.mapdb") {
		t.Errorf("a refused service: %v", err)
	}
	f := &fake{}
	s = open(t, `{"sandbox": {"network": {"allowMachLookup": ["com.apple.SecurityServer"]}}}`, f, nil)
	if _, err := s.Run(context.Background(), Command{Shell: "true"}, pipeline.Stdio{}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.spec.Platform.MachLookup, []string{"com.apple.SecurityServer"}) {
		t.Errorf("platform: %+v", f.spec.Platform)
	}
}

// The user's cargo configuration is linked into the sandbox's CARGO_HOME,
// its credentials are not, and a link the sandbox put where the folder was
// cannot send sbx's write anywhere else.
func TestCargoConfigLink(t *testing.T) {
	home, cache, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	os.Mkdir(filepath.Join(home, ".cargo"), 0o755)
	os.WriteFile(filepath.Join(home, ".cargo", "config.toml"), []byte("[net]\n"), 0o644)
	os.WriteFile(filepath.Join(home, ".cargo", "credentials.toml"), []byte("token"), 0o600)
	var warned []string
	s := &Session{home: home, opts: Options{Warn: func(m string) { warned = append(warned, m) }}}
	s.cargoConfig(cache, "cargo")
	if dst, err := os.Readlink(filepath.Join(cache, "cargo", "config.toml")); err != nil || dst != filepath.Join(home, ".cargo", "config.toml") {
		t.Fatalf("config.toml link: %q %v", dst, err)
	}
	if _, err := os.Lstat(filepath.Join(cache, "cargo", "credentials.toml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("credentials.toml in the sandbox's CARGO_HOME: %v", err)
	}
	// The sandbox replaced its CARGO_HOME with a link to another folder.
	os.RemoveAll(filepath.Join(cache, "cargo"))
	os.Symlink(elsewhere, filepath.Join(cache, "cargo"))
	s.cargoConfig(cache, "cargo")
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("sbx wrote through the sandbox's link: %v", ents)
	}
}

// A long-lived session compiles each call's filesystem policy once the
// gate, hooks included, has decided: a hook may change the host, and a
// denyRead file a PreToolUse hook made is hidden from that very call.
func TestPolicyCompiledAfterHooks(t *testing.T) {
	f := &fake{}
	s := open(t, `{"sandbox": {"filesystem": {"denyRead": ["./secret"]}},
		"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "cat >/dev/null; echo s > \"$CLAUDE_PROJECT_DIR/secret\""}]}]}}`,
		f, func(o *Options) { o.Warm = true })
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	res := s.Tool(context.Background(), []byte(`{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cat secret"}}`))
	if res.IsError || f.spec == nil {
		t.Fatalf("result %+v", res)
	}
	secret := filepath.Join(s.dir, "secret")
	if _, err := os.Stat(secret); err != nil {
		t.Fatalf("the hook did not run: %v", err)
	}
	if !slices.ContainsFunc(f.spec.FS.DenyRead, func(p fsrules.Path) bool { return p.Path == secret && p.Exists }) {
		t.Errorf("the file the hook made is not denied: %+v", f.spec.FS.DenyRead)
	}
}

// A long-lived session compiles the policy for each call, after the
// gate decided: a denyRead file made before the call is hidden from it,
// and so is one made while a person was asked.
func TestPolicyCompiledForEachCall(t *testing.T) {
	f := &fake{}
	var made string
	s := open(t, `{"sandbox": {"filesystem": {"denyRead": ["./early", "./during"]}}, "permissions": {"ask": ["Bash(cat during)"]}}`,
		f, func(o *Options) {
			o.Warm, o.Interactive = true, true
			o.Prompt = func(*pipeline.Call, *pipeline.Verdict) (bool, bool) {
				os.WriteFile(made, []byte("s"), 0o600)
				return true, false
			}
		})
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"early", "during"} {
		p := filepath.Join(s.Dir(), name)
		if name == "early" {
			os.WriteFile(p, []byte("s"), 0o600)
		} else {
			made = p
		}
		f.spec = nil
		res := s.Tool(context.Background(), []byte(fmt.Sprintf(`{"type":"tool_use","id":"t%d","name":"Bash","input":{"command":"cat %s"}}`, i, name)))
		if res.IsError || f.spec == nil {
			t.Fatalf("%s: result %+v", name, res)
		}
		if !slices.ContainsFunc(f.spec.FS.DenyRead, func(d fsrules.Path) bool { return d.Path == p && d.Exists }) {
			t.Errorf("%s: the file is not denied: %+v", name, f.spec.FS.DenyRead)
		}
	}
}

// Each cache folder exists from the first run (a tool may write there
// without making it: echo x > $XDG_CACHE_HOME/f). One an earlier run
// replaced with a link (or a file) is made again, so the tool starts with
// a folder of its own; the link's target is left alone. Before, every
// later run's writes there failed as read-only, with no word.
func TestToolchainCacheRepaired(t *testing.T) {
	home, elsewhere := t.TempDir(), t.TempDir()
	var warned []string
	s := &Session{home: home, dir: "/work/p", opts: Options{Warn: func(m string) { warned = append(warned, m) }}}
	dir, env := s.toolchainCaches()
	for _, kv := range env {
		if fi, err := os.Lstat(kv[strings.IndexByte(kv, '=')+1:]); err != nil || !fi.IsDir() {
			t.Errorf("%s: not a folder at the first run: %v", kv, err)
		}
	}
	os.WriteFile(filepath.Join(elsewhere, "keep"), []byte("x"), 0o644)
	os.Remove(filepath.Join(dir, "xdg"))
	if err := os.Symlink(elsewhere, filepath.Join(dir, "xdg")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "npm"))
	os.WriteFile(filepath.Join(dir, "npm"), []byte("file"), 0o644)
	os.WriteFile(filepath.Join(dir, "go-mod", "mine"), []byte("x"), 0o644)
	s.toolchainCaches()
	for _, sub := range []string{"xdg", "npm"} {
		if fi, err := os.Lstat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			t.Errorf("%s not a folder again: %v", sub, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "go-mod", "mine")); err != nil {
		t.Errorf("a real folder was touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "keep")); err != nil {
		t.Errorf("the link's target was touched: %v", err)
	}
	if len(warned) != 2 || !strings.Contains(warned[0], "was not a folder") {
		t.Errorf("warnings: %q", warned)
	}
}

// Check refuses an input that sbx tool refuses: a caller acting on the
// verdict must not read another input than the one decided on.
func TestCheckReadsTheInputOneWayOnly(t *testing.T) {
	s := open(t, `{"permissions": {"allow": ["Bash(ls)"]}}`, nil, nil)
	for _, in := range []string{
		`{"command":"ls","command":"rm -rf x"}`,
		`{"command":"ls","COMMAND":"rm -rf x"}`,
		`{"command":"ls"} {"command":"rm -rf x"}`,
		`{"command":"ls","run_in_background":true}`,
	} {
		if v, err := s.Check(context.Background(), "Bash", json.RawMessage(in)); err == nil {
			t.Errorf("%s: %s %s", in, v.Decision, v.Reason)
		}
	}
	if v, err := s.Check(context.Background(), "Bash", json.RawMessage(`{"command":"ls"}`)); err != nil || v.Decision != pipeline.DecisionAllow {
		t.Errorf("ls: %v %v", v, err)
	}
}

// A call that did not run reports no exit status (-1), as the MCP bash
// tool's schema says: a denied one, and one the sandbox could not run.
func TestToolThatDidNotRunHasNoExitStatus(t *testing.T) {
	s := open(t, `{"permissions": {"deny": ["Bash(rm *)"]}}`, &fake{}, nil)
	res := s.Tool(context.Background(), []byte(`{"type":"tool_use","id":"d","name":"Bash","input":{"command":"rm -rf x"}}`))
	if !res.IsError || res.Output == nil || res.Output.ExitCode != -1 {
		t.Errorf("denied: %+v %+v", res, res.Output)
	}
	f := &fake{err: pipeline.ErrUnavailable}
	s = open(t, "", f, nil)
	res = s.Tool(context.Background(), []byte(`{"type":"tool_use","id":"u","name":"Bash","input":{"command":"true"}}`))
	if !res.IsError || res.Output == nil || res.Output.ExitCode != -1 || res.Output.Interrupted {
		t.Errorf("not run: %+v %+v", res, res.Output)
	}
}

// A long-lived session masks the credential files again for each call: a
// token renewed on the host reaches the next call under a new
// placeholder, an unchanged file keeps its placeholder (a warm sandbox
// launched after the call before stays usable), and the old token stays
// redacted as the new one is. Before, the files were masked once per
// session: the proxy kept binding the old token.
func TestMasksReadAgainForEachCall(t *testing.T) {
	const old, renewed = "npm_OLDSECRETaaaaaaaaaaaaaaaaaaaaaaaa", "npm_NEWSECRETbbbbbbbbbbbbbbbbbbbbbbbb"
	f := &fake{out: old + " " + renewed}
	s := open(t, "", f, func(o *Options) { o.Warm = true })
	npmrc := filepath.Join(s.home, ".npmrc")
	os.WriteFile(npmrc, []byte("//registry.example/:_authToken="+old+"\n"), 0o600)
	if err := s.Prepare(); err != nil {
		t.Fatal(err)
	}
	call := func(i int) (string, *pipeline.Spec) {
		t.Helper()
		f.spec = nil
		res := s.Tool(context.Background(), []byte(fmt.Sprintf(`{"type":"tool_use","id":"t%d","name":"Bash","input":{"command":"true"}}`, i)))
		if f.spec == nil || len(f.spec.MaskedFiles) != 1 {
			t.Fatalf("call %d: result %+v, spec %+v", i, res, f.spec)
		}
		return res.Content, f.spec
	}
	_, first := call(1)
	os.WriteFile(npmrc, []byte("//registry.example/:_authToken="+renewed+"\n"), 0o600)
	out, second := call(2)
	_, third := call(3)
	a, b, c := string(first.MaskedFiles[0].Content), string(second.MaskedFiles[0].Content), string(third.MaskedFiles[0].Content)
	switch {
	case strings.Contains(a+b, "SECRET"):
		t.Errorf("a mask holds a token: %q %q", a, b)
	case a == b:
		t.Errorf("the renewed token did not reach the next call: %q", b)
	case b != c:
		t.Errorf("an unchanged file was masked anew: %q then %q", b, c)
	case strings.Contains(out, "SECRET"):
		t.Errorf("a token reached the result: %q", out)
	}
	holds := func(spec *pipeline.Spec, v string) bool {
		return slices.ContainsFunc(spec.Secrets, func(sec *creds.Secret) bool { return sec.Value() == v })
	}
	// The replaced token stays bound to its host, so the proxy turns it
	// back into its placeholder in what a host that stored it returns.
	if !holds(first, old) || !holds(second, renewed) || !holds(second, old) || !holds(second, realToken) {
		t.Errorf("the calls' secrets: first %v, second %v", first.Secrets, second.Secrets)
	}
}

// A credential file two credential paths lead to (~/.npmrc a link to
// ~/.netrc) stays hidden: read as .npmrc, the netrc's password (with an
// "=" in it) was kept in clear, and the netrc's own mask came from that
// reading (a red-team finding).
func TestMaskOfAFileTwoPathsLeadTo(t *testing.T) {
	f := &fake{}
	var warned []string
	s := open(t, "", f, func(o *Options) { o.Warn = func(w string) { warned = append(warned, w) } })
	netrc := filepath.Join(s.home, ".netrc")
	os.WriteFile(netrc, []byte("machine example.com login me password dG9rZW5TRUNSRVQxMjM0NQ==\n"), 0o600)
	os.Symlink(netrc, filepath.Join(s.home, ".npmrc"))
	res := s.Tool(context.Background(), []byte(`{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"true"}}`))
	if f.spec == nil {
		t.Fatalf("result %+v", res)
	}
	if len(f.spec.MaskedFiles) != 0 {
		t.Errorf("masked: %q", f.spec.MaskedFiles[0].Content)
	}
	if !slices.ContainsFunc(warned, func(w string) bool { return strings.Contains(w, netrc+" stays hidden") }) {
		t.Errorf("warnings: %q", warned)
	}
}

// A long-lived session's calls reuse the last filesystem policy while
// nothing its compile read has changed, and compile it again when the
// host changes: here a .env file saved in the directory above the
// workspace, which only the defaults' look for .env* files finds.
func TestWarmPolicyFollowsTheHost(t *testing.T) {
	f := &fake{}
	s := open(t, "", f, func(o *Options) { o.Warm = true })
	call := func(i int) *fsrules.Policy {
		t.Helper()
		f.spec = nil
		res := s.Tool(context.Background(), []byte(fmt.Sprintf(`{"type":"tool_use","id":"t%d","name":"Bash","input":{"command":"true"}}`, i)))
		if f.spec == nil {
			t.Fatalf("call %d: %+v", i, res)
		}
		return f.spec.FS
	}
	env := filepath.Join(filepath.Dir(s.Dir()), ".env.prod")
	denied := func(p *fsrules.Policy) bool {
		return slices.ContainsFunc(p.DenyRead, func(d fsrules.Path) bool { return d.Path == env })
	}
	first, second := call(1), call(2)
	if first != second {
		t.Error("nothing changed and the policy was compiled again")
	}
	os.WriteFile(env, []byte("DB_PASSWORD=x\n"), 0o600)
	third := call(3)
	if third == second || !denied(third) || denied(second) {
		t.Errorf("a .env file saved above the workspace between calls: denied before %v, after %v", denied(second), denied(third))
	}
}

// A policy warning is given once in a long-lived session, not at each
// call (a wildcard denyRead's, three times per call before).
func TestPolicyWarningOncePerSession(t *testing.T) {
	var warned []string
	f := &fake{}
	s := open(t, `{"sandbox":{"filesystem":{"denyRead":["./keys/*.key"]}}}`, f, func(o *Options) {
		o.Warm = true
		o.Warn = func(m string) { warned = append(warned, m) }
	})
	os.MkdirAll(filepath.Join(s.Dir(), "keys"), 0o755)
	os.WriteFile(filepath.Join(s.Dir(), "keys", "a.key"), []byte("k"), 0o600)
	for i := range 3 {
		if res := s.Tool(context.Background(), []byte(fmt.Sprintf(`{"type":"tool_use","id":"t%d","name":"Bash","input":{"command":"true"}}`, i))); f.spec == nil {
			t.Fatalf("call %d: %+v", i, res)
		}
	}
	n := 0
	for _, w := range warned {
		if strings.Contains(w, "has wildcards") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the wildcard warning was given %d times in three calls: %q", n, warned)
	}
}
