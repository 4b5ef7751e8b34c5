package pipeline

import (
	"slices"
	"strings"
)

// gitStrings reads, in a git command's global options, the configuration
// values git runs as shell commands (-c alias.x='!rm -rf ~', -c
// core.pager=…, -c core.sshCommand=…, a filter's or a diff driver's
// command), a command-line alias used as the subcommand (git -c
// alias.p=push p, through chains of aliases), and the subcommand's options
// that run commands (rebase -x, fetch --upload-pack …): deny and ask rules
// see them as they see sh -c's string, and allow rules must cover them
// too. Configuration known only at run time (--config-env, variables set
// for git, an included file) makes the command Unseen.
func (sp *splitter) gitStrings(sc SimpleCommand) {
	if sp.tainted || slices.ContainsFunc(sp.envNames, func(n string) bool { return !gitHarmlessEnv(n) }) {
		sp.unseen = "git with variables set that can change its configuration or the programs it runs"
	}
	aliases := map[string]string{}
	for i := 1; i < len(sc.Words); i++ {
		w := sc.Words[i]
		if w.Dynamic || len(w.Values) != 1 {
			// git $(echo push): the subcommand, or an option before it.
			sp.unseen = "git's subcommand, or an option before it, is known only when it runs"
			return
		}
		a := w.Values[0]
		kv := ""
		switch {
		case a == "-c":
			if i++; i >= len(sc.Words) || sc.Words[i].Dynamic || len(sc.Words[i].Values) != 1 {
				sp.unseen = "git -c with a value known only when it runs"
				return
			}
			kv = sc.Words[i].Values[0]
		case strings.HasPrefix(a, "-c"):
			kv = a[2:]
		case a == "--config-env" || strings.HasPrefix(a, "--config-env="):
			sp.unseen = "git --config-env: a configuration value known only when it runs"
			if a == "--config-env" {
				i++
			}
			continue
		case slices.Contains(gitGlobalArg, a):
			i++
			continue
		case strings.HasPrefix(a, "-"):
			continue
		default: // the subcommand
			sp.gitSubcommand(sc, aliases, i)
			return
		}
		key, val, _ := strings.Cut(kv, "=")
		k := strings.ToLower(key)
		switch code, ok := gitShellValue(key, val); {
		case ok:
			sp.inner(sc, code, "git -c "+key)
		case strings.HasPrefix(k, "alias."):
			aliases[k[len("alias."):]] = val
		case gitUnseenKey(k):
			sp.unseen = "git -c " + key + ": configuration, hooks or a transport read only when git runs"
		}
	}
}

// gitSubcommand reads the subcommand at sc.Words[i]: an alias given with
// -c (followed through other aliases) is read as the git command it
// stands for; otherwise its options that run commands are read.
func (sp *splitter) gitSubcommand(sc SimpleCommand, aliases map[string]string, i int) {
	a := sc.Words[i].Values[0]
	v, ok := aliases[strings.ToLower(a)]
	if !ok {
		sp.gitRunOptions(sc, a, sc.Words[i+1:])
		return
	}
	for range 16 {
		if strings.HasPrefix(v, "!") {
			return // shell code: read where it was defined
		}
		first, rest, _ := strings.Cut(strings.TrimSpace(v), " ")
		next, chained := aliases[strings.ToLower(first)]
		if !chained {
			break
		}
		v = strings.TrimSpace(next + " " + rest)
	}
	sp.inner(sc, "git "+v+" "+quoteWords(staticValues(sc.Words[i+1:])), "git alias "+a)
}

// gitConfigSet reads git config setting a key whose value git runs as a
// command (git config core.fsmonitor 'rm x', then any git): the value as
// shell code; an alias set in a repository's configuration makes every
// later git subcommand a possible alias, so the command is Unseen.
func (sp *splitter) gitConfigSet(sc SimpleCommand, vals []string) {
	var ops []string
	for _, v := range vals {
		if !strings.HasPrefix(v, "-") && v != "set" {
			ops = append(ops, v)
		}
	}
	if len(ops) < 2 {
		return // reading a key, or listing
	}
	key, val := ops[0], ops[1]
	k := strings.ToLower(key)
	switch code, ok := gitShellValue(key, val); {
	case strings.HasPrefix(k, "alias."):
		sp.unseen = "git config sets an alias: the git commands after it may run it"
		if ok {
			sp.inner(sc, code, "git config "+key)
		}
	case ok:
		sp.inner(sc, code, "git config "+key)
	case gitUnseenKey(k):
		sp.unseen = "git config sets " + key + ": configuration, hooks or a transport read only when git runs"
	}
}

