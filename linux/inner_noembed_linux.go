//go:build linux && !sbxinner && !sbxembed

package linux

// innerELF is empty: a build without the sbxembed tag (go build, go
// install) runs sbx itself as the helper and the init.
var innerELF []byte
