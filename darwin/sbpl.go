package darwin

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// ProfileInput is what a Seatbelt profile is generated from: the same
// compiled policy as on Linux, plus the macOS run's specifics.
type ProfileInput struct {
	FS *fsrules.Policy
	// TmpDir is the run's private temporary directory (TMPDIR), writable.
	TmpDir string
	// UserCacheDir is the run's private folder in the per-user cache
	// directory (see [RunDirs]), writable; "" when there is none.
	UserCacheDir string
	// ProxyPort is the proxy's port on localhost; 0 means no network.
	ProxyPort int
	// UnixSockets are socket paths (or directories of them) the command
	// may connect to and bind (sandbox.network.allowUnixSockets).
	UnixSockets []string
	// EvalSymlinks resolves the links in a path (filepath.EvalSymlinks);
	// the socket paths are allowed as given and as resolved by it. Nil
	// means as given only. The caller supplies it, so that [Profile]
	// itself reads nothing of the machine.
	EvalSymlinks func(string) (string, error)
	// LocalBinding lets the command listen and reach its own servers
	// (sandbox.network.allowLocalBinding), as Codex's rules do: bind on any
	// address, accept only connections to a loopback address, connect to
	// any loopback port. That last part also reaches every other service
	// listening on the host's loopback (databases, a Docker TCP API, other
	// tools' servers): Seatbelt cannot tell the command's own servers from
	// them. Whether "localhost" in a rule covers an IPv4-mapped IPv6
	// address (::ffff:127.0.0.1) has not been checked on a Mac.
	LocalBinding bool
	// TrustdLookup adds com.apple.trustd.agent to the mach services, which
	// Go TLS clients need (sandbox.enableWeakerNetworkIsolation).
	TrustdLookup bool
	// MachLookup are more Mach services, names or prefixes ending in *
	// (sandbox.network.allowMachLookup, checked by
	// pipeline.CheckMachServices): "com.apple.SecurityServer" is the
	// keychain's opt-in.
	MachLookup []string
	// Tag, when set (letters, digits, underscores: see [NewTag]), is the
	// message of every deny rule, so the run's denials can be found in the
	// unified log.
	Tag string
}

// machServices are the Mach services every profile may look up: name
// resolution through the proxy needs none, but the system's logging,
// directory and security services are used by ordinary tools.
var machServices = []string{
	"com.apple.system.opendirectoryd.libinfo",
	"com.apple.system.logger",
	"com.apple.system.notification_center",
	"com.apple.distributed_notifications@Uv3",
	"com.apple.logd",
	"com.apple.FSEvents",
	"com.apple.fonts",
	"com.apple.bsd.dirhelper",
	// Group membership (id, ls -l, getgrouplist), as srt allows.
	"com.apple.system.opendirectoryd.membership",
	// Preferences (CFPreferences, `defaults read`), read only: see
	// prefsRules.
	"com.apple.cfprefsd.daemon",
	"com.apple.cfprefsd.agent",
}

// Mach services no profile may look up: launchd, not the sandboxed
// process, starts what LaunchServices opens; diagnosticd reads the unified
// log; SecurityServer opens the login keychain (items that trust
// /usr/bin/security come out without a prompt).
var machRefused = []string{"com.apple.coreservices.launchservicesd", "com.apple.CoreServices.coreservicesd",
	"com.apple.lsd.mapdb", "com.apple.diagnosticd", "com.apple.analyticsd", "com.apple.SecurityServer"}

// sysctlNames are the sysctls a command may read (as Codex allows): the
// machine's shape and the system's version. Not kern.proc.* nor
// kern.procargs*: those show other processes' environments, sbx's own
// with the real secrets among them.
var sysctlNames = []string{"hw.activecpu", "hw.busfrequency_compat", "hw.byteorder", "hw.cacheconfig",
	"hw.cachelinesize_compat", "hw.cpufamily", "hw.cpufrequency_compat", "hw.cputype", "hw.l1dcachesize_compat",
	"hw.l1icachesize_compat", "hw.l2cachesize_compat", "hw.l3cachesize_compat", "hw.logicalcpu", "hw.logicalcpu_max",
	"hw.machine", "hw.memsize", "hw.model", "hw.ncpu", "hw.nperflevels", "hw.pagesize", "hw.pagesize_compat",
	"hw.physicalcpu", "hw.physicalcpu_max", "hw.tbfrequency_compat", "hw.vectorunit", "kern.argmax", "kern.hostname",
	"kern.maxfilesperproc", "kern.maxproc", "kern.ngroups", "kern.osproductversion", "kern.osrelease", "kern.ostype",
	"kern.osvariant_status", "kern.osversion", "kern.secure_kernel", "kern.tcsm_available", "kern.tcsm_enable", "kern.usrstack64", "kern.version",
	"sysctl.proc_cputype", "sysctl.proc_translated"}

// sysctlPrefixes are sysctl name prefixes a command may read.
var sysctlPrefixes = []string{"hw.optional.", "hw.perflevel"}

// sysctlWrite are the sysctls a command may set: V8 turns on TCSM for its
// threads (kern.tcsm_enable); Java's CPU detection passes a buffer to
// kern.grade_cputype, which counts as a write (as srt and Codex allow).
var sysctlWrite = []string{"kern.grade_cputype", "kern.tcsm_enable"}

// devIoctl are the devices a command may ioctl besides the terminals:
// without /dev/dtracehelper dyld logs a violation for many programs.
var devIoctl = []string{"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/dtracehelper", "/dev/tty"}

// devWrite are device files a command may write.
var devWrite = []string{"/dev/null", "/dev/zero", "/dev/tty", "/dev/dtracehelper", "/dev/stdout", "/dev/stderr"}

