package pipeline

import (
	"fmt"
	"strings"

	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// refusedMachServices are the Mach services no setting opens: launchd, not
// the sandboxed process, starts what LaunchServices opens (a way out of
// the sandbox), and diagnosticd and analyticsd read or feed the system's
// logs. (com.apple.SecurityServer, the keychain, is refused by default and
// opened only when a setting names it.)
func refusedMachServices() []string {
	return []string{"com.apple.coreservices.launchservicesd", "com.apple.CoreServices.coreservicesd",
		"com.apple.lsd.mapdb", "com.apple.lsd.modifydb", "com.apple.diagnosticd", "com.apple.analyticsd"}
}

// MachServiceError is an allowMachLookup entry sbx refuses.
type MachServiceError struct {
	Entry settings.Entry
	Msg   string
}

func (e *MachServiceError) Error() string {
	where := "settings"
	if e.Entry.File != nil {
		where = e.Entry.File.Path
	}
	return fmt.Sprintf("%s: sandbox.network.allowMachLookup %q: %s", where, e.Entry.Value, e.Msg)
}

// CheckMachServices returns the Mach service names of allowMachLookup
// entries: a service name, or a prefix with a trailing *. A name that is
// neither, and one that is (or whose prefix covers) a refused service, is
// an error that names the file.
func CheckMachServices(entries []settings.Entry) ([]string, error) {
	var out []string
	for _, e := range entries {
		prefix, isPrefix := strings.CutSuffix(e.Value, "*")
		if !machName(prefix) {
			return nil, &MachServiceError{e, "not a Mach service name (letters, digits, '.', '-', '_', '@'; a trailing * for a prefix)"}
		}
		for _, r := range refusedMachServices() {
			if strings.EqualFold(r, prefix) || isPrefix && strings.HasPrefix(strings.ToLower(r), strings.ToLower(prefix)) {
				return nil, &MachServiceError{e, "it would reach " + r + ", through which the command can start programs outside the sandbox or read the system's logs; it cannot be allowed"}
			}
		}
		out = append(out, e.Value)
	}
	return out, nil
}

// machName reports whether s is a plausible Mach service name (what a
// profile may quote): at least a dot-separated name's first letter.
func machName(s string) bool {
	if s == "" || !isAlnum(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '.' && c != '-' && c != '_' && c != '@' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
