//go:build !linux

package seccomp

import "errors"

// InstallThread is only available on Linux.
func InstallThread(prog []Instruction) error {
	return errors.ErrUnsupported
}
