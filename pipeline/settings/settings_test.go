package settings

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

type fakeFS map[string]string

func (f fakeFS) read(name string) ([]byte, error) {
	if s, ok := f[name]; ok {
		return []byte(s), nil
	}
	return nil, os.ErrNotExist
}

func (f fakeFS) glob(pattern string) ([]string, error) {
	var out []string
	for name := range f {
		if ok, _ := filepath.Match(pattern, name); ok {
			out = append(out, name)
		}
	}
	return out, nil
}

func load(t *testing.T, files fakeFS, mod func(*Options)) (*Settings, error) {
	t.Helper()
	o := Options{ProjectDir: "/proj", Home: "/home/u", ReadFile: files.read, Glob: files.glob}
	if mod != nil {
		mod(&o)
	}
	return Load(o)
}

func values(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Value)
	}
	return out
}

func TestParseErrorsNameFileLineColumn(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"trailing comma", "{\n  \"sandbox\": {\"enabled\": true,}\n}", "/proj/.sbx/settings.json:2:"},
		{"garbage", "{\n\n   x}", "/proj/.sbx/settings.json:3:"},
		{"truncated", "{\"sandbox\": {", "unexpected end of file"},
		{"duplicate key", "{\"sandbox\": {}, \"sandbox\": {}}", "duplicate key \"sandbox\""},
		{"trailing data", "{} {}", "unexpected data after"},
		// A denyWrite path with a byte that is not UTF-8 was read as
		// another path (U+FFFD), and the real directory stayed writable.
		{"lone surrogate", "{\"sandbox\": {\"filesystem\": {\"denyWrite\": [\"./prot\\udcff\"]}}}", "U+FFFD"},
		{"not UTF-8", "{\"sandbox\": {\"filesystem\": {\"denyWrite\": [\"./prot\xff\"]}}}", "/proj/.sbx/settings.json:1:50: invalid JSON: not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, fakeFS{"/proj/.sbx/settings.json": tt.json}, nil)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ParseError", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseErrorPosition(t *testing.T) {
	_, err := ParseJSON("f.json", []byte("{\n  \"a\": [1, 2,, 3]\n}"))
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v", err)
	}
	if pe.Pos.Line != 2 {
		t.Errorf("line = %d, want 2 (%v)", pe.Pos.Line, err)
	}
}

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"wrong type", `{"sandbox": {"filesystem": {"denyWrite": "x"}}}`, "1:42: sandbox.filesystem.denyWrite: expected array of strings, got string"},
		{"wrong elem", `{"sandbox": {"filesystem": {"denyRead": ["a", 3]}}}`, "sandbox.filesystem.denyRead[1]: expected string, got number"},
		{"unknown sandbox key", `{"sandbox": {"filesystem": {"denyWirte": []}}}`, "sandbox.filesystem.denyWirte: unknown key"},
		{"sandbox not object", `{"sandbox": []}`, "sandbox: expected object, got array"},
		{"unknown credentials key", `{"sandbox": {"credentials": {"files": []}}}`, "sandbox.credentials.files: unknown key"},
		{"bad credential mode", `{"sandbox": {"credentials": {"envVars": {"X": {"mode": "leak"}}}}}`, "sandbox.credentials.envVars.X.mode"},
		{"not an object", `[]`, "settings must be a JSON object"},
		{"unknown permissions key", `{"permissions": {"denny": ["Bash(rm:*)"]}}`, "permissions.denny: unknown key (did you mean deny?)"},
		{"misspelt hook event", `{"hooks": {"PreToolUSE": []}}`, "hooks.PreToolUSE: unknown hook event (did you mean PreToolUse?)"},
		{"unknown hook type", `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "comand", "command": "x"}]}]}}`, `hooks.PreToolUse[0].hooks[0].type: unknown hook type "comand" (did you mean command?)`},
		{"broken matcher", `{"hooks": {"PreToolUse": [{"matcher": "Bash(", "hooks": []}]}}`, "hooks.PreToolUse[0].matcher: not a valid regular expression"},
		// A misspelt failClosed let a crashing hook allow the call.
		{"misspelt failClosed", `{"sbx": {"hooks": {"failClose": true}}}`, "sbx.hooks.failClose: unknown key"},
		{"failClosed as a string", `{"sbx": {"hooks": {"failClosed": "true"}}}`, "sbx.hooks.failClosed: expected boolean, got string"},
		{"sbx.hooks not object", `{"sbx": {"hooks": 1}}`, "sbx.hooks: expected object, got number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, fakeFS{"/home/u/.config/sbx/settings.json": tt.json}, nil)
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "/home/u/.config/sbx/settings.json") {
				t.Errorf("err = %q, want file and %q", err, tt.want)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	s, err := load(t, fakeFS{"/home/u/.config/sbx/settings.json": `{"theme": "dark", "bogus": 1,
		"hooks": {"SomethingNew": [], "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "x"}]}]},
		"sandbox": {"enableWeakerNestedSandbox": true, "filesystem": {"allowManagedReadPathsOnly": true},
		"network": {"allowMachLookup": ["com.apple.x"]}}}`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range s.Warnings {
		got = append(got, w.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"bogus: unknown key", "enableWeakerNestedSandbox: not supported", "allowManagedReadPathsOnly: only honoured in managed",
		"hooks.SomethingNew: unknown hook event"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q lack %q", all, want)
		}
	}
	if strings.Contains(all, "theme") {
		t.Errorf("known key theme warned about: %q", all)
	}
	// allowMachLookup is read (macOS honours it; the session warns where
	// the platform does not).
	if len(s.AllowMachLookup) != 1 || s.AllowMachLookup[0].Value != "com.apple.x" || strings.Contains(all, "allowMachLookup") {
		t.Errorf("allowMachLookup: %v, warnings %q", s.AllowMachLookup, all)
	}
}

func TestMergeAndPrecedence(t *testing.T) {
	files := fakeFS{
		"/home/u/.config/sbx/settings.json":          `{"sandbox": {"failIfUnavailable": false, "filesystem": {"denyRead": ["user"]}}}`,
		"/proj/.sbx/settings.json":                   `{"sandbox": {"filesystem": {"denyRead": ["project"]}}}`,
		"/proj/.sbx/settings.local.json":             `{"sandbox": {"filesystem": {"denyRead": ["local"]}}}`,
		"/cli.json":                                  `{"sandbox": {"failIfUnavailable": true, "filesystem": {"denyRead": ["cli"]}}}`,
		"/etc/sbx/managed-settings.json":             `{"sandbox": {"filesystem": {"denyRead": ["managed"]}}}`,
		"/etc/sbx/managed-settings.d/10-a.json":      `{"sandbox": {"enabled": false}}`,
		"/etc/sbx/managed-settings.d/20-b.json":      `{"sandbox": {"enabled": true}}`,
		"/home/u/.claude/settings.json":              `{"sandbox": {"filesystem": {"denyRead": ["claude-user"]}}}`,
		"/etc/claude-code/managed-settings.json":     `{"sandbox": {"filesystem": {"denyRead": ["claude-managed"]}}}`,
		"/etc/claude-code/managed-settings.d/x.json": `{"sandbox": {"failIfUnavailable": false}}`,
	}
	s, err := load(t, files, func(o *Options) { o.Files = []string{"/cli.json"} })
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(values(s.DenyRead), ","), "user,project,local,cli,managed"; got != want {
		t.Errorf("denyRead = %s, want %s", got, want)
	}
	if !s.FailIfUnavailable.V || s.FailIfUnavailable.File.Path != "/cli.json" {
		t.Errorf("failIfUnavailable = %+v, want true from /cli.json", s.FailIfUnavailable)
	}
	if !s.Enabled.V || !strings.HasSuffix(s.Enabled.File.Path, "20-b.json") {
		t.Errorf("enabled = %+v, want the later drop-in to win", s.Enabled)
	}

	s, err = load(t, files, func(o *Options) { o.Claude = true })
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(values(s.DenyRead), ","), "claude-user,user,project,local,claude-managed,managed"; got != want {
		t.Errorf("with --claude denyRead = %s, want %s", got, want)
	}
	if s.FailIfUnavailable.V {
		t.Errorf("claude managed drop-in should win over user: %+v", s.FailIfUnavailable)
	}
}

func TestUntrustedProjectOnlyTightens(t *testing.T) {
	files := fakeFS{
		"/proj/.sbx/settings.json": `{"sandbox": {"enabled": false, "failIfUnavailable": false, "bwrapPath": "/proj/evil",
			"filesystem": {"allowWrite": ["/"], "allowRead": ["~/.ssh"], "denyWrite": ["x"]}}}`,
	}
	s, err := load(t, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Enabled.Set || s.FailIfUnavailable.Set || s.BwrapPath.Set || len(s.AllowWrite) != 0 || len(s.AllowRead) != 0 {
		t.Errorf("untrusted project loosened the sandbox: %+v", s)
	}
	if len(s.DenyWrite) != 1 {
		t.Errorf("denyWrite from untrusted project dropped: %v", s.DenyWrite)
	}
	var warned []string
	for _, w := range s.Warnings {
		if strings.Contains(w.Msg, "untrusted project") {
			warned = append(warned, w.Key)
		}
	}
	if got := strings.Join(warned, ","); got != "sandbox.enabled,sandbox.failIfUnavailable,sandbox.bwrapPath,sandbox.filesystem.allowWrite,sandbox.filesystem.allowRead" {
		t.Errorf("warned keys = %s", got)
	}

	for _, trust := range []func(*Options, fakeFS){
		func(o *Options, _ fakeFS) { o.TrustProject = true },
		func(_ *Options, f fakeFS) {
			f["/home/u/.config/sbx/settings.json"] = `{"sbx": {"trustedProjects": ["/proj"]}}`
		},
	} {
		f := fakeFS{}
		for k, v := range files {
			f[k] = v
		}
		s, err := load(t, f, func(o *Options) { trust(o, f) })
		if err != nil {
			t.Fatal(err)
		}
		if !s.Trusted || len(s.AllowWrite) != 1 || !s.Enabled.Set {
			t.Errorf("trusted project not honoured: trusted=%v allowWrite=%v", s.Trusted, s.AllowWrite)
		}
	}
}

// An untrusted project file cannot turn the user's fail-closed hooks
// open (a crashing hook would then let the call run); trusted, it can.
func TestProjectCannotOpenFailClosedHooks(t *testing.T) {
	files := fakeFS{
		"/home/u/.config/sbx/settings.json": `{"sbx": {"hooks": {"failClosed": true}}}`,
		"/proj/.sbx/settings.json":          `{"sbx": {"hooks": {"failClosed": false}}}`,
	}
	s, err := load(t, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Perm.HooksFailClosed.Or(false) {
		t.Error("an untrusted project file opened the user's fail-closed hooks")
	}
	if len(s.Warnings) == 0 || !strings.Contains(fmt.Sprint(s.Warnings), "sbx.hooks.failClosed") {
		t.Errorf("no warning: %v", s.Warnings)
	}
	if s, err = load(t, files, func(o *Options) { o.TrustProject = true }); err != nil || s.Perm.HooksFailClosed.Or(true) {
		t.Errorf("a trusted project's failClosed: false was not honoured: %v", err)
	}
}

func TestProjectCannotTrustItself(t *testing.T) {
	s, err := load(t, fakeFS{"/proj/.sbx/settings.json": `{"sbx": {"trustedProjects": ["/proj"]}, "sandbox": {"filesystem": {"allowWrite": ["/"]}}}`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Trusted || len(s.AllowWrite) != 0 {
		t.Errorf("project trusted itself")
	}
}

func TestSettingsFileMustExist(t *testing.T) {
	_, err := load(t, fakeFS{}, func(o *Options) { o.Files = []string{"/missing.json"} })
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want not exist", err)
	}
}

func TestInlineSettings(t *testing.T) {
	s, err := load(t, fakeFS{}, func(o *Options) { o.Files = []string{`{"sandbox": {"filesystem": {"denyWrite": ["a"]}}}`} })
	if err != nil {
		t.Fatal(err)
	}
	if len(s.DenyWrite) != 1 || s.DenyWrite[0].File.BaseDir != "/proj" {
		t.Errorf("inline settings: %+v", s.DenyWrite)
	}
}

func TestManagedOnlyReadPaths(t *testing.T) {
	s, err := load(t, fakeFS{
		"/etc/sbx/managed-settings.json":    `{"sandbox": {"filesystem": {"allowManagedReadPathsOnly": true, "allowRead": ["/m"]}}}`,
		"/home/u/.config/sbx/settings.json": `{"sandbox": {"filesystem": {"allowRead": ["/u"]}}}`,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(values(s.AllowRead), ","); got != "/m" {
		t.Errorf("allowRead = %s, want only the managed one", got)
	}
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a": [1, "x", {"b": null}]}`, "{\n\"sandbox\": {\"enabled\": tru}", `[`, `"\u00e9"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := ParseJSON("f", data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if pe.Pos.Line < 1 || pe.Pos.Col < 1 {
				t.Fatalf("bad position %v", pe.Pos)
			}
			return
		}
		if n == nil {
			t.Fatal("nil node without error")
		}
		// Whatever parses must validate without panicking.
		s := &Settings{}
		_ = s.validate(&File{Path: "f", Root: n})
	})
}

func TestNetworkLists(t *testing.T) {
	files := fakeFS{
		"/home/u/.config/sbx/settings.json": `{"permissions": {"allow": ["WebFetch(domain:docs.example.com)", "Bash(ls:*)", "WebFetch(domain:*)"],
			"deny": ["WebFetch(domain:evil.example.com)"]}, "sandbox": {"network": {"allowedDomains": ["api.example.com"]}}}`,
		"/proj/.sbx/settings.json": `{"permissions": {"allow": ["WebFetch(domain:project.example.com)"], "deny": ["WebFetch(domain:blocked.example.com)"]},
			"sandbox": {"network": {"allowedDomains": ["p2.example.com"], "deniedDomains": ["d.example.com"]}}}`,
	}
	s, err := load(t, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(values(s.AllowedDomains), ","); got != "api.example.com,docs.example.com" {
		t.Errorf("allowed = %s", got)
	}
	if got := strings.Join(values(s.DeniedDomains), ","); got != "evil.example.com,d.example.com,blocked.example.com" {
		t.Errorf("denied = %s", got)
	}
	files["/etc/sbx/managed-settings.json"] = `{"sandbox": {"network": {"allowManagedDomainsOnly": true, "allowedDomains": ["m.example.com"]}}}`
	s, err = load(t, files, func(o *Options) { o.TrustProject = true })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(values(s.AllowedDomains), ","); got != "m.example.com" {
		t.Errorf("managed-only allowed = %s", got)
	}
}

// A file where a settings directory would be (a running sandbox's
// placeholder for an absent .claude or .sbx) means no settings there.
func TestFileInPlaceOfSettingsDir(t *testing.T) {
	root := t.TempDir()
	ws, home := filepath.Join(root, "ws"), filepath.Join(root, "home")
	for _, d := range []string{ws, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{".claude", ".sbx"} {
		if err := os.WriteFile(filepath.Join(ws, f), nil, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Load(Options{ProjectDir: ws, Home: home, Claude: true}); err != nil {
		t.Errorf("Load: %v", err)
	}
}

// A settings file that is a device, a FIFO or too large is refused with
// its path, never read (a committed link to /dev/zero grew sbx to 583 MB).
func TestSettingsFileMustBeRegularAndBounded(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"link to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "not a regular file"},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "not a regular file"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, "not a regular file"},
		{"too large", func(p string) error {
			return os.WriteFile(p, []byte(`{"x":"`+strings.Repeat("a", MaxFileSize)+`"}`), 0o644)
		}, "larger than"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			proj, home := t.TempDir(), t.TempDir()
			os.MkdirAll(filepath.Join(proj, ".sbx"), 0o755)
			p := filepath.Join(proj, ".sbx", "settings.json")
			if err := tt.make(p); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := Load(Options{ProjectDir: proj, Home: home, ManagedDir: filepath.Join(home, "none"), TrustProject: true})
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
					t.Errorf("err = %v, want %q naming %s", err, tt.want, p)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Load hung")
			}
		})
	}
}

// BenchmarkParseJSON parses deny lists of growing size: the time per byte
// stays flat when parsing is linear (each token's line and column came
// from a scan of the file up to it, which made a 5 MB list take 8 s).
//
//	go test -run - -bench ParseJSON ./pipeline/settings
func BenchmarkParseJSON(b *testing.B) {
	for _, n := range []int{1000, 16000} {
		var sb strings.Builder
		sb.WriteString(`{"permissions":{"deny":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				sb.WriteString(",\n")
			}
			fmt.Fprintf(&sb, `"Edit(/some/path/number/%d)"`, i)
		}
		sb.WriteString("]}}")
		data := []byte(sb.String())
		b.Run(fmt.Sprintf("%d-rules", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				if _, err := ParseJSON("bench.json", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Every position a parse error names is the line and column of the
// offending byte, also past many lines and on the first one.
func TestLineIndex(t *testing.T) {
	data := []byte("ab\ncd\n\nef")
	ix := newLineIndex(data)
	for _, tc := range []struct {
		off  int64
		want Pos
	}{{0, Pos{1, 1}}, {2, Pos{1, 3}}, {3, Pos{2, 1}}, {6, Pos{3, 1}}, {7, Pos{4, 1}}, {9, Pos{4, 3}}, {99, Pos{4, 3}}, {-1, Pos{1, 1}}} {
		if got := ix.pos(tc.off); got != tc.want {
			t.Errorf("pos(%d) = %v, want %v", tc.off, got, tc.want)
		}
	}
}