// gitRunOpts are subcommands' options whose value git runs as a shell
// command; gitAttachedOnly are those whose value is never a separate word.
var (
	gitRunOpts = map[string][]string{
		"fetch": {"--upload-pack"}, "clone": {"--upload-pack", "-u"}, "ls-remote": {"--upload-pack", "-u"}, "pull": {"--upload-pack"},
		"push": {"--receive-pack", "--exec"}, "send-pack": {"--receive-pack", "--exec"}, "archive": {"--exec"},
		"rebase": {"--exec", "-x"}, "difftool": {"--extcmd", "-x"}, "grep": {"--open-files-in-pager", "-O"},
		"filter-branch": {"--env-filter", "--tree-filter", "--index-filter", "--parent-filter", "--msg-filter", "--commit-filter", "--tag-name-filter"},
	}
	gitAttachedOnly = []string{"--open-files-in-pager", "-O"}
)

// gitRunOptions reads the commands a subcommand's arguments make git run:
// options of gitRunOpts, submodule foreach's command, bisect run's
// program, and ext:: transports (git runs what follows).
func (sp *splitter) gitRunOptions(sc SimpleCommand, sub string, args []Word) {
	vals := staticValues(args)
	switch {
	case sub == "send-pack" || sub == "subtree" && slices.Contains(vals, "push"):
		// A push by another name: deny and ask rules on git push see it.
		sp.inner(sc, "git push "+quoteWords(vals), "git "+sub)
	case sub == "config":
		sp.gitConfigSet(sc, vals)
		return
	}
	if sub == "submodule" || sub == "bisect" {
		for j, v := range vals {
			switch {
			case sub == "submodule" && v == "foreach":
				if rest := slices.DeleteFunc(slices.Clone(vals[j+1:]), func(a string) bool { return a == "--recursive" || a == "-q" || a == "--quiet" }); len(rest) > 0 {
					sp.inner(sc, strings.Join(rest, " "), "git submodule foreach")
				}
				return
			case sub == "bisect" && v == "run" && j+1 < len(vals):
				sp.inner(sc, quoteWords(vals[j+1:]), "git bisect run")
				return
			}
		}
		return
	}
	opts := gitRunOpts[sub]
	for j := 0; j < len(vals); j++ {
		v := vals[j]
		if v == "--" {
			return
		}
		if code, ok := strings.CutPrefix(v, "ext::"); ok {
			sp.inner(sc, quoteWords(extWords(code)), "git ext::")
			continue
		}
		if sub == "remote-ext" && j == 1 {
			sp.inner(sc, quoteWords(extWords(v)), "git remote-ext")
			continue
		}
		for _, o := range opts {
			code, next, ok := gitOptValue(v, o)
			if !ok {
				continue
			}
			if next && !slices.Contains(gitAttachedOnly, o) && j+1 < len(vals) {
				j++
				code = vals[j]
			}
			if !next || !slices.Contains(gitAttachedOnly, o) {
				sp.inner(sc, code, "git "+sub+" "+o)
			}
			break
		}
	}
}

// gitOptValue reads word as option o, as git's option parser does (a long
// option abbreviated to any prefix of three characters or more, its value
// after "=", a short one's value attached): the value given in the word,
// or next when the value is the next word.
func gitOptValue(word, o string) (val string, next, ok bool) {
	if strings.HasPrefix(o, "--") {
		name, val, eq := strings.Cut(word, "=")
		if !strings.HasPrefix(name, "--") || len(name) < 3 || !strings.HasPrefix(o, name) {
			return "", false, false
		}
		return val, !eq, true
	}
	switch {
	case word == o:
		return "", true, true
	case len(word) > 2 && strings.HasPrefix(word, o):
		return word[2:], false, true
	}
	return "", false, false
}

// extWords splits the command of an ext:: transport as git does: on
// spaces, "% " a space inside a word, "%%" a percent sign (%s and %S, the
// service, stay as written).
func extWords(s string) []string {
	var words []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%' && i+1 < len(s) && (s[i+1] == ' ' || s[i+1] == '%'):
			i++
			b.WriteByte(s[i])
		case c == ' ':
			if b.Len() > 0 {
				words = append(words, b.String())
				b.Reset()
			}
		default:
			b.WriteByte(c)
		}
	}
	if b.Len() > 0 {
		words = append(words, b.String())
	}
	return words
}

