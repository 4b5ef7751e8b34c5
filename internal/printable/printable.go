// Package printable makes text that holds names a sandboxed command chose
// safe to write to a terminal.
package printable

import (
	"fmt"
	"strings"
	"unicode"
)

// Escape escapes what a terminal would act on (newlines, escape
// sequences, bidirectional overrides) in text that holds names the command
// chose, so no file name can forge or erase a line of sbx's.
func Escape(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}
