// Package settings loads, validates and merges sbx settings files, which use
// Claude Code's settings.json schema.
//
// Levels, highest first: managed (/etc/sbx/managed-settings.json and
// managed-settings.d/*.json), command line (--settings FILE), project local
// (.sbx/settings.local.json), project (.sbx/settings.json) and user
// ($XDG_CONFIG_HOME/sbx/settings.json). With Claude set, Claude Code's files
// at the same levels are read too. Lists merge across levels; for scalars the
// highest level that sets the key wins.
//
// Project files live in the workspace, which may be untrusted: unless the
// project is trusted, their values that loosen the sandbox are dropped with a
// warning. Every error names the file, the line and column, and the key.
package settings

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/sbx-sandbox/sbx/internal/regular"
)

// Level is a settings level. Lower values take precedence.
type Level uint8

// The settings levels, highest precedence first.
const (
	LevelManaged Level = iota
	LevelCLI
	LevelProjectLocal
	LevelProject
	LevelUser
)

func (l Level) String() string {
	switch l {
	case LevelManaged:
		return "managed"
	case LevelCLI:
		return "cli"
	case LevelProjectLocal:
		return "projectLocal"
	case LevelProject:
		return "project"
	case LevelUser:
		return "user"
	}
	return fmt.Sprintf("level(%d)", l)
}

// IsProject reports whether files at this level live in the workspace.
func (l Level) IsProject() bool { return l == LevelProject || l == LevelProjectLocal }

// File is one loaded settings file.
type File struct {
	Path   string // file path, or "--settings (inline JSON)"
	Level  Level
	Claude bool // a Claude Code settings file rather than an sbx one
	// BaseDir anchors relative paths in this file: the project root for
	// project files and the command line, the file's directory otherwise.
	BaseDir string
	Root    *Node
}

// Warning is a problem that does not stop sbx from running.
type Warning struct {
	File string
	Pos  Pos
	Key  string
	Msg  string
}

