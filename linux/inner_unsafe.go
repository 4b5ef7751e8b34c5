//go:build linux && !sbxinner

package linux

import "unsafe"

// addrOf is the address of b's first byte (b not empty).
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
