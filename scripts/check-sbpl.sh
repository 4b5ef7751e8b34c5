#!/usr/bin/env bash
# For someone on a Mac: feeds every golden Seatbelt profile to sandbox-exec
# (a syntax or semantics error fails), then builds sbx and checks a few
# enforcement facts with it. The way to validate a release on macOS; Linux
# CI cannot run sandbox-exec.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(uname -s) != Darwin ]]; then
  echo "check-sbpl.sh runs on macOS only (it needs /usr/bin/sandbox-exec)" >&2
  exit 2
fi
fail=0
for f in darwin/testdata/*.sb; do
  if /usr/bin/sandbox-exec -p "$(cat "$f")" /usr/bin/true 2>/tmp/sbx-sbpl-err; then
    echo "ok    $f"
  else
    echo "FAIL  $f: $(cat /tmp/sbx-sbpl-err)"
    fail=1
  fi
done
mkdir -p bin
scripts/build bin/sbx
bin/sbx doctor
ws=$(mktemp -d)
trap 'rm -rf "$ws"' EXIT
cd "$ws"
check() { if eval "$2"; then echo "ok    $1"; else echo "FAIL  $1"; fail=1; fi; }
"$OLDPWD/bin/sbx" run --mode bypassPermissions -c 'echo in > inside.txt; echo x > .bashrc; mkdir -p a && echo x > a/.zshrc; echo x > ~/sbx-probe-outside; true' || true
check "workspace write lands" '[ "$(cat inside.txt)" = in ]'
check "protected .bashrc not created" '[ ! -e .bashrc ]'
check "nested .zshrc not created" '[ ! -e a/.zshrc ]'
check "home not writable" '[ ! -e ~/sbx-probe-outside ]'
# Violations reach the audit log through `log stream` (best effort: a miss
# is a warning, not a failure).
"$OLDPWD/bin/sbx" run --mode bypassPermissions --audit audit.jsonl -c 'echo x > ~/sbx-probe-outside2; true' || true
if grep -q '"event":"sandbox-violation"' audit.jsonl 2>/dev/null; then
  echo "ok    a denied write is in the audit log"
else
  echo "WARN  no sandbox-violation event in the audit log (log stream gave nothing; see darwin/violations.go)"
fi
# Git: a linked worktree's repository outside the workspace keeps its hooks
# and config; .git cannot be moved away or replaced by a pointer file; git's
# own data stays writable (a commit works).
sbx=$OLDPWD/bin/sbx main=$(mktemp -d) wt=$(mktemp -d)
trap 'rm -rf "$ws" "$main" "$wt"' EXIT
git -C "$main" init -q
git -C "$main" -c user.name=t -c user.email=t@t commit -q --allow-empty -m init
rmdir "$wt" && git -C "$main" worktree add -q "$wt"
(cd "$wt" && "$sbx" run --mode bypassPermissions -c "echo x > '$main/.git/hooks/pre-commit'; git config core.fsmonitor 'touch /tmp/sbx-fsmonitor'; \
  echo x > '$main/.git/worktrees/$(basename "$wt")/commondir'; git -c user.name=t -c user.email=t@t commit -q --allow-empty -m in-sandbox; \
  mv .git g; mkdir sub && printf 'gitdir: /tmp\\n' > sub/.git; true") || true
check "main repository's hook not created" '[ ! -e "$main/.git/hooks/pre-commit" ]'
check "main repository's config unchanged" '[ -z "$(git -C "$main" config core.fsmonitor)" ]'
check "worktree's commondir unchanged" '[ "$(cat "$main/.git/worktrees/$(basename "$wt")/commondir")" = ../.. ]'
check "a commit in the worktree works" '[ "$(git -C "$wt" log -1 --format=%s)" = in-sandbox ]'
check ".git not moved" '[ -e "$wt/.git" ] && [ ! -e "$wt/g" ]'
check "no .git pointer file created" '[ ! -e "$wt/sub/.git" ]'
# A read-denied file cannot be moved (or hard-linked) out of its rule, nor a
# write-denied directory renamed, edited and renamed back.
echo SECRET-VALUE > .env
mkdir -p vendor && echo orig > vendor/a
"$sbx" run --mode bypassPermissions --deny-read .env --deny-write vendor \
  -c 'mv .env x; cat x; ln .env y; cat y; mv vendor v; echo evil > v/a; mv v vendor; true' > moves.out 2>&1 || true
check ".env not moved" '[ -e .env ] && [ ! -e x ]'
check "read-denied content not shown (mv, ln)" '! grep -q SECRET-VALUE moves.out'
check "write-denied directory not renamed" '[ "$(cat vendor/a)" = orig ] && [ ! -e v ]'
# A rename carries nothing past the name rules: no repository is made in
# TMPDIR and moved in, the workspace is not moved away and back, a module's
# git directory moved inside .git keeps its config read-only; another
# terminal of the user cannot be read.
(cd "$wt" && "$sbx" run --mode bypassPermissions -c 'git init -q "$TMPDIR/r"; mkdir -p "$TMPDIR/r/.git"; mv "$TMPDIR/r" tools;
  mkdir -p b/objects b/refs; echo "ref: refs/heads/main" > b/HEAD; mv b sub2/.git 2>/dev/null || mv b .git-b;
  ws=$PWD; mv "$ws" "$TMPDIR/p" && mv "$TMPDIR/p" "$ws"; cat /dev/ttys000 </dev/null >/dev/null && echo tty-read; true' > renames.out 2>&1) || true
check "no repository moved in from TMPDIR" '[ ! -e "$wt/tools/.git" ]'
check "no .git made by a rename" '[ ! -e "$wt/sub2/.git" ]'
check "workspace not moved" '[ -e "$wt/.git" ]'
check "another terminal not readable" '! grep -q tty-read renames.out'
# Links: no hard link to git's config (a second name outside every rule),
# no symbolic link in a git directory (git writes through it).
(cd "$wt" && "$sbx" run --mode bypassPermissions -c 'ln "$(git rev-parse --git-common-dir)/config" cfg; ln -s "$HOME/.zshenv" "$(git rev-parse --git-dir)/FETCH_HEAD"; true' >/dev/null 2>&1) || true
check "no hard link to git's config" '[ ! -e "$wt/cfg" ]'
check "no symbolic link in a git directory" '[ ! -L "$(git -C "$wt" rev-parse --git-dir)/FETCH_HEAD" ]'
# Interactive: with a terminal on stdin the command's group is the
# foreground one, so a pager and stty work (in a background group they stop
# on SIGTTIN/SIGTTOU until --timeout kills them).
(cd "$wt" && printf q | script -q /dev/null "$sbx" run --mode bypassPermissions --timeout 30s \
  -c 'stty -echo && stty echo && GIT_PAGER=less git log && touch pager-done' >/dev/null 2>&1) || true
check "git log with a pager in a terminal" '[ -e "$wt/pager-done" ]'
# Everyday tools: Python's multiprocessing (POSIX semaphores), preferences,
# group names, a pty (script(1) calls openpty), and no violation logged for
# ioctls on /dev/null (the audit log is best effort: a miss is not proof).
"$sbx" run --mode bypassPermissions --audit tools.jsonl -c 'python3 -c "from multiprocessing import Pool
if __name__ == \"__main__\": print(\"pool\", sum(Pool(2).map(abs, [-1, -2])))"; defaults read -g >/dev/null && echo prefs-ok;
  id -Gn >/dev/null && echo groups-ok; script -q /dev/null echo pty-ok; true' > tools.out 2>&1 || true
check "multiprocessing.Pool" 'grep -q "pool 3" tools.out'
check "preferences readable" 'grep -q prefs-ok tools.out'
check "group membership" 'grep -q groups-ok tools.out'
check "openpty" 'grep -q pty-ok tools.out'
if grep -q 'file-ioctl' tools.jsonl 2>/dev/null; then echo "WARN  ioctl violations logged: $(grep -o '"target":"[^"]*"' tools.jsonl | sort -u | tr '\n' ' ')"; fi
# A Unix socket in the run's TMPDIR can be bound and reached (tsx, vite,
# esbuild and jest talk to their workers so).
"$sbx" run --mode bypassPermissions -c 'python3 -c "import os, socket
p = os.path.join(os.environ[\"TMPDIR\"], \"t.sock\")
s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect(p); print(\"unix-ok\")"' > unix.out 2>&1 || true
check "Unix socket under TMPDIR" 'grep -q unix-ok unix.out'
# The per-user directories: the xcrun shim behind /usr/bin/git writes its
# xcrun_db there, clang its module cache (the run's own folders, through
# DIRHELPER_USER_DIR_SUFFIX); the rest of T and C stays read-only and the
# run's folders are gone after it.
"$sbx" run --mode bypassPermissions -c 'git --version >/dev/null && echo xcrun-ok
  t=$(getconf DARWIN_USER_TEMP_DIR); c=$(getconf DARWIN_USER_CACHE_DIR); echo "dirs $t $c"
  touch "$t/x" && echo tmp-ok; touch "$c/x" && echo cache-ok
  touch "$(dirname "$t")/sbx-escape" 2>/dev/null && echo shared-written
  printf "@import Foundation;\nint main(void){return 0;}\n" > m.m
  clang -fmodules -c m.m -o /dev/null && echo modules-ok; rm -f m.m' > userdirs.out 2>&1 || true
check "xcrun shim without warnings" 'grep -q xcrun-ok userdirs.out && ! grep -q "confstr\|xcrun_db" userdirs.out'
check "the run's per-user temp and cache folders writable" 'grep -q tmp-ok userdirs.out && grep -q cache-ok userdirs.out'
check "the shared per-user folders read-only" '! grep -q shared-written userdirs.out && [ ! -e "$(getconf DARWIN_USER_TEMP_DIR)sbx-escape" ]'
check "clang modules build" 'grep -q modules-ok userdirs.out || ! command -v clang >/dev/null'
check "the run's folders removed" '! ls -d "$(getconf DARWIN_USER_TEMP_DIR)"sbx-run-* "$(getconf DARWIN_USER_CACHE_DIR)"sbx-run-* 2>/dev/null | grep -q .'
# allowLocalBinding: a dev server is reached from inside; a 0.0.0.0 listener
# is not reached from the LAN address (inbound is loopback only).
lb='{"sandbox":{"network":{"allowLocalBinding":true}}}'
"$sbx" run --mode bypassPermissions --settings "$lb" -c 'python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 & sleep 1
  curl -s -m 5 --noproxy "*" http://127.0.0.1:8765/ >/dev/null && echo dev-ok; kill $!' > local.out 2>&1 || true
check "dev server reached from inside" 'grep -q dev-ok local.out'
if lan=$(ipconfig getifaddr en0 2>/dev/null) && [ -n "$lan" ]; then
  "$sbx" run --mode bypassPermissions --settings "$lb" -c 'python3 -m http.server 8766 --bind 0.0.0.0 >/dev/null 2>&1 & sleep 5; kill $!' &
  sleep 2
  check "0.0.0.0 listener not reached from $lan" '! curl -s -m 2 --noproxy "*" "http://$lan:8766/" >/dev/null'
  wait || true
else
  echo "SKIP  no LAN address on en0 for the 0.0.0.0 listener check"
fi
# A writable home (a throwaway one): persistence paths stay read-only, in
# either case, and their parents cannot be renamed.
fake=$(mktemp -d)
mkdir -p "$fake/Library"
(cd "$fake" && HOME="$fake" "$sbx" run --home-workspace --mode bypassPermissions -c 'mkdir -p Library/LaunchAgents; echo x > Library/LaunchAgents/evil.plist
  mkdir -p .SSH; echo x > .SSH/authorized_keys; mv Library L2; echo ok > notes.txt; true' >/dev/null 2>&1) || true
check "no LaunchAgent planted" '[ ! -e "$fake/Library/LaunchAgents/evil.plist" ]'
check "no authorized_keys (.SSH)" '[ ! -e "$fake/.SSH/authorized_keys" ] && [ ! -e "$fake/.ssh/authorized_keys" ]'
check "~/Library not renamed; other home files writable" '[ -d "$fake/Library" ] && [ ! -e "$fake/L2" ] && [ -e "$fake/notes.txt" ]'
rm -rf "$fake"
# Credentials: sbx's own environment (real secrets) is not readable through
# ps (kern.procargs2), and the login keychain is not reachable. The check
# adds a throwaway item that trusts /usr/bin/security, and removes it.
SBX_CHECK_TOKEN=real-secret-$$ "$sbx" run --mode bypassPermissions -c 'ps -wwEp $PPID; env' > creds.out 2>&1 || true
check "ps -wwEp \$PPID shows no secret" '! grep -q "real-secret-$$" creds.out'
item=sbx-check-$$
if security add-generic-password -a sbx -s "$item" -w keychain-secret-$$ -T /usr/bin/security 2>/dev/null; then
  "$sbx" run --mode bypassPermissions -c "security find-generic-password -s $item -w" > keychain.out 2>&1 || true
  security delete-generic-password -s "$item" >/dev/null 2>&1 || true
  check "security find-generic-password refused" '! grep -q "keychain-secret-$$" keychain.out'
else
  echo "SKIP  could not add a throwaway keychain item"
fi
# The probes, as on Linux (resource-limits reports not-implemented).
"$OLDPWD/bin/sbx" probe || fail=1
exit $fail
