//go:build cgo && !race

package main

// sbx-inner, like sbx, does not work when built with cgo (see
// cmd/sbx/cgo_guard.go); scripts/build builds it with CGO_ENABLED=0.
var _ = sbx_inner_must_be_built_with_CGO_ENABLED_0__see_cmd_sbx_cgo_guard_go
