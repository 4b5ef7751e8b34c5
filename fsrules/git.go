package fsrules

import (
	"slices"
	"strings"
)

// gitDataFiles are the files at the top of a git directory that hold git's
// own data: refs, the index, messages, state of an operation in progress.
// Nothing in them names a program or another file for git to read.
var gitDataFiles = []string{
	"HEAD", "ORIG_HEAD", "FETCH_HEAD", "MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "MERGE_AUTOSTASH",
	"CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD", "AUTO_MERGE", "COMMIT_EDITMSG", "TAG_EDITMSG",
	"SQUASH_MSG", "NOTES_EDITMSG", "EDIT_DESCRIPTION", "index", "packed-refs", "shallow", "description",
	"gc.pid", "gc.log", "FETCH_HEAD", "BISECT_LOG", "BISECT_START", "BISECT_TERMS", "BISECT_EXPECTED_REV",
	"BISECT_ANCESTORS_OK", "BISECT_NAMES", "BISECT_RUN", "BISECT_HEAD",
}

// gitDataDirs are the directories of a git directory whose whole content is
// git's own data (objects, refs, reflogs). The legacy branches/ and
// remotes/ are not: their files name a remote's URL and push refspecs,
// where the user's next push would go. Nor is the state of a rebase, am
// or cherry-pick in progress (rebase-merge/, rebase-apply/, sequencer/):
// its todo list runs commands when the user continues on the host.
var gitDataDirs = []string{"objects", "refs", "logs", "reftable", "lfs", "rr-cache"}

// gitInfoFiles are the entries of info/ that change nothing but what git
// ignores or lists.
var gitInfoFiles = []string{"exclude", "sparse-checkout", "refs", "packs"}

// GitEntry decides whether a sandboxed command may create, change or
// delete the entry rel (slash-separated, relative to the innermost git
// directory holding it) of a git directory. Only git's own data may change:
// never hooks (except inert *.sample files), commondir or gitdir (they send
// git elsewhere), info/ entries that change behaviour, or anything git does
// not write. The config file is decided by [GitConfigChange], from its
// content; GitEntry reports it as needing that check (config true).
func GitEntry(rel string, dir bool) (ok, config bool, why string) {
	parts := strings.Split(rel, "/")
	top := parts[0]
	switch {
	case rel == "config" && !dir:
		return false, true, ""
	case rel == "objects/info/alternates" || rel == "objects/info/http-alternates":
		return false, false, "alternates send git to another object store"
	case slices.Contains(gitDataDirs, top):
		return true, false, ""
	case top == "rebase-merge" || top == "rebase-apply" || top == "sequencer":
		return false, false, "the state of a rebase or cherry-pick in progress: its todo list runs commands when continued on the host"
	case len(parts) == 1 && !dir && strings.HasSuffix(top, ".lock"):
		// Git renames X.lock to X when it is done: a lock the command
		// leaves where the host's git holds one (git commit -a with its
		// editor open) becomes the host's X unchecked. Only those of git's
		// data that need no check of their content may change.
		if base := strings.TrimSuffix(top, ".lock"); slices.Contains(gitDataFiles, base) && !IsGitIndexName(base) {
			return true, false, ""
		}
		return false, false, "a lock file git on the host would rename to " + strings.TrimSuffix(top, ".lock") + " unchecked"
	case len(parts) == 1 && !dir && (slices.Contains(gitDataFiles, top) || strings.HasPrefix(top, "sharedindex.")):
		return true, false, ""
	case (top == "remotes" || top == "branches") && len(parts) == 1 && dir:
		return true, false, "" // git init makes branches/ empty; a file in either names where a push goes
	case top == "hooks":
		if len(parts) == 1 && dir || len(parts) == 2 && !dir && strings.HasSuffix(parts[1], ".sample") {
			return true, false, ""
		}
		return false, false, "git hooks run code on the host"
	case top == "info":
		if len(parts) == 1 && dir || len(parts) == 2 && !dir && slices.Contains(gitInfoFiles, parts[1]) {
			return true, false, ""
		}
		return false, false, "this entry of info/ changes how git behaves"
	case (top == "modules" || top == "worktrees") && dir:
		// Containers of nested git directories, whose entries are decided
		// relative to their own root.
		return true, false, ""
	case top == "commondir" || top == "gitdir":
		return false, false, top + " sends git to another directory"
	}
	return false, false, "not git's own data (objects, refs, index, logs …)"
}

// LooksLikeHead reports whether git could accept data as a HEAD file, and
// errs on the side of yes (a directory it names a git directory is
// guarded): a symbolic ref ("ref: refs/…") or text that begins with an
// object name. Git reads only the first hash's worth of hex digits and
// ignores what follows (validate_headref: "<40 hex>garbage" is a detached
// HEAD), so nothing after them counts here either.
func LooksLikeHead(data []byte) bool {
	for _, h := range []string{string(data), strings.TrimSpace(string(data))} {
		if strings.HasPrefix(h, "ref:") {
			return true
		}
		if len(h) >= 40 && strings.Trim(h[:40], "0123456789abcdefABCDEF") == "" {
			return true
		}
	}
	return false
}
