// Package integration holds sbx's end-to-end tests: real sandboxes, with
// every denial checked from outside the sandbox (the file on the host, the
// server's hit count), never only by an exit status.
//
// A test skips when a prerequisite (bubblewrap, user namespaces) is missing
// on a developer's machine; with CI=true it fails instead.
package integration
