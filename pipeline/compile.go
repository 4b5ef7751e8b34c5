package pipeline

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/netrules"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// FSFlags are the filesystem flags of the command line. Relative paths in
// them are relative to the workspace.
type FSFlags struct {
	AllowWrite, DenyWrite, DenyRead, AllowRead []string
}

// FSInput gathers the filesystem lists of the merged settings and the flags
// into an [fsrules.Input], each rule anchored at its own base directory and
// labelled with the file, line and key it came from.
func FSInput(s *settings.Settings, flags FSFlags, workspace string) fsrules.Input {
	in := fsrules.Input{Workspace: workspace}
	fromSettings := func(es []settings.Entry, key string) []fsrules.Rule {
		var rs []fsrules.Rule
		for _, e := range es {
			rs = append(rs, fsrules.Rule{
				Pattern: e.Value,
				BaseDir: e.File.BaseDir,
				Origin:  fmt.Sprintf("%s:%s (sandbox.filesystem.%s)", e.File.Path, e.Pos, key),
			})
		}
		return rs
	}
	fromFlags := func(vs []string, flag string) []fsrules.Rule {
		var rs []fsrules.Rule
		for _, v := range vs {
			rs = append(rs, fsrules.Rule{Pattern: v, BaseDir: workspace, Origin: "--" + flag})
		}
		return rs
	}
	if s != nil {
		in.AllowWrite = fromSettings(s.AllowWrite, "allowWrite")
		in.DenyWrite = fromSettings(s.DenyWrite, "denyWrite")
		in.DenyRead = fromSettings(s.DenyRead, "denyRead")
		in.AllowRead = fromSettings(s.AllowRead, "allowRead")
	}
	if s != nil {
		permissionPaths(s, workspace, &in)
	}
	in.AllowWrite = append(in.AllowWrite, fromFlags(flags.AllowWrite, "allow-write")...)
	in.DenyWrite = append(in.DenyWrite, fromFlags(flags.DenyWrite, "deny-write")...)
	in.DenyRead = append(in.DenyRead, fromFlags(flags.DenyRead, "deny-read")...)
	in.AllowRead = append(in.AllowRead, fromFlags(flags.AllowRead, "allow-read")...)
	return in
}

// NetFlags are the network flags of the command line.
type NetFlags struct {
	AllowDomain, DenyDomain []string
}

// NetInput compiles the network lists of the merged settings and the flags.
// Strict is sandbox.network.strictAllowlist when a file sets it; otherwise
// sbx's default: strict unless the session is interactive.
func NetInput(s *settings.Settings, flags NetFlags, interactive bool) (*NetPolicy, error) {
	var allow, deny []netrules.Entry
	if s != nil {
		for _, e := range s.AllowedDomains {
			allow = append(allow, netrules.Entry{Pattern: e.Value, Origin: fmt.Sprintf("%s:%s", e.File.Path, e.Pos)})
		}
		for _, e := range s.DeniedDomains {
			deny = append(deny, netrules.Entry{Pattern: e.Value, Origin: fmt.Sprintf("%s:%s", e.File.Path, e.Pos)})
		}
	}
	for _, d := range flags.AllowDomain {
		allow = append(allow, netrules.Entry{Pattern: d, Origin: "--allow-domain"})
	}
	for _, d := range flags.DenyDomain {
		deny = append(deny, netrules.Entry{Pattern: d, Origin: "--deny-domain"})
	}
	rules, err := netrules.Compile(allow, deny)
	if err != nil {
		return nil, err
	}
	strict := !interactive
	if s != nil && s.StrictAllowlist.Set {
		strict = s.StrictAllowlist.V
	}
	return &NetPolicy{Rules: rules, Strict: strict}, nil
}

// permissionPaths adds the paths of permission rules to the sandbox lists,
// as Claude Code does: Edit allow rules join allowWrite, Edit deny rules
// denyWrite, Read deny rules denyRead. Their anchors are the permission
// rules' own ("/path" is relative to the settings file's base). Patterns
// with wildcards other than a trailing "/**" are left to the permission
// layer for the write lists; a bare name ("Read(.env)") denies reading it
// at any depth of the workspace (what exists at start).
func permissionPaths(s *settings.Settings, cwd string, in *fsrules.Input) {
	for _, pr := range s.Perm.Rules {
		raw := strings.TrimSpace(pr.Rule)
		tool, spec, ok := strings.Cut(raw, "(")
		if !ok || !strings.HasSuffix(spec, ")") || (tool != "Read" && tool != "Edit") {
			continue
		}
		spec = strings.TrimSuffix(spec, ")")
		var list *[]fsrules.Rule
		switch {
		case tool == "Read" && pr.Behavior == "deny":
			list = &in.DenyRead
		case tool == "Edit" && pr.Behavior == "deny":
			list = &in.DenyWrite
		case tool == "Edit" && pr.Behavior == "allow":
			list = &in.AllowWrite
		default:
			continue
		}
		p := strings.TrimSuffix(strings.TrimSuffix(spec, "/**"), "/")
		var abs string
		switch {
		case strings.HasPrefix(p, "//"):
			abs = "/" + strings.TrimLeft(p, "/")
		case strings.HasPrefix(p, "~/") || p == "~":
			abs = p // fsrules anchors ~ itself
		case strings.HasPrefix(p, "/"):
			abs = filepath.Join(settingsBase(pr, cwd), p)
		case !strings.Contains(strings.TrimPrefix(p, "./"), "/") && !strings.HasPrefix(p, "./"):
			abs = filepath.Join(cwd, "**", p)
		default:
			abs = filepath.Join(cwd, strings.TrimPrefix(p, "./"))
		}
		if list != &in.DenyRead && strings.ContainsAny(abs, "*?[") {
			continue
		}
		*list = append(*list, fsrules.Rule{Pattern: abs, BaseDir: cwd, Origin: pr.Where()})
	}
}
