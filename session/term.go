package session

import (
	"os"

	"golang.org/x/term"
)

// IsTerminal reports whether v (a stream) is a terminal, not merely a
// character device such as /dev/null.
func IsTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
