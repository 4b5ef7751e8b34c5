package pipeline

import (
	"fmt"

	"github.com/sbx-sandbox/sbx/fsrules"
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
	in.AllowWrite = append(in.AllowWrite, fromFlags(flags.AllowWrite, "allow-write")...)
	in.DenyWrite = append(in.DenyWrite, fromFlags(flags.DenyWrite, "deny-write")...)
	in.DenyRead = append(in.DenyRead, fromFlags(flags.DenyRead, "deny-read")...)
	in.AllowRead = append(in.AllowRead, fromFlags(flags.AllowRead, "allow-read")...)
	return in
}
