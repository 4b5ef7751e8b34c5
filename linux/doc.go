// Package linux is sbx's Linux executor: a bubblewrap sandbox whose first
// process is sbx itself, re-executed as an init that applies Landlock and the
// seccomp filter to the command it starts.
//
// The mount plan and the bubblewrap argv are built by pure functions from the
// compiled policy (portable and golden-tested); only spawning is Linux code.
package linux
