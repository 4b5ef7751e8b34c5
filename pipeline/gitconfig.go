package pipeline

import (
	"slices"
	"strings"
)

// gitStrings reads, in a git command's global options, the configuration
// values git runs as shell commands (-c alias.x='!rm -rf ~', -c
// core.pager=…, -c core.sshCommand=…, a filter's or a diff driver's
// command) and a command-line alias used as the subcommand (git -c
// alias.p=push p): deny and ask rules see them as they see sh -c's string,
// and allow rules must cover them too. A value known only at run time
// (--config-env, a variable) stays unread.
func (sp *splitter) gitStrings(sc SimpleCommand) {
	aliases := map[string]string{}
	for i := 1; i < len(sc.Words); i++ {
		w := sc.Words[i]
		if w.Dynamic || len(w.Values) != 1 {
			return
		}
		a := w.Values[0]
		kv := ""
		switch {
		case a == "-c":
			if i++; i >= len(sc.Words) || sc.Words[i].Dynamic || len(sc.Words[i].Values) != 1 {
				return
			}
			kv = sc.Words[i].Values[0]
		case strings.HasPrefix(a, "-c"):
			kv = a[2:]
		case slices.Contains(gitGlobalArg, a):
			i++
			continue
		case strings.HasPrefix(a, "-"):
			continue
		default: // the subcommand
			if v, ok := aliases[strings.ToLower(a)]; ok {
				sp.inner(sc, "git "+v+" "+quoteWords(staticValues(sc.Words[i+1:])), "git alias "+a)
			}
			return
		}
		key, val, _ := strings.Cut(kv, "=")
		if code, ok := gitShellValue(key, val); ok {
			sp.inner(sc, code, "git -c "+key)
		} else if k := strings.ToLower(key); strings.HasPrefix(k, "alias.") {
			aliases[k[len("alias."):]] = val
		}
	}
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
	"interactive.difffilter", "uploadpack.packobjectshook", "web.browser"}

// gitShellValue returns the shell command a configuration value is, when
// git runs it as one: an alias or a credential helper starting with "!",
// a pager, an editor, an ssh command, a diff, filter or merge driver.
func gitShellValue(key, val string) (string, bool) {
	k := strings.ToLower(key)
	switch strings.ToLower(val) {
	case "", "true", "false", "yes", "no", "on", "off", "1", "0":
		return "", false
	}
	if strings.HasPrefix(k, "alias.") || k == "credential.helper" || strings.HasPrefix(k, "credential.") && strings.HasSuffix(k, ".helper") {
		return strings.CutPrefix(val, "!")
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
	case "diff":
		return val, sub == "textconv" || sub == "command"
	case "filter":
		return val, sub == "clean" || sub == "smudge" || sub == "process"
	case "merge":
		return val, sub == "driver"
	}
	return "", false
}
