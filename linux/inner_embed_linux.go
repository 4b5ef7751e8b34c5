//go:build linux && !sbxinner && sbxembed

package linux

import _ "embed"

// innerELF is cmd/sbx-inner, built by scripts/build with the sbxinner tag
// and given to this build at linux/sbx-inner.bin (through -overlay: no
// file of it in the tree). Never written.
//
//go:embed sbx-inner.bin
var innerELF []byte