// ErrUnsafePath is returned for a path that cannot be put in a profile
// safely: not UTF-8, or holding a control character.
var ErrUnsafePath = errors.New("path cannot be written into a Seatbelt profile")

// Quote renders s as an SBPL string literal. Backslash and double quote are
// escaped; any other character stands for itself. Paths that are not UTF-8
// or hold control characters are refused, so no input can change the
// profile's structure.
func Quote(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%w: %q is not UTF-8", ErrUnsafePath, s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("%w: %q holds a control character", ErrUnsafePath, s)
		}
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`, nil
}

// regexQuote escapes every POSIX extended-regex metacharacter of s.
func regexQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// escapeGlob quotes the wildcard characters of a literal path for
// globRegex.
func escapeGlob(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if strings.IndexByte(`*?[]{},\`, p[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// globRegex turns an absolute doublestar pattern into a POSIX extended
// regex that matches what the pattern matches and everything inside it,
// in either case (a name that does not exist yet is matched as the
// command writes it, and APFS folds case): a "/**" segment any
// directories (or none), another "**" anything, "*" and "?" within one
// path segment, "{a,b}" alternatives, "[...]" a class ("[!...]" negated).
func globRegex(glob string) string {
	var b strings.Builder
	b.WriteByte('^')
	depth := 0 // open {…} alternatives: only there is a comma one
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; {
		case strings.HasPrefix(glob[i:], "/**") && (i+3 == len(glob) || glob[i+3] == '/'):
			b.WriteString("(/.*)?") // a whole segment: any directories, or none
			i += 2
		case strings.HasPrefix(glob[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '{':
			depth++
			b.WriteByte('(')
		case c == '}' && depth > 0:
			depth--
			b.WriteByte(')')
		case c == ',' && depth > 0:
			b.WriteByte('|')
		case c == '[':
			j := strings.IndexByte(glob[i+1:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class, neg := glob[i+1:i+1+j], ""
			if strings.HasPrefix(class, "!") {
				class, neg = class[1:], "^"
			}
			b.WriteString("[" + neg + strings.ReplaceAll(foldClass(class), `\`, `\\`) + "]")
			i += j + 1
		case c == '\\' && i+1 < len(glob):
			i++
			b.WriteString(caseless(glob[i : i+1]))
		default:
			// A run of letters APFS folds from one character (fi, ss)
			// is matched whole: caseless of one byte cannot see it.
			n, _ := foldSeq(glob[i:])
			n = max(n, 1)
			b.WriteString(caseless(glob[i : i+n]))
			i += n - 1
		}
	}
	for ; depth > 0; depth-- {
		b.WriteByte(')') // an unclosed brace: doublestar refuses the pattern
	}
	b.WriteString("(/.*)?$")
	return b.String()
}

// foldClass adds to a bracket expression's content the other case of its
// ASCII letters and of its ranges of letters of one case (a-f: A-F).
func foldClass(class string) string {
	swap := func(c byte) byte {
		switch {
		case 'a' <= c && c <= 'z':
			return c - 'a' + 'A'
		case 'A' <= c && c <= 'Z':
			return c - 'A' + 'a'
		}
		return c
	}
	letter := func(c byte) bool { return swap(c) != c }
	lower := func(c byte) bool { return 'a' <= c && c <= 'z' }
	var extra []byte
	for i := 0; i < len(class); i++ {
		c := class[i]
		if i+2 < len(class) && class[i+1] == '-' {
			if d := class[i+2]; letter(c) && letter(d) && lower(c) == lower(d) {
				extra = append(extra, swap(c), '-', swap(d))
			}
			i += 2
			continue
		}
		if letter(c) {
			extra = append(extra, swap(c))
		}
	}
	return class + string(extra)
}

// caseless is regexQuote(s) matching ASCII letters in either case, and
// the other characters APFS's case folding takes for them: KELVIN SIGN
// for k, LONG S for s, and the ligatures and sharp s that fold to two or
// three letters (ﬁ is fi: .pnpm\ufb01le.cjs is .pnpmfile.cjs there). The
// bytes of other characters stand for themselves (a byte taken for a
// Latin-1 letter and folded would no longer be UTF-8, and the profile
// would be refused). A sequence is split greedily, longest first, so an
// overlapping one (sﬆ for sst) is not matched.
func caseless(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		n, alt := foldSeq(s[i:])
		if n == 0 {
			b.WriteString(caselessByte(s[i]))
			i++
			continue
		}
		var seq strings.Builder
		for j := 0; j < n; j++ {
			seq.WriteString(caselessByte(s[i+j]))
		}
		b.WriteString("(" + seq.String() + "|" + strings.Join(alt, "|") + ")")
		i += n
	}
	return b.String()
}

// folds are the sequences of ASCII letters that APFS's case folding also
// finds in another character (longest first), with those characters, and
// for the three-letter ones the mixed spellings.
var folds = []struct {
	seq string
	alt []string
}{
	{"ffi", []string{"\ufb03", "\ufb00[iI]", "[fF]\ufb01"}},
	{"ffl", []string{"\ufb04", "\ufb00[lL]", "[fF]\ufb02"}},
	{"ff", []string{"\ufb00"}},
	{"fi", []string{"\ufb01"}},
	{"fl", []string{"\ufb02"}},
	{"st", []string{"\ufb05", "\ufb06"}},
	{"ss", []string{"\u00df", "\u1e9e"}},
}

// foldSeq returns the length of the fold sequence s starts with, and its
// other spellings (0: none).
func foldSeq(s string) (int, []string) {
	for _, f := range folds {
		if len(s) >= len(f.seq) && asciiEqualFold(s[:len(f.seq)], f.seq) {
			return len(f.seq), f.alt
		}
	}
	return 0, nil
}

// asciiEqualFold reports whether a and b are equal but for the case of
// ASCII letters (strings.EqualFold would take KELVIN SIGN for k).
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// caselessByte is one byte of caseless.
func caselessByte(c byte) string {
	switch {
	case c == 'k' || c == 'K':
		return "([kK]|\u212a)" // KELVIN SIGN: APFS decomposes it to K
	case c == 's' || c == 'S':
		return "([sS]|\u017f)" // LONG S: it case-folds to s
	case 'a' <= c && c <= 'z':
		return "[" + string(rune(c)) + string(rune(c-'a'+'A')) + "]"
	case 'A' <= c && c <= 'Z':
		return "[" + string(rune(c-'A'+'a')) + string(rune(c)) + "]"
	}
	var b strings.Builder
	quoteByte(&b, c)
	return b.String()
}

// quoteByte writes c, escaped when it is an extended-regex metacharacter
// (bytes of a multi-byte character pass through as they are).
func quoteByte(b *strings.Builder, c byte) {
	if strings.IndexByte(`\.+*?()|[]{}^$`, c) >= 0 {
		b.WriteByte('\\')
	}
	b.WriteByte(c)
}

// profile accumulates rules; each call adds one top-level form.
type profile struct {
	b     strings.Builder
	err   error
	forms int
	// with is appended to every deny rule: the tag's message modifier.
	with string
}

func (p *profile) raw(s string) {
	p.b.WriteString(s)
	p.b.WriteByte('\n')
	p.forms++
}

func (p *profile) comment(s string) { p.b.WriteString(";; " + s + "\n") }

// rule adds (action op filter...) with each filter (kind "path").
func (p *profile) rule(action, op string, filters [][2]string) {
	if len(filters) == 0 {
		return
	}
	var parts []string
	for _, f := range filters {
		q, err := Quote(f[1])
		if err != nil {
			p.err = errors.Join(p.err, err)
			continue
		}
		parts = append(parts, fmt.Sprintf("(%s %s)", f[0], q))
	}
	if len(parts) == 0 {
		return
	}
	if action == "deny" && p.with != "" {
		parts = append(parts, p.with)
	}
	p.raw(fmt.Sprintf("(%s %s\n  %s)", action, op, strings.Join(parts, "\n  ")))
}

// q quotes s (see [Quote]); a path that cannot be quoted is recorded as
// the profile's error.
func (p *profile) q(s string) string {
	q, err := Quote(s)
	if err != nil {
		p.err = errors.Join(p.err, err)
	}
	return q
}

// form adds (action op part...) with each part an already rendered filter.
func (p *profile) form(action, op string, parts ...string) {
	if len(parts) == 0 {
		return
	}
	if action == "deny" && p.with != "" {
		parts = append(parts, p.with)
	}
	p.raw(fmt.Sprintf("(%s %s\n  %s)", action, op, strings.Join(parts, "\n  ")))
}

// isGitDirRoot reports whether writable root r is the workspace's git
// directory outside the workspace (a linked worktree's or a submodule's,
// their common directory, or the repository's above the workspace): see
// fsrules' gitDirsOutside.
func isGitDirRoot(r fsrules.Path) bool { return strings.HasPrefix(r.Origin, fsrules.GitDirOrigin) }

// gitEntries is the regex, after a git directory's path, of the entries no
// sandboxed command may change: hooks (they run on the host), config and
// config.worktree (core.fsmonitor, aliases, filters run programs) and
// their lock files (git on the host, holding one, renames it into place),
// commondir and gitdir (they send git to another directory), alternates;
// at any depth, so the git directories nested in modules/ (submodules:
// their names may hold a slash) and worktrees/ are covered wherever they
// are moved to in the git directory (mv modules/sub q; edit q/config; mv
// q modules/sub). A ref or log named "hooks", "config", "gitdir" or
// "commondir" is caught too. The legacy remotes/ and branches/ are
// covered at the top of the git directory.
func gitEntries() string {
	own := strings.Join([]string{caseless("hooks") + "(/.*)?", caseless("config"), caseless("config.worktree"),
		caseless("config.lock"), caseless("config.worktree.lock"), caseless("commondir"), caseless("gitdir")}, "|")
	alternates := caseless("objects/info/") + "(" + caseless("http-") + ")?" + caseless("alternates")
	// The legacy remotes/ and branches/ name where a push goes; at the top
	// only (refs/remotes/ is git's own), so not in a git directory nested
	// in modules/ or worktrees/; branches/ itself may be made (git init's
	// template has it), so one filled elsewhere could be renamed in.
	legacy := "(" + caseless("remotes") + "(/.*)?|" + caseless("branches") + "/.+)"
	return "/((.*/)?(" + own + "|" + alternates + ")|" + legacy + ")$"
}

// gitLinks keeps git pointed where it is, in every directory the command
// may write (the writable roots, the toolchain caches, the run's own
// temporary and cache folders): git's entries of a .git at any depth
// cannot change (gitEntries); a .git cannot be renamed or removed (mv .git
// g; edit g/config; mv g .git), nor created as anything (a pointer file, a
// link, or a directory: made, or renamed into place after being filled
// under another name, it would be a repository whose settings the
// command wrote), nor changed as anything but a directory. Name rules
// hold only where they are written, and a rename carries a directory's
// content past them: a repository made where no rule holds, then moved
// into the workspace, would be one. The git directories outside the
// workspace, and their parents inside a writable root, cannot be
// renamed.
func (p *profile) gitLinks(in ProfileInput) {
	var unlink, create, entries, gitDirs []string
	areas := dirAreas(in)
	for _, r := range in.FS.Writable {
		if r.Dir && isGitDirRoot(r) {
			for _, a := range append([]string{r.Path}, ancestorsIn(r.Path, writableRoots(in))...) {
				unlink = append(unlink, "(literal "+p.q(a)+")")
			}
			areas = append(areas, r.Path)
			gitDirs = append(gitDirs, rootRE(r.Path))
		}
	}
	for _, root := range areas {
		dotGit := rootRE(root) + "(/.*)?/" + caseless(".git")
		re := "(regex " + p.q(dotGit+"$") + ")"
		entries = append(entries, "(regex "+p.q(dotGit+gitEntries())+")",
			// Bare repositories by name: x.git (a mirror kept in a
			// project), SwiftPM's mirrors in .build/repositories, which
			// the host's swift fetches into with --git-dir.
			"(regex "+p.q(rootRE(root)+"(/.*)?/[^/]*"+caseless(".git")+gitEntries())+")",
			"(regex "+p.q(rootRE(root)+"(/.*)?/"+caseless(".build/repositories")+"/[^/]+"+gitEntries())+")")
		create = append(create, re)
		unlink = append(unlink, re)
		gitDirs = append(gitDirs, dotGit)
		p.form("deny", "file-write*", "(require-all "+re+" (require-not (vnode-type DIRECTORY)))")
	}
	p.gitDirMoves(gitDirs)
	p.form("deny", "file-write*", entries...)
	p.form("deny", "file-write-create", create...)
	p.form("deny", "file-write-unlink", dedupeStrings(unlink)...)
}

// gitData are the directories of a git directory that git keeps its data
// in (below them it makes and removes directories as it works); gitState
// are those it makes and removes themselves, for one operation.
var (
	gitData  = []string{"objects", "refs", "logs", "info", "lfs", "rr-cache", "branches"}
	gitState = []string{"rebase-merge", "rebase-apply", "sequencer"}
)

// gitDirMoves keeps the git directories nested in each git directory (the
// regexes of gitDirs) where they are: a directory under modules/ or
// worktrees/ (a submodule's or a linked worktree's git directory), and
// objects and objects/info (where alternates live), cannot be made,
// removed or renamed, so none is moved out of .git, edited where no name
// rule holds and moved back, nor filled elsewhere and renamed in. Below
// git's data directories in them, and for git's per-operation state
// directories, directories stay free (a submodule's git directory named
// like a data directory, modules/outer/modules/logs, is not one of them).
// The directories that hold a HEAD git would accept (logs, refs,
// refs/remotes/NAME) cannot be renamed or removed: moved out of .git,
// with objects, refs and a config beside, they would make a bare
// repository. No symbolic link is made in a git directory: one in place
// of modules/ or a missing submodule's git directory would make git use
// a directory outside .git, and git follows one where it writes (a
// reflog linked to ~/.zshenv). The entries rule that follows denies
// hooks and config again.
func (p *profile) gitDirMoves(gitDirs []string) {
	if len(gitDirs) == 0 {
		return
	}
	alts := func(names []string) string {
		var out []string
		for _, n := range names {
			out = append(out, caseless(n))
		}
		return "(" + strings.Join(out, "|") + ")"
	}
	var deny, allow, made, again, below, heads, links []string
	for _, g := range gitDirs {
		// Anchored at the git directory or a nested one: a branch named
		// modules/x or objects/x is no git directory.
		at := g + "/(" + alts([]string{"modules", "worktrees"}) + "/.+/)?"
		nested := at + alts([]string{"modules", "worktrees"})
		deny = append(deny, "(regex "+p.q(nested+"(/.*)?$")+")")
		allow = append(allow, "(regex "+p.q(nested+"/.+/"+alts(gitData)+"/.+$")+")",
			"(regex "+p.q(nested+"/.+/"+alts(gitState)+"$")+")")
		// git makes these as it first needs them (a worktree's refs for
		// bisect, a submodule's lfs and rr-cache); removing one is no
		// part of its work
		made = append(made, "(regex "+p.q(nested+"/.+/"+alts([]string{"refs", "logs", "info", "lfs", "rr-cache"})+"$")+")")
		again = append(again, "(regex "+p.q(at+caseless("objects")+"(/"+caseless("info")+")?$")+")")
		below = append(below, "(regex "+p.q(nested+"/.+/"+alts([]string{"refs", "logs", "lfs"})+"/.+$")+")")
		heads = append(heads, "(regex "+p.q(g+"/(.*/)?("+caseless("logs")+"|"+caseless("refs")+"(/"+caseless("remotes")+"(/[^/]+)?)?)$")+")")
		links = append(links, "(regex "+p.q(g+"/.+$")+")")
	}
	dirs := func(res []string) string {
		return "(require-all (vnode-type DIRECTORY) (require-any " + strings.Join(res, " ") + "))"
	}
	p.form("deny", "file-write-create file-write-unlink", dirs(deny))
	p.form("allow", "file-write-create file-write-unlink", dirs(allow))
	p.form("allow", "file-write-create", dirs(made))
	p.form("deny", "file-write-create file-write-unlink",
		"(require-all (vnode-type DIRECTORY) (require-any "+strings.Join(again, " ")+") (require-not (require-any "+strings.Join(below, " ")+")))")
	p.form("deny", "file-write-unlink", dirs(heads))
	p.form("deny", "file-write-create", "(require-all (vnode-type SYMLINK) (require-any "+strings.Join(links, " ")+"))")
}

// dirAreas are the directories the profile lets the command write in,
// but the git directories outside the workspace (which have rules of
// their own): the writable roots that are directories, the toolchain
// caches, the run's temporary and cache folders.
func dirAreas(in ProfileInput) []string {
	var out []string
	for _, r := range append(slices.Clone(in.FS.Writable), in.FS.Caches...) {
		if r.Dir && !isGitDirRoot(r) {
			out = append(out, r.Path)
		}
	}
	for _, d := range []string{in.TmpDir, in.UserCacheDir} {
		if d != "" {
			out = append(out, d)
		}
	}
	return dedupeStrings(out)
}

// rootRE is the regex of root's path from the start of the path.
func rootRE(root string) string {
	if root == "/" {
		return "^"
	}
	return "^" + regexQuote(root)
}

// readDeniedIn returns the denyRead paths that lie in a writable root: they
// cannot be written either (a read-denied file is not replaced).
func readDeniedIn(deny []fsrules.Path, roots []string) []fsrules.Path {
	var out []fsrules.Path
	for _, d := range deny {
		if slices.ContainsFunc(roots, func(r string) bool { return fsrules.Within(d.Path, r) }) {
			out = append(out, d)
		}
	}
	return out
}

// moveBlocks returns the filters of what cannot be unlinked (removed or
// renamed), so that "mv .env x; cat x" or "mv vendor v; edit v/…; mv v
// vendor" fail: every directory the command may write in (dirAreas), every
// denyRead and denyWrite path inside a writable root,
// and its ancestors inside one; for a denyWrite pattern, the directory
// before its first wildcard and that directory's ancestors (as srt does).
func (p *profile) moveBlocks(in ProfileInput, roots []string, home []homePath) []string {
	var out []string
	// In either case: a rename's source is checked as the command spells
	// it (mv proj/CONF c2 moves conf).
	exact := func(path string) string { return "(regex " + p.q(foldedBelow(path, roots)+"$") + ")" }
	add := func(path string, dir bool) {
		if dir {
			out = append(out, "(regex "+p.q(foldedBelow(path, roots)+"(/.*)?$")+")")
		} else {
			out = append(out, exact(path))
		}
		for _, a := range ancestorsIn(path, roots) {
			out = append(out, exact(a))
		}
	}
	// The writable directories themselves: moved away (to be edited where
	// no name rule holds, or for a link to another tree in their place),
	// they would come back, or be replaced, with whatever they hold.
	for _, r := range dirAreas(in) {
		out = append(out, exact(r))
	}
	for _, d := range append(readDeniedIn(in.FS.DenyRead, roots), in.FS.DenyWrite...) {
		add(d.Path, d.Dir)
	}
	for _, h := range home {
		for _, a := range ancestorsIn(filepath.Join(in.FS.Home, h.rel), roots) {
			out = append(out, exact(a))
		}
	}
	for _, g := range in.FS.DenyWriteGlobs {
		i := strings.IndexAny(g.Path, "*?[{\\")
		if i < 0 {
			add(g.Path, true)
			continue
		}
		if base := filepath.Dir(g.Path[:i+1]); slices.ContainsFunc(roots, func(r string) bool { return fsrules.Within(base, r) }) {
			add(base, false)
		}
	}
	return dedupeStrings(out)
}

// unixSockets allows Unix-domain sockets: bound and reached in the run's
// private TMPDIR (tsx, vite, esbuild, jest talk to their workers there),
// and reached (or bound) at the allowed paths and below them, each as
// given and as resolved (/var/run is /private/var/run; Docker Desktop's
// socket is a link).
func (p *profile) unixSockets(in ProfileInput) {
	var socks []string
	for _, s := range in.UnixSockets {
		socks = append(socks, s)
		if in.EvalSymlinks != nil && filepath.IsAbs(s) {
			socks = append(socks, resolve(s, in.EvalSymlinks))
		}
	}
	sort.Strings(socks)
	dirs := socks
	if in.TmpDir != "" {
		dirs = append([]string{in.TmpDir}, socks...)
	}
	if len(dirs) == 0 {
		return
	}
	dirs = dedupeStrings(dirs)
	p.raw("(allow system-socket (socket-domain AF_UNIX))")
	var bind, out []string
	for _, d := range dirs {
		bind = append(bind, "(local unix-socket (subpath "+p.q(d)+"))")
		out = append(out, "(remote unix-socket (subpath "+p.q(d)+"))")
	}
	p.form("allow", "network-bind", bind...)
	p.form("allow", "network-outbound", out...)
}

// resolve returns path with its symbolic links resolved by eval; when path
// does not exist (a socket not created yet), its parent is resolved and
// the name kept.
func resolve(path string, eval func(string) (string, error)) string {
	if r, err := eval(path); err == nil {
		return r
	}
	dir, base := filepath.Split(path)
	dir = filepath.Clean(dir)
	if base == "" || dir == path {
		return path
	}
	return filepath.Join(resolve(dir, eval), base)
}

// macHomePersistence are macOS's own persistence paths below the home
// directory, besides fsrules' list: launchd starts what LaunchAgents
// names at login; the editors' user settings hold tasks and terminal
// profiles that run commands.
var macHomePersistence = []string{"Library/LaunchAgents", "Library/Application Support/Code/User",
	"Library/Application Support/Code - Insiders/User", "Library/Application Support/Cursor/User",
	"Library/Application Support/VSCodium/User", "Library/Application Support/Windsurf/User"}

// homePath is a persistence path below the home directory: the regex
// (case-insensitive) of what it protects, and a path whose ancestors
// cannot be renamed.
type homePath struct{ rel, re string }

// homePersistence returns the home directory's persistence paths that a
// writable root reaches (it holds them, or lies in one): fsrules' list,
// macOS's own, and Python's start-up files in ~/.local/lib.
func homePersistence(home string, roots []string) []homePath {
	if home == "" {
		return nil
	}
	var out []homePath
	for _, h := range append(fsrules.HomePersistence(), macHomePersistence...) {
		if overlaps(filepath.Join(home, h), roots) {
			out = append(out, homePath{h, caseless(h) + "(/.*)?"})
		}
	}
	if overlaps(filepath.Join(home, ".local/lib"), roots) {
		out = append(out, homePath{".local/lib/x", caseless(".local/lib") + "/(.*/)?([^/]*" + caseless(".pth") + "|" +
			caseless("sitecustomize.py") + "|" + caseless("usercustomize.py") + ")"})
	}
	return out
}

// overlaps reports whether path lies in one of roots or holds one.
func overlaps(path string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return fsrules.Within(path, r) || fsrules.Within(r, path) })
}

// writableRoots are the directories (and files) the profile lets the
// command write: the writable roots, the caches, the private TMPDIR.
func writableRoots(in ProfileInput) []string {
	var out []string
	for _, r := range append(slices.Clone(in.FS.Writable), in.FS.Caches...) {
		out = append(out, r.Path)
	}
	for _, d := range []string{in.TmpDir, in.UserCacheDir} {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

// ancestorsIn returns the ancestors of path (nearest first) that lie in
// one of roots: the directories whose rename would carry path with them.
func ancestorsIn(path string, roots []string) []string {
	var out []string
	for d := filepath.Dir(path); d != "/" && d != "."; d = filepath.Dir(d) {
		if slices.ContainsFunc(roots, func(r string) bool { return fsrules.Within(d, r) }) {
			out = append(out, d)
		}
	}
	return out
}

func dedupeStrings(s []string) []string {
	seen := map[string]bool{}
	return slices.DeleteFunc(s, func(x string) bool {
		if seen[x] {
			return true
		}
		seen[x] = true
		return false
	})
}

func subpaths(paths []fsrules.Path) [][2]string {
	var out [][2]string
	for _, p := range paths {
		kind := "literal"
		if p.Dir {
			kind = "subpath"
		}
		out = append(out, [2]string{kind, p.Path})
	}
	return out
}

// heads denies a file (a directory may have the name) named HEAD in the
// writable roots but where git keeps one in a .git (its own, a nested git
// directory's, a reflog's, a remote's, the sequencer's): with one (and
// objects and refs, which nothing keeps out), a directory is a bare
// repository to git on the host, whose config the command wrote, the
// workspace itself too once its .git is broken (a HEAD of garbage).
// Emitted before denyWrite, which the .git allowance must not re-open.
func (p *profile) heads(in ProfileInput) {
	var deny, allow []string
	head := caseless("HEAD")
	for _, r := range in.FS.Writable {
		if !r.Dir || isGitDirRoot(r) {
			continue
		}
		root := rootRE(r.Path)
		g := root + "(/.*)?/" + caseless(".git") + "/(" + caseless("modules") + "/.+/|" + caseless("worktrees") + "/[^/]+/)?"
		deny = append(deny, "(require-all (regex "+p.q(root+"(/.*)?/"+head+"$")+") (require-not (vnode-type DIRECTORY)))")
		allow = append(allow, "(regex "+p.q(g+"("+caseless("logs")+"/|"+caseless("sequencer")+"/)?"+head+"$")+")",
			"(regex "+p.q(g+"("+caseless("logs")+"/)?"+caseless("refs/remotes")+"/[^/]+/"+head+"$")+")")
	}
	p.form("deny", "file-write*", deny...)
	p.form("allow", "file-write*", allow...)
}

// foldedBelow is the regex, from the start, of path with the part below
// the writable root holding it in either case (caseless): the root's own
// path stands as it is (a write spelled with another case there is no
// write into the root), which keeps the rule short (sandbox-exec refuses
// long literals). A path in no root stands as it is.
func foldedBelow(path string, roots []string) string {
	root := ""
	for _, r := range roots {
		if fsrules.Within(path, r) && len(r) > len(root) {
			root = r
		}
	}
	switch root {
	case "":
		return "^" + regexQuote(path)
	case "/":
		return "^/" + caseless(path[1:])
	}
	return rootRE(root) + caseless(path[len(root):])
}

// denyWrites adds the denyWrite rules (and the read-denied paths inside
// a writable root, which cannot be written either), in either case: a
// path that does not exist yet is created under the name the command
// gives, and on a case-insensitive volume proj/NEW is proj/new.
func (p *profile) denyWrites(in ProfileInput, roots []string) {
	var deny [][2]string
	for _, d := range append(slices.Clone(in.FS.DenyWrite), readDeniedIn(in.FS.DenyRead, roots)...) {
		end := "$"
		if d.Dir {
			end = "(/.*)?$"
		}
		deny = append(deny, [2]string{"regex", foldedBelow(d.Path, roots) + end})
	}
	p.rule("deny", "file-write*", deny)
	var globs [][2]string
	for _, g := range in.FS.DenyWriteGlobs {
		globs = append(globs, [2]string{"regex", globRegex(g.Path)})
		// The literal name too (secret[1].txt), existing or not, for a
		// pattern without * (names hold [ ] ? { } far more often) that
		// does not escape its wildcards (then the regex is the literal).
		if !strings.ContainsAny(g.Path, `*\`) {
			globs = append(globs, [2]string{"regex", foldedBelow(g.Path, roots) + "(/.*)?$"})
		}
	}
	p.rule("deny", "file-write*", globs)
}

// Profile renders the policy as a Seatbelt profile. Later rules win over
// earlier ones, so the order is: deny everything; allow process basics;
// reads everywhere, minus denyRead, plus allowRead, minus other terminals;
// writes to the writable roots, the private TMPDIR and a few devices,
// minus denyWrite and the protected names at any depth (regex rules cover
// names that do not exist yet), minus git's hooks and config in every git
// directory and the making or renaming of any .git, plus exact allowWrite
// of a protected path, minus denyWrite again, minus renames of the
// writable directories and of denied paths; network only to the proxy's
// localhost port, and Unix sockets in the private TMPDIR and at the
// allowed paths.
func Profile(in ProfileInput) (string, error) {
	if in.FS == nil {
		return "", errors.New("darwin: no filesystem policy")
	}
	p := &profile{}
	if in.Tag != "" {
		if !tagRE.MatchString(in.Tag) {
			return "", fmt.Errorf("darwin: profile tag %q: want letters, digits and underscores", in.Tag)
		}
		p.with = `(with message "` + in.Tag + `")`
	}
	p.b.WriteString(";; sbx Seatbelt profile, generated; do not edit\n")
	p.raw("(version 1)")
	if p.with != "" {
		p.raw("(deny default " + p.with + ")")
	} else {
		p.raw("(deny default)")
	}
	p.comment("processes: run, fork, and signal only within the sandbox")
	p.raw("(allow process-exec)")
	// sudo with a ticket still valid from the user's terminal (the command
	// shares its session) would run as root here: reads of what only root
	// may read. Set-user-ID programs are refused on Linux too (no new
	// privileges).
	p.form("deny", "process-exec", `(literal "/usr/bin/sudo")`)
	p.raw("(allow process-fork)")
	p.raw("(allow signal (target same-sandbox))")
	p.raw("(allow process-info* (target same-sandbox))")
	var sysctls [][2]string
	for _, n := range sysctlNames {
		sysctls = append(sysctls, [2]string{"sysctl-name", n})
	}
	for _, n := range sysctlPrefixes {
		sysctls = append(sysctls, [2]string{"sysctl-name-prefix", n})
	}
	p.rule("allow", "sysctl-read", sysctls)
	p.raw("(allow iokit-open (iokit-user-client-class \"RootDomainUserClient\"))")
	p.raw("(allow ipc-posix-shm-read-data ipc-posix-shm-read-metadata (ipc-posix-name \"apple.shm.notification_center\"))")
	var sw [][2]string
	for _, n := range sysctlWrite {
		sw = append(sw, [2]string{"sysctl-name", n})
	}
	p.rule("allow", "sysctl-write", sw)
	p.comment("POSIX semaphores (Python multiprocessing's SemLock); preferences, read only")
	p.raw("(allow ipc-posix-sem)")
	p.raw("(allow user-preference-read)")
	p.raw(`(allow ipc-posix-shm-read* (ipc-posix-name-prefix "apple.cfprefs."))`)
	p.raw(`(allow mach-lookup (local-name "com.apple.cfprefsd.agent"))`)
	p.comment("terminals: openpty, and the ptys it makes (they carry the pty extension)")
	p.raw("(allow pseudo-tty)")
	p.raw(`(allow file-read* file-write* file-ioctl (literal "/dev/ptmx"))`)
	p.raw(`(allow file-read* file-write*` + "\n" + `  (require-all (regex "^/dev/ttys[0-9]+$") (extension "com.apple.sandbox.pty")))`)
	services := append([]string(nil), machServices...)
	if in.TrustdLookup {
		services = append(services, "com.apple.trustd.agent")
	}
	var mach [][2]string
	for _, s := range services {
		mach = append(mach, [2]string{"global-name", s})
	}
	for _, s := range in.MachLookup {
		if prefix, ok := strings.CutSuffix(s, "*"); ok {
			mach = append(mach, [2]string{"global-name-prefix", prefix})
		} else {
			mach = append(mach, [2]string{"global-name", s})
		}
	}
	p.rule("allow", "mach-lookup", mach)

	p.comment("reads: everywhere, minus denyRead, plus allowRead; never another terminal's input")
	p.raw("(allow file-read*)")
	// Name patterns (.env* above the workspace) cover entries made later
	// too; never the workspace itself, should its name or a folder
	// holding it match.
	var names [][2]string
	for _, n := range in.FS.DenyReadNames {
		names = append(names, [2]string{"regex", globRegex(escapeGlob(strings.TrimSuffix(n.Dir, "/")) + "/" + n.Name)})
	}
	p.rule("deny", "file-read*", names)
	if len(names) > 0 && in.FS.Workspace != "" {
		p.rule("allow", "file-read*", [][2]string{{"subpath", in.FS.Workspace}})
	}
	p.rule("deny", "file-read*", subpaths(in.FS.DenyRead))
	// A denied path missing at start (a tool not logged in yet) is denied
	// as what it may become, a file or a folder.
	var missing [][2]string
	for _, m := range in.FS.DenyReadMissing {
		missing = append(missing, [2]string{"subpath", m.Path})
	}
	p.rule("deny", "file-read*", missing)
	p.rule("allow", "file-read*", subpaths(in.FS.AllowRead))
	// The user's other terminals are theirs to read (mode 0620): opened
	// here, a read would take the keys typed there (a password at a sudo
	// prompt). The command's own terminal comes as its descriptors; a pty
	// it made carries the extension.
	p.form("deny", "file-read*", `(require-all (regex "^/dev/ttys[0-9]+$") (require-not (extension "com.apple.sandbox.pty")))`)

	p.comment("writes: the writable roots and the run's private temporary and cache folders only")
	var w [][2]string
	for _, r := range append(slices.Clone(in.FS.Writable), in.FS.Caches...) {
		kind := "subpath"
		if !r.Dir {
			kind = "literal"
		}
		w = append(w, [2]string{kind, r.Path})
	}
	for _, d := range []string{in.TmpDir, in.UserCacheDir} {
		if d != "" {
			w = append(w, [2]string{"subpath", d})
		}
	}
	for _, d := range devWrite {
		w = append(w, [2]string{"literal", d})
	}
	p.rule("allow", "file-write*", w)
	p.heads(in)
	var ioctl [][2]string
	for _, d := range devIoctl {
		ioctl = append(ioctl, [2]string{"literal", d})
	}
	p.rule("allow", "file-ioctl", append(ioctl, [2]string{"regex", "^/dev/ttys[0-9]+$"}))
	roots := writableRoots(in)
	p.denyWrites(in, roots)
	p.comment("protected names, at any depth of every writable root, existing or not")
	var prot, gitRoots [][2]string
	for _, r := range in.FS.Writable {
		if !r.Dir {
			continue
		}
		root := rootRE(r.Path)
		if isGitDirRoot(r) {
			// The workspace's git directory outside it: its own hooks and
			// config, not a .git below it.
			gitRoots = append(gitRoots, [2]string{"regex", root + gitEntries()})
			continue
		}
		// APFS is case-insensitive by default: .VSCODE is .vscode there.
		for _, n := range fsrules.ProtectedFiles() {
			prot = append(prot, [2]string{"regex", root + "(/.*)?/" + caseless(n) + "$"})
		}
		for _, n := range fsrules.ProtectedDirs() {
			prot = append(prot, [2]string{"regex", root + "(/.*)?/" + caseless(n) + "(/.*)?$"})
		}
		prot = append(prot, [2]string{"regex", root + "(/.*)?/" + caseless(".config/git") + "(/.*)?$"})
	}
	p.rule("deny", "file-write*", prot)
	p.comment("git: hooks, config and what sends git elsewhere, in every git directory; .git itself")
	p.rule("deny", "file-write*", gitRoots)
	p.gitLinks(in)
	p.denyWrites(in, roots) // again: the git data allowance must not re-open them
	home := homePersistence(in.FS.Home, roots)
	if len(home) > 0 {
		p.comment("the home directory's persistence paths, in either case, where a writable root reaches them")
		var hr [][2]string
		for _, h := range home {
			hr = append(hr, [2]string{"regex", "^" + regexQuote(in.FS.Home) + "/" + h.re + "$"})
		}
		p.rule("deny", "file-write*", hr)
	}
	if len(in.FS.HomeLinks) > 0 {
		p.comment("targets of the home's persistence paths that are symbolic links into a writable root")
		p.rule("deny", "file-write*", subpaths(in.FS.HomeLinks))
	}
	if len(in.FS.ProtectedLinks) > 0 {
		p.comment("targets of protected names that are links at the top of a writable root")
		p.rule("deny", "file-write*", subpaths(in.FS.ProtectedLinks))
	}
	if len(in.FS.GitLinks) > 0 {
		p.comment("what the workspace's git configuration points git at (hooksPath, includes, programs)")
		p.rule("deny", "file-write*", subpaths(in.FS.GitLinks))
	}
	// An exact allowWrite re-opens a protected path and what is below it,
	// as fsrules' check does on Linux.
	var exact [][2]string
	for _, e := range in.FS.ExactAllow {
		exact = append(exact, [2]string{"subpath", e})
	}
	p.rule("allow", "file-write*", exact)
	if len(exact) > 0 {
		// denyWrite wins over allowWrite, as fsrules' check has it: an
		// exact allowWrite of .vscode leaves a denyWrite of
		// .vscode/tasks.json in force.
		p.denyWrites(in, roots)
	}
	var named [][2]string
	for _, n := range in.FS.Named {
		for _, e := range n.Entries {
			if r := [2]string{"regex", "^" + caseless(e) + "$"}; !slices.Contains(named, r) {
				named = append(named, r)
			}
		}
	}
	if len(named) > 0 {
		p.comment("entries that deny paths and linked persistence paths are resolved through: a link made or changed there would move what they protect")
		p.rule("deny", "file-write*", named)
	}
	var self []fsrules.Path
	for _, sp := range in.FS.Self {
		if overlaps(sp.Path, roots) {
			self = append(self, fsrules.Path{Path: sp.Path, Dir: true})
		}
	}
	p.comment("sbx's own files, whatever allowWrite says")
	p.rule("deny", "file-write*", subpaths(self))
	p.comment("moves: a denied path, and its parents inside the writable roots, cannot be renamed or removed")
	p.form("deny", "file-write-unlink", p.moveBlocks(in, roots, home)...)

	p.comment("network: only the proxy on localhost; Unix sockets in TMPDIR and at the allowed paths")
	if in.ProxyPort > 0 {
		p.raw(fmt.Sprintf("(allow network-outbound (remote ip \"localhost:%d\"))", in.ProxyPort))
	}
	p.unixSockets(in)
	if in.LocalBinding {
		// Codex's three rules. A local ip filter on bind does not restrict
		// the address bound (a 0.0.0.0 listener passes "localhost:*"), so
		// bind is allowed anywhere and what counts is inbound: only
		// connections whose local address is loopback are accepted. The
		// command reaches its own servers, and every other one on the
		// host's loopback.
		p.comment("local binding: bind anywhere, accept on loopback only, reach loopback")
		p.raw(`(allow network-bind (local ip "*:*"))`)
		p.raw(`(allow network-inbound (local ip "localhost:*"))`)
		p.raw(`(allow network-outbound (remote ip "localhost:*"))`)
	}
	if p.err != nil {
		return "", p.err
	}
	return p.b.String(), nil
}