func (w Warning) String() string {
	loc := w.File
	if w.Pos.Line > 0 {
		loc += ":" + w.Pos.String()
	}
	if w.Key != "" {
		return fmt.Sprintf("%s: %s: %s", loc, w.Key, w.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, w.Msg)
}

// Error is a settings problem that stops sbx: nothing runs.
type Error struct {
	File string
	Pos  Pos
	Key  string
	Msg  string
}

func (e *Error) Error() string {
	return Warning(*e).String()
}

// Entry is one list element with the file and position it came from.
type Entry struct {
	Value string
	File  *File
	Pos   Pos
}

// Bool is a boolean setting with where it was set; Set is false when no
// file sets it.
type Bool struct {
	V    bool
	Set  bool
	File *File
}

// Or returns the value, or def when no file sets it.
func (b Bool) Or(def bool) bool {
	if b.Set {
		return b.V
	}
	return def
}

// String is a string setting with where it was set.
type String struct {
	V    string
	Set  bool
	File *File
}

// Settings is the merged result of every settings file.
type Settings struct {
	Home  string  // the home directory the settings were read for
	Files []*File // every file read, lowest precedence first
	// Own are the files and directories settings are read from, whether
	// they exist or not (sbx's and Claude Code's, at every level): a
	// sandbox must never write them.
	Own      []string
	Warnings []Warning
	Trusted  bool // the project's loosening keys were honoured

	Enabled                  Bool
	FailIfUnavailable        Bool
	AllowUnsandboxedCommands Bool
	BwrapPath                String

	AllowWrite, DenyWrite, DenyRead, AllowRead []Entry
	AllowManagedReadPathsOnly                  Bool

	// AllowedDomains and DeniedDomains include the domains of
	// WebFetch(domain:…) allow and deny permission rules.
	AllowedDomains, DeniedDomains []Entry
	StrictAllowlist               Bool
	AllowManagedDomainsOnly       Bool
	// Unix sockets outside the sandbox the command may connect to (all of
	// them with AllowAllUnixSockets); macOS only: localhost binding, and
	// trustd lookups for Go TLS clients.
	AllowUnixSockets []Entry
	// AllowMachLookup are extra Mach services (macOS; a trailing * is a
	// prefix): sandbox.network.allowMachLookup and sandbox.allowMachLookup.
	AllowMachLookup              []Entry
	AllowAllUnixSockets          Bool
	AllowLocalBinding            Bool
	EnableWeakerNetworkIsolation Bool

	TrustedProjects []Entry

	// Perm is what the permission gate reads: rules, mode, hooks.
	Perm Permissions

	// Limits is sandbox.limits by key (maxProcs, maxMemory …): the raw
	// value (a number's text or a string) and where it was set.
	Limits map[string]String

	// Credentials is sandbox.credentials, merged: per variable the highest
	// level wins; patterns merge.
	Credentials Credentials
}

// CredentialVar is one variable's credential setting.
type CredentialVar struct {
	Mode  string
	Hosts []string
	File  *File
}

// Credentials is sandbox.credentials.
type Credentials struct {
	EnvVars  map[string]CredentialVar
	Patterns []Entry
}

// Options says where settings come from. Every field with a file system
// location can be pointed elsewhere for tests.
type Options struct {
	ProjectDir       string   // the workspace; required
	Home             string   // required
	ConfigHome       string   // $XDG_CONFIG_HOME; empty means Home/.config
	Files            []string // --settings values: a path, or inline JSON starting with '{'
	Claude           bool     // also read Claude Code's files
	TrustProject     bool     // --trust-project
	ManagedDir       string   // empty means /etc/sbx
	ClaudeManagedDir string   // empty means /etc/claude-code
	// ReadFile reads a settings file; nil means os.ReadFile. A file that
	// does not exist is skipped, except for --settings files.
	ReadFile func(name string) ([]byte, error)
	// Glob lists managed-settings.d entries; nil means filepath.Glob.
	Glob func(pattern string) ([]string, error)
}

type candidate struct {
	path     string
	level    Level
	claude   bool
	required bool
	inline   []byte
}

// ownPaths are the directories (and Claude Code's ~/.claude.json) that
// settings come from at the user, project and managed levels.
func (o *Options) ownPaths() []string {
	configHome := o.ConfigHome
	if configHome == "" {
		configHome = filepath.Join(o.Home, ".config")
	}
	managed, claudeManaged := o.ManagedDir, o.ClaudeManagedDir
	if managed == "" {
		managed = "/etc/sbx"
	}
	if claudeManaged == "" {
		claudeManaged = "/etc/claude-code"
	}
	// The files too, not only their directories: one may be a link (to a
	// dotfiles repository), whose target is then sbx's as well.
	return []string{filepath.Join(configHome, "sbx"), filepath.Join(o.Home, ".claude"), filepath.Join(o.Home, ".claude.json"),
		filepath.Join(o.ProjectDir, ".claude"), filepath.Join(o.ProjectDir, ".sbx"), managed, claudeManaged,
		filepath.Join(configHome, "sbx", "settings.json"), filepath.Join(o.Home, ".claude", "settings.json"),
		filepath.Join(o.Home, ".claude", "settings.local.json"), filepath.Join(o.Home, ".claude", "CLAUDE.md"),
		filepath.Join(o.ProjectDir, ".claude", "settings.json"), filepath.Join(o.ProjectDir, ".claude", "settings.local.json"),
		filepath.Join(o.ProjectDir, ".sbx", "settings.json"), filepath.Join(o.ProjectDir, ".sbx", "settings.local.json"),
		filepath.Join(managed, "managed-settings.json"), filepath.Join(claudeManaged, "managed-settings.json")}
}

// candidates lists the settings files in ascending precedence order.
func (o *Options) candidates() ([]candidate, error) {
	configHome := o.ConfigHome
	if configHome == "" {
		configHome = filepath.Join(o.Home, ".config")
	}
	managed := o.ManagedDir
	if managed == "" {
		managed = "/etc/sbx"
	}
	claudeManaged := o.ClaudeManagedDir
	if claudeManaged == "" {
		claudeManaged = "/etc/claude-code"
	}
	glob := o.Glob
	if glob == nil {
		glob = filepath.Glob
	}
	var c []candidate
	add := func(path string, level Level, claude bool) {
		c = append(c, candidate{path: path, level: level, claude: claude})
	}
	if o.Claude {
		add(filepath.Join(o.Home, ".claude", "settings.json"), LevelUser, true)
	}
	add(filepath.Join(configHome, "sbx", "settings.json"), LevelUser, false)
	if o.Claude {
		add(filepath.Join(o.ProjectDir, ".claude", "settings.json"), LevelProject, true)
	}
	add(filepath.Join(o.ProjectDir, ".sbx", "settings.json"), LevelProject, false)
	if o.Claude {
		add(filepath.Join(o.ProjectDir, ".claude", "settings.local.json"), LevelProjectLocal, true)
	}
	add(filepath.Join(o.ProjectDir, ".sbx", "settings.local.json"), LevelProjectLocal, false)
	for _, f := range o.Files {
		if strings.HasPrefix(strings.TrimSpace(f), "{") {
			c = append(c, candidate{path: "--settings (inline JSON)", level: LevelCLI, required: true, inline: []byte(f)})
			continue
		}
		// Relative to where sbx runs: its paths are relative to its
		// directory, which must be absolute.
		if abs, err := filepath.Abs(f); err == nil {
			f = abs
		}
		c = append(c, candidate{path: f, level: LevelCLI, required: true})
	}
	addManaged := func(dir string, claude bool) error {
		add(filepath.Join(dir, "managed-settings.json"), LevelManaged, claude)
		drop, err := glob(filepath.Join(dir, "managed-settings.d", "*.json"))
		if err != nil {
			return fmt.Errorf("settings: list %s: %w", dir, err)
		}
		sort.Strings(drop)
		for _, d := range drop {
			add(d, LevelManaged, claude)
		}
		return nil
	}
	if o.Claude {
		if err := addManaged(claudeManaged, true); err != nil {
			return nil, err
		}
	}
	if err := addManaged(managed, false); err != nil {
		return nil, err
	}
	return c, nil
}

// MaxFileSize bounds a settings file: a larger one is refused.
const MaxFileSize = 1 << 20

// readRegular reads a settings file that is a regular file (a link to one
// is followed) of at most MaxFileSize bytes. A FIFO, a device (a committed
// link to /dev/zero) or a directory is refused without being read.
func readRegular(name string) ([]byte, error) {
	data, err := ReadRegular(name, MaxFileSize)
	var nr *NotRegularError
	switch {
	case errors.As(err, &nr) && nr.Size >= 0:
		return nil, fmt.Errorf("larger than %d bytes: settings files are read up to 1 MiB", MaxFileSize)
	case errors.As(err, &nr):
		return nil, fmt.Errorf("not a regular file (%s): settings are read only from regular files", nr.Mode)
	}
	return data, err
}

// NotRegularError is a file ReadRegular refused without reading it: not a
// regular file (Size is -1), or larger than the bound (Size).
type NotRegularError = regular.NotRegularError

// ReadRegular reads a regular file of at most max bytes (links are
// followed); a FIFO, a device or a directory is refused without being read
// (opened non-blocking, never waited on).
func ReadRegular(path string, max int64) ([]byte, error) { return regular.Read(path, max) }

// Load reads, validates and merges every settings file. It returns an error
// for invalid JSON, a value of the wrong type, an unknown key inside a
// security section, or a key whose non-default value sbx cannot honour.
func Load(o Options) (*Settings, error) {
	if o.ProjectDir == "" || o.Home == "" {
		return nil, errors.New("settings: ProjectDir and Home are required")
	}
	read := o.ReadFile
	if read == nil {
		read = readRegular
	}
	cands, err := o.candidates()
	if err != nil {
		return nil, err
	}
	s := &Settings{Home: o.Home, Own: o.ownPaths()}
	for _, c := range cands {
		if c.inline == nil && c.level == LevelCLI {
			s.Own = append(s.Own, c.path)
		}
		data := c.inline
		if data == nil {
			data, err = read(c.path)
			// ENOTDIR: a directory on the way is a file (such as a running
			// sandbox's placeholder for an absent .claude), so the file
			// does not exist either.
			if (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) && !c.required {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("settings: read %s: %w", c.path, err)
			}
		}
		root, err := ParseJSON(c.path, data)
		if err != nil {
			return nil, err
		}
		if n := replacementChar(root); n != nil {
			return nil, &ParseError{File: c.path, Pos: n.Pos, Msg: "a string holds U+FFFD (from an escape that is not a character, such as a lone \\udcff): it would name another path than the one meant; rename the file, or match it with a wildcard"}
		}
		f := &File{Path: c.path, Level: c.level, Claude: c.claude, Root: root}
		switch {
		case c.level.IsProject() || c.inline != nil:
			f.BaseDir = o.ProjectDir
		default:
			f.BaseDir = filepath.Dir(c.path)
		}
		if err := s.validate(f); err != nil {
			return nil, err
		}
		if err := s.validatePermissions(f); err != nil {
			return nil, err
		}
		s.Files = append(s.Files, f)
	}
	s.Trusted = o.TrustProject || s.trusts(o.ProjectDir)
	for _, f := range s.Files {
		s.apply(f)
		s.applyPermissions(f)
		if err := s.applyCredentials(f); err != nil {
			return nil, err
		}
	}
	s.finishPermissions()
	if s.AllowManagedDomainsOnly.Or(false) {
		s.AllowedDomains = slices.DeleteFunc(s.AllowedDomains, func(e Entry) bool { return e.File.Level != LevelManaged })
	}
	if s.AllowManagedReadPathsOnly.Or(false) {
		s.AllowRead = slices.DeleteFunc(s.AllowRead, func(e Entry) bool { return e.File.Level != LevelManaged })
	}
	return s, nil
}

// trusts reports whether a user or managed file lists the project in
// sbx.trustedProjects.
func (s *Settings) trusts(project string) bool {
	want := filepath.Clean(project)
	if r, err := filepath.EvalSymlinks(want); err == nil {
		want = r
	}
	for _, f := range s.Files {
		if f.Level != LevelUser && f.Level != LevelManaged {
			continue
		}
		n := lookup(f.Root, "sbx.trustedProjects")
		if n == nil {
			continue
		}
		for _, e := range n.Elems {
			p := expandHome(e.Str, filepath.Dir(f.Path))
			if r, err := filepath.EvalSymlinks(p); err == nil {
				p = r
			}
			if filepath.Clean(p) == want {
				return true
			}
		}
	}
	return false
}

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// lookup returns the node at a dotted key path, or nil.
func lookup(root *Node, path string) *Node {
	n := root
	for _, k := range strings.Split(path, ".") {
		if n == nil || n.Kind != KindObject {
			return nil
		}
		n = n.Fields[k]
	}
	return n
}

// validate checks the types and keys of one file.
func (s *Settings) validate(f *File) error {
	if f.Root.Kind != KindObject {
		return &Error{File: f.Path, Pos: f.Root.Pos, Msg: "settings must be a JSON object, got " + f.Root.Kind.String()}
	}
	for _, k := range f.Root.Keys {
		v := f.Root.Fields[k]
		want, known := topLevel[k]
		if !known {
			s.Warnings = append(s.Warnings, Warning{File: f.Path, Pos: v.Pos, Key: k, Msg: "unknown key, ignored"})
			continue
		}
		if v.Kind != want {
			return &Error{File: f.Path, Pos: v.Pos, Key: k, Msg: fmt.Sprintf("expected %s, got %s", want, v.Kind)}
		}
		if objects[k] {
			if err := s.validateObject(f, k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Settings) validateObject(f *File, path string, obj *Node) error {
	for _, k := range obj.Keys {
		v := obj.Fields[k]
		key := path + "." + k
		if objects[key] {
			if v.Kind != KindObject {
				return &Error{File: f.Path, Pos: v.Pos, Key: key, Msg: "expected object, got " + v.Kind.String()}
			}
			if err := s.validateObject(f, key, v); err != nil {
				return err
			}
			continue
		}
		spec, ok := schema[key]
		if !ok {
			return &Error{File: f.Path, Pos: v.Pos, Key: key,
				Msg: "unknown key in a security section; fix the spelling or remove it (sbx refuses keys it does not understand here)"}
		}
		if v.Kind == KindNull {
			continue // null means unset
		}
		if v.Kind != spec.kind {
			return &Error{File: f.Path, Pos: v.Pos, Key: key, Msg: fmt.Sprintf("expected %s, got %s", kindName(spec.kind), v.Kind)}
		}
		if spec.kind == KindArray {
			for i, e := range v.Elems {
				if e.Kind != KindString {
					return &Error{File: f.Path, Pos: e.Pos, Key: fmt.Sprintf("%s[%d]", key, i), Msg: "expected string, got " + e.Kind.String()}
				}
			}
		}
		switch spec.status {
		case unsupportedLooser:
			return &Error{File: f.Path, Pos: v.Pos, Key: key, Msg: "not supported: " + spec.note}
		case ignoredStricter:
			if spec.loosens == nil || spec.loosens(v) {
				s.Warnings = append(s.Warnings, Warning{File: f.Path, Pos: v.Pos, Key: key, Msg: "not supported, ignored (" + spec.note + ")"})
			}
		}
		if spec.managedOnly && f.Level != LevelManaged {
			s.Warnings = append(s.Warnings, Warning{File: f.Path, Pos: v.Pos, Key: key, Msg: "only honoured in managed settings, ignored"})
		}
	}
	return nil
}

func kindName(k Kind) string {
	if k == KindArray {
		return "array of strings"
	}
	return k.String()
}

// honoured reports whether the value of key in f takes effect, warning when
// an untrusted project file tries to loosen the sandbox.
func (s *Settings) honoured(f *File, key string, v *Node) bool {
	spec := schema[key]
	if v == nil || v.Kind == KindNull || spec.status != supported {
		return false
	}
	if spec.managedOnly && f.Level != LevelManaged {
		return false
	}
	if key == "sbx.trustedProjects" && f.Level != LevelUser && f.Level != LevelManaged {
		s.Warnings = append(s.Warnings, Warning{File: f.Path, Pos: v.Pos, Key: key, Msg: "only read from user and managed settings, ignored"})
		return false
	}
	if f.Level.IsProject() && !s.Trusted && spec.loosens != nil && spec.loosens(v) {
		s.Warnings = append(s.Warnings, Warning{File: f.Path, Pos: v.Pos, Key: key,
			Msg: "loosens the sandbox from an untrusted project file, ignored (trust the project with --trust-project or sbx.trustedProjects in user settings)"})
		return false
	}
	return true
}

// apply merges one validated file. Files arrive lowest precedence first, so
// a later scalar overrides an earlier one.
func (s *Settings) apply(f *File) {
	boolKey := func(key string, dst *Bool) {
		if v := lookup(f.Root, key); s.honoured(f, key, v) {
			*dst = Bool{V: v.Bool, Set: true, File: f}
		}
	}
	strKey := func(key string, dst *String) {
		if v := lookup(f.Root, key); s.honoured(f, key, v) {
			*dst = String{V: v.Str, Set: true, File: f}
		}
	}
	listKey := func(key string, dst *[]Entry) {
		if v := lookup(f.Root, key); s.honoured(f, key, v) {
			for _, e := range v.Elems {
				*dst = append(*dst, Entry{Value: e.Str, File: f, Pos: e.Pos})
			}
		}
	}
	boolKey("sandbox.enabled", &s.Enabled)
	boolKey("sandbox.failIfUnavailable", &s.FailIfUnavailable)
	boolKey("sandbox.allowUnsandboxedCommands", &s.AllowUnsandboxedCommands)
	strKey("sandbox.bwrapPath", &s.BwrapPath)
	listKey("sandbox.filesystem.allowWrite", &s.AllowWrite)
	listKey("sandbox.filesystem.denyWrite", &s.DenyWrite)
	listKey("sandbox.filesystem.denyRead", &s.DenyRead)
	listKey("sandbox.filesystem.allowRead", &s.AllowRead)
	boolKey("sandbox.filesystem.allowManagedReadPathsOnly", &s.AllowManagedReadPathsOnly)
	listKey("sandbox.network.allowedDomains", &s.AllowedDomains)
	listKey("sandbox.network.allowUnixSockets", &s.AllowUnixSockets)
	listKey("sandbox.network.allowMachLookup", &s.AllowMachLookup)
	listKey("sandbox.allowMachLookup", &s.AllowMachLookup)
	boolKey("sandbox.network.allowAllUnixSockets", &s.AllowAllUnixSockets)
	boolKey("sandbox.network.allowLocalBinding", &s.AllowLocalBinding)
	boolKey("sandbox.enableWeakerNetworkIsolation", &s.EnableWeakerNetworkIsolation)
	listKey("sandbox.network.deniedDomains", &s.DeniedDomains)
	s.webFetchRules(f)
	boolKey("sandbox.network.strictAllowlist", &s.StrictAllowlist)
	boolKey("sandbox.network.allowManagedDomainsOnly", &s.AllowManagedDomainsOnly)
	listKey("sbx.trustedProjects", &s.TrustedProjects)
	for _, k := range []string{"maxProcs", "maxMemory", "maxCpu", "timeout", "maxOutput", "maxTmp", "maxOpenFiles", "maxDisk"} {
		key := "sandbox.limits." + k
		if v := lookup(f.Root, key); s.honoured(f, key, v) {
			text := v.Str
			if v.Kind == KindNumber {
				text = v.Number.String()
			}
			if s.Limits == nil {
				s.Limits = map[string]String{}
			}
			s.Limits[k] = String{V: text, Set: true, File: f}
		}
	}
	// Managed locks: once a managed file sets a scalar, lower levels cannot
	// override it, because managed files are applied last.
}

// webFetchRules adds the domains of WebFetch(domain:…) permission rules to
// the network lists: allow rules join allowedDomains (loosening: not from an
// untrusted project), deny rules join deniedDomains. "domain:*" is the
// whole tool and names no domain.
func (s *Settings) webFetchRules(f *File) {
	for _, list := range []struct {
		key string
		dst *[]Entry
	}{{"permissions.allow", &s.AllowedDomains}, {"permissions.deny", &s.DeniedDomains}} {
		n := lookup(f.Root, list.key)
		if n == nil || n.Kind != KindArray {
			continue
		}
		for _, e := range n.Elems {
			if e.Kind != KindString {
				continue
			}
			tool, spec, _, err := SplitRule(e.Str)
			d, ok := strings.CutPrefix(spec, "domain:")
			if err != nil || tool != "WebFetch" || !ok {
				continue
			}
			d = strings.TrimSpace(d)
			if d == "" || d == "*" {
				continue
			}
			if list.key == "permissions.allow" && f.Level.IsProject() && !s.Trusted {
				s.Warnings = append(s.Warnings, Warning{File: f.Path, Pos: e.Pos, Key: list.key,
					Msg: "WebFetch allow rule from an untrusted project file does not open the network, ignored (trust the project with --trust-project)"})
				continue
			}
			*list.dst = append(*list.dst, Entry{Value: d, File: f, Pos: e.Pos})
		}
	}
}

// applyCredentials reads sandbox.credentials: {"envVars": {NAME: {"mode":
// "mask"|"deny"|"pass", "hosts": [...]}}, "patterns": [regexp …]}. An
// untrusted project may only make a variable stricter (deny or mask without
// hosts), never pass it or bind it to hosts.
func (s *Settings) applyCredentials(f *File) error {
	c := lookup(f.Root, "sandbox.credentials")
	if c == nil || c.Kind != KindObject {
		return nil
	}
	untrusted := f.Level.IsProject() && !s.Trusted
	for _, k := range c.Keys {
		v := c.Fields[k]
		key := "sandbox.credentials." + k
		switch k {
		case "envVars":
			if v.Kind != KindObject {
				return &Error{File: f.Path, Pos: v.Pos, Key: key, Msg: "expected object of variable names"}
			}
			for _, name := range v.Keys {
				vv := v.Fields[name]
				vkey := key + "." + name
				if vv.Kind != KindObject {
					return &Error{File: f.Path, Pos: vv.Pos, Key: vkey, Msg: "expected object with mode and hosts"}
				}
				cv := CredentialVar{File: f}
				for _, fk := range vv.Keys {
					fv := vv.Fields[fk]
					switch fk {
					case "mode":
						if fv.Kind != KindString || (fv.Str != "mask" && fv.Str != "deny" && fv.Str != "pass") {
							return &Error{File: f.Path, Pos: fv.Pos, Key: vkey + ".mode", Msg: "expected \"mask\", \"deny\" or \"pass\""}
						}
						cv.Mode = fv.Str
					case "hosts":
						if fv.Kind != KindArray {
							return &Error{File: f.Path, Pos: fv.Pos, Key: vkey + ".hosts", Msg: "expected array of strings"}
						}
						for _, h := range fv.Elems {
							if h.Kind != KindString {
								return &Error{File: f.Path, Pos: h.Pos, Key: vkey + ".hosts", Msg: "expected string"}
							}
							cv.Hosts = append(cv.Hosts, h.Str)
						}
					default:
						return &Error{File: f.Path, Pos: fv.Pos, Key: vkey + "." + fk, Msg: "unknown key (mode, hosts)"}
					}
				}
				if untrusted && (cv.Mode == "pass" || len(cv.Hosts) > 0) {
					s.Warnings = append(s.Warnings, Warning{File: f.Path, Pos: vv.Pos, Key: vkey,
						Msg: "loosens credential handling from an untrusted project file, ignored"})
					continue
				}
				if s.Credentials.EnvVars == nil {
					s.Credentials.EnvVars = map[string]CredentialVar{}
				}
				s.Credentials.EnvVars[name] = cv
			}
		case "patterns":
			if v.Kind != KindArray {
				return &Error{File: f.Path, Pos: v.Pos, Key: key, Msg: "expected array of strings"}
			}
			for _, e := range v.Elems {
				if e.Kind != KindString {
					return &Error{File: f.Path, Pos: e.Pos, Key: key, Msg: "expected string"}
				}
				s.Credentials.Patterns = append(s.Credentials.Patterns, Entry{Value: e.Str, File: f, Pos: e.Pos})
			}
		default:
			return &Error{File: f.Path, Pos: v.Pos, Key: key, Msg: "unknown key in a security section (envVars, patterns)"}
		}
	}
	return nil
}
