// Package session is sbx's one orchestration: settings → gate → policy →
// executor. `sbx run`, `sbx tool`, `sbx serve` and `sbx check` call it, and
// so does a Go program that embeds sbx (an agent harness that turns a
// tool_use into a tool_result):
//
//	s, err := session.Open(session.Options{Dir: workspace})
//	if err != nil { … }
//	defer s.Close()
//	result := s.Tool(ctx, toolUseJSON)
//
// A program that runs sandboxes must call [Reexec] first in main (and in
// TestMain): sbx starts its own binary again for the sandbox's init and
// helpers.
package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/netrules"
	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// Options configure a session. Every field may be left zero: the comment
// says what zero means.
type Options struct {
	// Dir is the workspace and the commands' working directory; "" means
	// the current directory.
	Dir string
	// Home is the user's home directory; "" means os.UserHomeDir.
	Home string
	// Environ is the environment commands start from (before secrets are
	// masked); nil means os.Environ.
	Environ []string
	// Settings are extra settings files or inline JSON, at the command-line
	// level. Claude also reads Claude Code's files; TrustProject honours
	// workspace settings that loosen the sandbox.
	Settings             []string
	Claude, TrustProject bool
	// Mode is the permission mode; "" means permissions.defaultMode.
	Mode string
	// Interactive says someone can answer prompts: Prompt for the gate's
	// asks. Without it an ask that no hook answers is denied.
	Interactive bool
	// Prompt answers an ask; nil denies it ("no one was asked").
	Prompt pipeline.Prompter
	// NetAsk decides a host no rule names. When set, the network policy is
	// not strict unless settings make it so; nil means strict.
	NetAsk pipeline.NetAsk
	// Classifier is auto mode's external classifier command.
	Classifier []string
	// FS and Net add the command line's filesystem and network lists.
	FS  pipeline.FSFlags
	Net pipeline.NetFlags
	// Limits are the command line's limits; DefaultLimits what applies when
	// neither they nor settings set a limit (zero: none, as for sbx run;
	// [pipeline.DefaultToolLimits] for tool calls).
	Limits        pipeline.LimitFlags
	DefaultLimits pipeline.RunLimits
	// Discard runs commands and reports what they would have changed,
	// applying nothing.
	Discard bool
	// SeparateStreams keeps a Bash tool call's stdout and stderr apart
	// (structured output, MCP); otherwise they are one stream in the order
	// written, as Claude Code's Bash shows them (see
	// [pipeline.Runner.SeparateStreams]).
	SeparateStreams bool
	// Unsandboxed runs Run's command WITHOUT a sandbox (an explicit
	// opt-out; tool calls are never run unsandboxed).
	Unsandboxed bool
	// DecidedUpstream says the caller has already decided that Run's
	// command may run (Claude Code, whose own rules and hooks ran before it
	// called `sbx claude-shell`): Run skips the gate (no rules, no hooks,
	// no prompt) and always sandboxes, whatever sandbox.enabled says (in
	// Claude Code's files that key is Claude Code's own sandbox).
	DecidedUpstream bool
	// AuditFile, when set, receives every decision the sandbox makes as JSON
	// Lines (network, refused writes, limits).
	AuditFile string
	// Warn receives warnings (settings, policy, platform); nil drops them.
	Warn func(string)
	// Executor replaces the platform's sandbox (tests, embedders with their
	// own); nil means bubblewrap on Linux, Seatbelt on macOS.
	Executor pipeline.Executor
	// Exe is the sbx binary that runs as the sandbox's helper and init on
	// Linux; "" means the sbx-inner embedded in this build (scripts/build),
	// or else the running executable, which must then call [Reexec] first
	// in main and be built with CGO_ENABLED=0.
	Exe string
	// Warm is for a long-lived session (serve, MCP): the next sandbox is
	// launched while the caller thinks, so a tool call skips the sandbox's
	// start-up (each sandbox still runs one command; Close throws the
	// waiting one away), and the filesystem policy's paths are resolved
	// again for each call.
	Warm bool
}

// Session holds one workspace's settings and gate, and, from the first
// command on, its compiled policy and executor. Its methods may be called
// from several goroutines.
type Session struct {
	opts      Options
	dir, home string
	st        *settings.Settings
	gate      *pipeline.Gate

	once    sync.Once
	err     error
	sandbox *sandbox

	warnedMu sync.Mutex
	warned   map[string]bool
}

