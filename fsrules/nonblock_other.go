//go:build !unix

package fsrules

// nonBlock is 0 where there are no FIFOs to wait for.
const nonBlock = 0
