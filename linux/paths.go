package linux

import "strings"

// TmpInBudget is the directory of the disk budget that is the sandbox's
// /tmp.
const TmpInBudget = "tmp"

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}