// sandbox is what running a command needs, compiled on first use.
type sandbox struct {
	fs      *fsrules.Policy
	net     *pipeline.NetPolicy
	limits  pipeline.RunLimits
	env     []string
	secrets []*creds.Secret
	masked  []pipeline.MaskedFile
	// masks makes masked and the redactor (again for each call of a
	// long-lived session).
	masks  *masks
	audit  *Audit
	exec   pipeline.Executor
	runner *pipeline.Runner
	// closer stops the platform's executor (a warm sandbox), if it has
	// anything to stop.
	closer io.Closer
}

// Open loads the settings for the workspace and builds the gate. The
// sandbox policy is compiled on the first command (a `sbx check` never
// needs it).
func Open(o Options) (*Session, error) {
	s := &Session{opts: o, dir: o.Dir, home: o.Home}
	var err error
	if s.dir == "" {
		if s.dir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	if s.dir, err = filepath.Abs(s.dir); err != nil {
		return nil, err
	}
	// The sandbox sees the real path (a link in /tmp, say, is not there:
	// its /tmp is private).
	if real, err := filepath.EvalSymlinks(s.dir); err == nil {
		s.dir = real
	}
	if s.home == "" {
		if s.home, err = os.UserHomeDir(); err != nil {
			return nil, fmt.Errorf("cannot find the home directory: %w (set HOME)", err)
		}
	}
	if s.opts.Environ == nil {
		s.opts.Environ = os.Environ()
	}
	if s.st, err = settings.Load(settings.Options{
		ProjectDir: s.dir, Home: s.home, ConfigHome: absOrEmpty(s.getenv("XDG_CONFIG_HOME")),
		Files: o.Settings, Claude: o.Claude, TrustProject: o.TrustProject,
	}); err != nil {
		return nil, err
	}
	for _, w := range s.st.Warnings {
		if o.DecidedUpstream && gateKey(w.Key) {
			continue // the caller's own gate decides; these keys are not used here
		}
		s.warn(w.String())
	}
	gate, err := pipeline.NewGate(pipeline.GateOptions{Settings: s.st, Cwd: s.dir, Home: s.home, Mode: o.Mode,
		Interactive: o.Interactive, SandboxAvailable: sandboxSupported && !o.Unsandboxed, Classifier: o.Classifier})
	if err != nil {
		return nil, err
	}
	for _, w := range gate.Warnings {
		if !o.DecidedUpstream {
			s.warn(w)
		}
	}
	s.gate = gate
	return s, nil
}

// gateKey reports whether a settings key configures the gate (rules,
// hooks, modes) rather than the sandbox.
func gateKey(key string) bool {
	return key == "hooks" || strings.HasPrefix(key, "hooks.") || key == "permissions" || strings.HasPrefix(key, "permissions.")
}

// warnOnce passes a warning on the first time it comes in this session.
func (s *Session) warnOnce(msg string) {
	s.warnedMu.Lock()
	seen := s.warned[msg]
	if s.warned == nil {
		s.warned = map[string]bool{}
	}
	s.warned[msg] = true
	s.warnedMu.Unlock()
	if !seen {
		s.warn(msg)
	}
}

func (s *Session) warn(msg string) {
	if s.opts.Warn != nil {
		s.opts.Warn(msg)
	}
}

// getenv reads the session's environment.
func (s *Session) getenv(name string) string {
	for i := len(s.opts.Environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(s.opts.Environ[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// Settings returns the merged settings.
func (s *Session) Settings() *settings.Settings { return s.st }

// Dir returns the workspace.
func (s *Session) Dir() string { return s.dir }

// StateDir is where sbx keeps per-run state.
func (s *Session) StateDir() string { return pipeline.StateDir(s.getenv, s.home) }

// Check decides a call without running anything: the gate's verdict, which
// may be "ask". An input that `sbx tool` would refuse is refused here too
// (a key twice, data after the object, a parameter outside the tool's
// schema such as COMMAND beside command): a caller that acts on the
// verdict must not read another input than the one decided on.
func (s *Session) Check(ctx context.Context, tool string, input json.RawMessage) (*pipeline.Verdict, error) {
	if _, err := settings.ParseJSON("input", input); err != nil {
		return nil, fmt.Errorf("the input cannot be read one way only: %w", err)
	}
	if err := pipeline.ValidateInput(tool, input); err != nil {
		return nil, fmt.Errorf("InputValidationError: %w", err)
	}
	return s.gate.Decide(ctx, &pipeline.Call{ID: "check", Tool: tool, Input: input})
}

// Policy is the compiled sandbox policy of a session.
type Policy struct {
	// FS is the filesystem policy with every list ([] when empty) and the
	// names protected in every writable root (protectedFiles,
	// protectedDirs).
	FS      map[string]any      `json:"filesystem"`
	Net     *pipeline.NetPolicy `json:"network"`
	Limits  auditLimits         `json:"limits"`
	Timeout int64               `json:"timeoutMs"`
	// Secrets are the masked or removed credentials: names, modes and
	// the hosts they are bound to, never values.
	Secrets []*creds.Secret `json:"secrets"`
	// MaskedFiles are the credential files shown with placeholders.
	MaskedFiles []string `json:"maskedFiles"`
}

// Policy returns the compiled policy, as `sbx run --print-policy` shows
// it (lists that are empty are [], never null).
func (s *Session) Policy() (*Policy, error) {
	sb, err := s.prepare()
	if err != nil {
		return nil, err
	}
	fs, err := fsView(sb.fs)
	if err != nil {
		return nil, err
	}
	p := &Policy{FS: fs, Net: sb.net, Limits: limitsOf(sb.limits.Limits), Timeout: sb.limits.Timeout.Milliseconds(),
		Secrets: append([]*creds.Secret{}, sb.secrets...), MaskedFiles: []string{}}
	for _, m := range sb.masked {
		p.MaskedFiles = append(p.MaskedFiles, m.Path)
	}
	if p.Net != nil && p.Net.Rules != nil {
		rules := *p.Net.Rules
		rules.Allow, rules.Deny = append([]netrules.Rule{}, rules.Allow...), append([]netrules.Rule{}, rules.Deny...)
		p.Net = &pipeline.NetPolicy{Rules: &rules, Strict: p.Net.Strict}
	}
	return p, nil
}

// fsView is the filesystem policy as --print-policy shows it: its JSON
// (which is also the transaction helper's, with empty lists left out)
// with every list present, and the protected names added.
func fsView(p *fsrules.Policy) (map[string]any, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	t := reflect.TypeOf(*p)
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Type.Kind() == reflect.Slice && name != "" && name != "-" && m[name] == nil {
			m[name] = []any{}
		}
	}
	m["protectedFiles"], m["protectedDirs"] = fsrules.ProtectedFiles(), fsrules.ProtectedDirs()
	return m, nil
}

// MaskedSecrets names the environment variables kept from the sandbox and
// how (placeholder or removed).
func (s *Session) MaskedSecrets() ([]string, error) {
	sb, err := s.prepare()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, sec := range sb.secrets {
		names = append(names, fmt.Sprintf("%s (%s)", sec.Name, sec.Mode))
	}
	return names, nil
}

// Close releases what the session holds (the audit file).
func (s *Session) Close() error {
	if s.sandbox == nil {
		return nil
	}
	if s.sandbox.closer != nil {
		s.sandbox.closer.Close()
	}
	if s.sandbox.audit != nil {
		return s.sandbox.audit.Close()
	}
	return nil
}

// prepare compiles the policy, masks the environment and builds the
// executor with its middlewares, once.
func (s *Session) prepare() (*sandbox, error) {
	s.once.Do(func() { s.sandbox, s.err = s.build() })
	return s.sandbox, s.err
}

func (s *Session) build() (*sandbox, error) {
	if insideSandbox(s.getenv) && s.opts.Executor == nil {
		return nil, ErrNested
	}
	sb := &sandbox{}
	fsf := s.opts.FS
	fsf.StateDir = s.StateDir()
	fsf.Getenv = s.getenv
	// The first run makes it anyway; made now, the policy compiled before
	// and after that run is the same (a warm sandbox fits the next call).
	_ = os.MkdirAll(fsf.StateDir, 0o700)
	cache, cacheEnv := s.toolchainCaches()
	switch {
	case cache != "" && s.opts.Discard:
		// Nothing of a discarded run stays: its cache is a writable root
		// as the workspace is, staged and thrown away with it (it still
		// finds what earlier runs cached).
		fsf.AllowWrite = append(slices.Clip(fsf.AllowWrite), cache) // not into the caller's array
	case cache != "":
		fsf.Caches = append(slices.Clip(fsf.Caches), cache)
	}
	compile := func(tr *fsrules.Trace) (*fsrules.Policy, error) {
		f, host := fsf, fsrules.Host{Home: s.home}
		if tr != nil {
			f.Getenv, f.Glob, host = tr.Getenv(f.Getenv), tr.Glob(filepath.Glob), tr.Host(host)
		}
		return fsrules.Compile(pipeline.FSInput(s.st, f, s.dir), host)
	}
	var err error
	if sb.fs, err = compile(nil); err != nil {
		return nil, err
	}
	for _, w := range sb.fs.Warnings {
		s.warnOnce(w)
	}
	if sb.net, err = pipeline.NetInput(s.st, s.opts.Net, s.opts.NetAsk != nil); err != nil {
		return nil, err
	}
	if _, err := pipeline.CheckMachServices(s.st.AllowMachLookup); err != nil {
		return nil, err
	}
	if sb.limits, err = pipeline.ResolveLimits(s.st, s.opts.Limits, s.opts.DefaultLimits); err != nil {
		return nil, err
	}
	env := commandEnv(s.opts.Environ)
	if cache != "" {
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "XDG_CACHE_HOME=") })
	}
	masked, err := creds.MaskEnv(append(env, cacheEnv...), pipeline.CredentialsConfig(s.st))
	if err != nil {
		return nil, err
	}
	sb.env, sb.secrets = masked.Env, masked.Secrets
	sb.masks = newMasks(s.home, masked.Secrets, s.warnOnce)
	if masksFiles {
		sb.masked, sb.secrets = sb.masks.now(sb.fs)
	}
	for _, k := range s.platform().Unsupported() {
		if !platformHonours(k) {
			s.warn(k + " is not honoured on this platform; ignored (stricter)")
		}
	}
	if s.opts.AuditFile != "" {
		if sb.audit, err = OpenAudit(s.opts.AuditFile); err != nil {
			return nil, err
		}
		sb.audit.redact = func(text string) string { return sb.masks.redactor().Redact(text) }
	}
	sb.exec = s.opts.Executor
	if sb.exec == nil {
		sb.exec = newExecutor(&s.opts, s.st, s.StateDir(), sb.audit)
		sb.closer, _ = sb.exec.(io.Closer)
	}
	sb.exec = audited{signalsCaught{sb.exec}, sb.audit}
	sb.runner = &pipeline.Runner{Gate: s.gate, Settings: s.st, Executor: sb.exec, FS: sb.fs, Net: sb.net, Env: sb.env,
		Secrets: sb.secrets, MaskedFiles: sb.masked, Platform: s.platform(), Redactor: sb.masks.redactor(), Limits: sb.limits, Discard: s.opts.Discard, Prompt: s.opts.Prompt,
		SeparateStreams: s.opts.SeparateStreams}
	if s.opts.Warm {
		// A long-lived session: paths are resolved again for each call
		// (unless nothing the last compile read has changed).
		now := &policyNow{compile: compile}
		sb.runner.FSNow = func() (*fsrules.Policy, error) {
			p, err := now.get()
			if err == nil {
				for _, w := range p.Warnings {
					s.warnOnce(w) // not again at each call of a long session
				}
			}
			return p, err
		}
		if masksFiles {
			sb.runner.MasksNow, sb.runner.RedactorNow = sb.masks.now, sb.masks.redactor
		}
	}
	if sb.audit != nil {
		sb.runner.Decided = sb.audit.Gate
	}
	sb.runner.Warn = s.warnOnce
	return sb, nil
}

// toolchainCaches is the sandbox's own cache folder for this workspace
// ($XDG_CACHE_HOME/sbx/projects/NAME-HASH, or under ~/.cache), made if
// needed, and the variables that point the common toolchains at it:
// shared by the sandboxed runs of one project, never with the host's
// caches nor with other projects (an entry one project's sandbox poisons
// is never linked into a build of the host or of another project). A
// variable the environment already sets is left alone, but
// XDG_CACHE_HOME, which names the host's.
func (s *Session) toolchainCaches() (dir string, env []string) {
	base := absOrEmpty(s.getenv("XDG_CACHE_HOME"))
	if base == "" {
		base = filepath.Join(s.home, ".cache")
	}
	sum := sha256.Sum256([]byte(s.dir))
	dir = filepath.Join(base, "sbx", "projects", filepath.Base(s.dir)+"-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.warn("the sandbox's toolchain cache " + dir + " cannot be made: " + err.Error())
		return "", nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		s.warn("the sandbox's toolchain cache " + dir + " cannot be opened: " + err.Error())
		return "", nil
	}
	defer root.Close()
	for _, v := range []struct{ name, sub string }{
		{"XDG_CACHE_HOME", "xdg"},     // pip, uv, Go's build cache and every XDG tool
		{"npm_config_cache", "npm"},   // npm and npx
		{"YARN_CACHE_FOLDER", "yarn"}, // yarn 1
		{"PNPM_HOME", "pnpm"},         // pnpm's content-addressed store (PNPM_HOME/store; npm warns about npm_config_store_dir)
		{"GOMODCACHE", "go-mod"},      // module downloads and the checksum database
		{"BUN_INSTALL_CACHE_DIR", "bun"},
		{"DENO_DIR", "deno"},
		{"CLANG_MODULE_CACHE_PATH", "clang-modules"},        // clang's and Swift's module caches
		{"SWIFTPM_MODULECACHE_OVERRIDE", "swiftpm-modules"}, // SwiftPM's
		{"CARGO_HOME", "cargo"},                             // cargo's registry and git checkouts
	} {
		// The host's XDG cache and pnpm home (its store; pnpm's installer
		// sets PNPM_HOME) are read-only in the sandbox: always replaced.
		if v.name != "XDG_CACHE_HOME" && v.name != "PNPM_HOME" && s.getenv(v.name) != "" {
			continue
		}
		s.repairCache(root, v.sub)
		env = append(env, v.name+"="+filepath.Join(dir, v.sub))
		if v.name == "CARGO_HOME" {
			s.cargoConfig(dir, v.sub)
		}
	}
	return dir, env
}

// repairCache makes a cache folder that does not exist yet, and removes
// one's entry that an earlier run replaced with a link or a file: the
// sandbox writes the folder directly but never through a link (its writes
// there failed as read-only, run after run), so the tool starts afresh
// with a folder of its own.
func (s *Session) repairCache(root *os.Root, sub string) {
	fi, err := root.Lstat(sub)
	if errors.Is(err, fs.ErrNotExist) {
		// Made now: a tool that writes there without making it first
		// (echo x > $XDG_CACHE_HOME/f) finds it on the first run too.
		_ = root.Mkdir(sub, 0o700)
		return
	}
	if err != nil || fi.IsDir() {
		return
	}
	if err := root.Remove(sub); err != nil {
		s.warn("the sandbox's cache folder " + filepath.Join(root.Name(), sub) + " is not a folder and cannot be removed: " + err.Error())
		return
	}
	_ = root.Mkdir(sub, 0o700)
	s.warn("the sandbox's cache folder " + filepath.Join(root.Name(), sub) + " was not a folder (an earlier run replaced it); it starts empty")
}

// cargoConfig links the user's cargo configuration (~/.cargo/config.toml,
// or the older config) into the sandbox's CARGO_HOME (cache/sub), so
// registries, mirrors and build settings still apply; credentials.toml is
// not linked (registry tokens stay out of the sandbox). The folder is the
// sandbox's own: whatever the sandbox put there is left alone, and every
// path is resolved inside cache (os.Root), so a link the sandbox made
// cannot send this write anywhere else.
func (s *Session) cargoConfig(cache, sub string) {
	root, err := os.OpenRoot(cache)
	if err != nil {
		return
	}
	defer root.Close()
	if err := root.Mkdir(sub, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return
	}
	for _, name := range []string{"config.toml", "config"} {
		src := filepath.Join(s.home, ".cargo", name)
		if _, err := os.Stat(src); err != nil {
			continue
		}
		dst := filepath.Join(sub, name)
		if _, err := root.Lstat(dst); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := root.Symlink(src, dst); err != nil {
			s.warn("the sandbox's cargo cannot see " + src + ": " + err.Error())
		}
	}
}

// platform gathers the keys only some backends honour.
func (s *Session) platform() pipeline.Platform {
	var p pipeline.Platform
	for _, e := range s.st.AllowUnixSockets {
		p.UnixSockets = append(p.UnixSockets, e.Value)
	}
	p.AllUnixSockets = s.st.AllowAllUnixSockets.Or(false)
	p.LocalBinding = s.st.AllowLocalBinding.Or(false)
	p.WeakerNetworkIsolation = s.st.EnableWeakerNetworkIsolation.Or(false)
	p.MachLookup, _ = pipeline.CheckMachServices(s.st.AllowMachLookup) // build refuses a bad one
	return p
}

// ErrNested is returned when sbx already runs inside an sbx sandbox:
// sandboxes do not nest.
var ErrNested = errors.New("already inside an sbx sandbox (" + InsideMarker + "=1): sandboxes do not nest; run the command directly")

// ErrNotSandboxed is returned by Run when settings disable the sandbox and
// the session is not Unsandboxed.
var ErrNotSandboxed = errors.New("the sandbox is disabled")

func absOrEmpty(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return ""
}

// InsideMarker is set in every sandboxed command's environment
// (SBX_SANDBOX=1), so tools can tell they already run inside sbx.
const InsideMarker = "SBX_SANDBOX"

// commandEnv is the command's environment: the session's, with TMPDIR
// pointing at the sandbox's private /tmp and the inside marker set.
func commandEnv(environ []string) []string {
	out := make([]string, 0, len(environ)+2)
	for _, kv := range environ {
		if strings.HasPrefix(kv, "TMPDIR=") || strings.HasPrefix(kv, InsideMarker+"=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "TMPDIR=/tmp", InsideMarker+"=1")
}
