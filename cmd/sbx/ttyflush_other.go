//go:build !linux

package main

import "os"

// flushInput does nothing here: the question is only asked where the
// sandbox can be paused (Linux).
func flushInput(*os.File) {}

// questionMode does nothing here, for the same reason.
func questionMode(*os.File) (func(), error) { return func() {}, nil }