// gitHarmlessEnv reports whether a variable set for git changes neither
// its configuration nor the programs it runs (who made a commit and when,
// prompts, locks, tracing, the terminal).
func gitHarmlessEnv(name string) bool {
	switch name {
	case "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE",
		"GIT_TERMINAL_PROMPT", "GIT_OPTIONAL_LOCKS", "GIT_FLUSH", "GIT_PROGRESS_DELAY", "GIT_MERGE_VERBOSITY", "GIT_ADVICE",
		"GIT_LITERAL_PATHSPECS", "GIT_NO_REPLACE_OBJECTS", "TERM", "COLUMNS", "LINES", "NO_COLOR", "LANG", "LANGUAGE", "TZ":
		return true
	}
	return strings.HasPrefix(name, "LC_") || strings.HasPrefix(name, "GIT_TRACE") || slices.Contains(safeEnvVars, name)
}

// staticValues are the values of words up to the first dynamic one.
func staticValues(words []Word) []string {
	var out []string
	for _, w := range words {
		if w.Dynamic {
			break
		}
		out = append(out, w.Values...)
	}
	return out
}

// gitCommandKeys are configuration keys whose value git runs as a shell
// command (lower case, as git compares them).
var gitCommandKeys = []string{"core.pager", "core.editor", "core.sshcommand", "core.fsmonitor", "core.askpass", "core.gitproxy",
	"diff.external", "sequence.editor", "gpg.program", "gpg.openpgp.program", "gpg.ssh.program", "gpg.x509.program",
	"interactive.difffilter", "uploadpack.packobjectshook", "web.browser", "sendemail.sendmailcmd", "sendemail.tocmd",
	"sendemail.cccmd", "sendemail.headercmd", "imap.tunnel", "gpg.ssh.defaultkeycommand"}

// gitUnseenKey reports whether a configuration key (lower case) makes git
// read more configuration, hooks or a transport that no rule sees: an
// included file, a hooks directory, a remote's helper (remote.x.vcs=ext
// runs its URL), a URL rewritten (to ext::).
func gitUnseenKey(k string) bool {
	sect, _, _ := strings.Cut(k, ".")
	return k == "include.path" || strings.HasPrefix(k, "includeif.") || k == "core.hookspath" ||
		sect == "remote" && strings.HasSuffix(k, ".vcs") ||
		sect == "url" && (strings.HasSuffix(k, ".insteadof") || strings.HasSuffix(k, ".pushinsteadof")) ||
		k == "protocol.ext.allow" || k == "protocol.allow"
}

// gitShellValue returns the shell command a configuration value is, when
// git runs it as one: an alias or a credential helper starting with "!",
// a pager, an editor, an ssh command, a diff, filter or merge driver.
func gitShellValue(key, val string) (string, bool) {
	k := strings.ToLower(key)
	switch strings.ToLower(val) {
	case "", "true", "false", "yes", "no", "on", "off", "1", "0":
		return "", false
	}
	if strings.HasPrefix(k, "alias.") {
		return strings.CutPrefix(val, "!")
	}
	if k == "credential.helper" || strings.HasPrefix(k, "credential.") && strings.HasSuffix(k, ".helper") {
		// "!…" is shell code, an absolute path is run as it is written;
		// another name is git credential-NAME.
		if code, ok := strings.CutPrefix(val, "!"); ok {
			return code, true
		}
		return val, strings.HasPrefix(val, "/")
	}
	if slices.Contains(gitCommandKeys, k) || strings.HasPrefix(k, "pager.") {
		return val, true
	}
	sect, rest, _ := strings.Cut(k, ".")
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return "", false
	}
	switch sub := rest[i+1:]; sect {
	case "remote":
		return val, sub == "uploadpack" || sub == "receivepack"
	case "difftool", "mergetool", "man", "browser":
		return val, sub == "cmd" || sub == "path"
	case "trailer":
		return val, sub == "cmd" || sub == "command"
	case "sendemail":
		return val, sub == "sendmailcmd" || sub == "tocmd" || sub == "cccmd" || sub == "headercmd"
	case "diff":
		return val, sub == "textconv" || sub == "command"
	case "filter":
		return val, sub == "clean" || sub == "smudge" || sub == "process"
	case "merge":
		return val, sub == "driver"
	}
	return "", false
}
