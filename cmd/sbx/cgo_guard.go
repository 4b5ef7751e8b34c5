//go:build cgo && !race

package main

// sbx does not work when built with cgo: the sandbox's init drops
// capabilities on every thread with syscall.AllThreadsSyscall, which Go
// offers only without cgo. So a cgo build fails here, at compile time,
// instead of at run time. Build or install it with CGO_ENABLED=0:
//
//	CGO_ENABLED=0 go install github.com/sbx-sandbox/sbx/cmd/sbx@latest
//
// (Race-detector test builds need cgo and are let through.)
var _ = sbx_must_be_built_with_CGO_ENABLED_0__see_cgo_guard_go
