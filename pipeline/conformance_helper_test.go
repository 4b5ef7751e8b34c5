package pipeline

import "github.com/sbx-sandbox/sbx/fsrules"

func anchorForTest(r fsrules.Rule, home string) (string, error) {
	return fsrules.Anchor(r.Pattern, r.BaseDir, home)
}
