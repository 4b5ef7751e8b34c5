//go:build seccompgen

// Command gen compiles seccomp.Rules into BPF programs with libseccomp, one
// per architecture, for embedding. Run it with `go generate ./linux/seccomp`
// (needs cgo and libseccomp-dev).
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	libseccomp "github.com/seccomp/libseccomp-golang"

	"github.com/sbx-sandbox/sbx/linux/seccomp"
)

func main() {
	out := "."
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	for goarch, arch := range map[string]libseccomp.ScmpArch{"amd64": libseccomp.ArchAMD64, "arm64": libseccomp.ArchARM64} {
		for _, v := range seccomp.Variants {
			if err := build(arch, v, filepath.Join(out, seccomp.FileName(goarch, v))); err != nil {
				fmt.Fprintf(os.Stderr, "gen %s %s: %v\n", goarch, v, err)
				os.Exit(1)
			}
		}
	}
}

func build(arch libseccomp.ScmpArch, v seccomp.Variant, path string) error {
	f, err := libseccomp.NewFilter(libseccomp.ActAllow)
	if err != nil {
		return err
	}
	defer f.Release()
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return err
	}
	if native != arch {
		if err := f.AddArch(arch); err != nil {
			return err
		}
		if err := f.RemoveArch(native); err != nil {
			return err
		}
	}
	if err := f.SetBadArchAction(libseccomp.ActKillProcess); err != nil {
		return err
	}
	// A binary tree of syscall numbers: the ENOSYS range is hundreds of
	// entries, which a linear list would walk on every call.
	if err := f.SetOptimize(2); err != nil {
		return err
	}
	// The program is installed by sbx itself, after it sets no_new_privs.
	if err := f.SetNoNewPrivsBit(false); err != nil {
		return err
	}
	var byNumber []seccomp.Rule
	for _, r := range seccomp.Rules(v) {
		// Rules take the native architecture's number; libseccomp translates
		// it by name for the filter's architecture.
		nr, err := libseccomp.GetSyscallFromName(r.Syscall)
		exact := false
		if (err != nil || r.Syscall == "") && r.Nr != 0 {
			if native != arch {
				// libseccomp translates numbers for a foreign architecture
				// by name, and knows none for this one: the rule goes in
				// front of the program it exports.
				byNumber = append(byNumber, r)
				continue
			}
			nr, err, exact = libseccomp.ScmpSyscall(r.Nr), nil, true
		}
		if err != nil {
			return fmt.Errorf("%s (nr %d): %w", r.Syscall, r.Nr, err)
		}
		act := libseccomp.ActErrno.SetReturnCode(1) // EPERM
		switch r.Action {
		case seccomp.ENOSYS:
			act = libseccomp.ActErrno.SetReturnCode(38) // ENOSYS
		case seccomp.Notify:
			act = libseccomp.ActNotify
		}
		if len(r.Conds) == 0 {
			if exact {
				err = f.AddRuleExact(nr, act)
			} else {
				err = f.AddRule(nr, act)
			}
		} else {
			var conds []libseccomp.ScmpCondition
			for _, c := range r.Conds {
				var sc libseccomp.ScmpCondition
				switch c.Op {
				case seccomp.MaskedEq:
					sc, err = libseccomp.MakeCondition(c.Arg, libseccomp.CompareMaskedEqual, c.Mask, c.Value)
				case seccomp.GE:
					sc, err = libseccomp.MakeCondition(c.Arg, libseccomp.CompareGreaterEqual, c.Value)
				}
				if err != nil {
					return err
				}
				conds = append(conds, sc)
			}
			if exact {
				err = f.AddRuleConditionalExact(nr, act, conds)
			} else {
				err = f.AddRuleConditional(nr, act, conds)
			}
		}
		if err != nil {
			return fmt.Errorf("%s (nr %d): %w", r.Syscall, nr, err)
		}
	}
	var buf bytes.Buffer
	if err := exportBPF(f, &buf); err != nil {
		return err
	}
	raw := buf.Bytes()
	if len(byNumber) > 0 {
		prog, err := seccomp.Decode(raw)
		if err != nil {
			return err
		}
		if prog, err = seccomp.InsertByNumber(prog, byNumber); err != nil {
			return err
		}
		raw = seccomp.Encode(prog)
	}
	return writeFile(path, raw)
}

// exportBPF writes the filter's program to w (libseccomp exports only to
// a file).
func exportBPF(f *libseccomp.ScmpFilter, w io.Writer) error {
	tmp, err := os.CreateTemp("", "sbx-bpf-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := f.ExportBPF(tmp); err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err = io.Copy(w, tmp)
	return err
}

// writeFile replaces path with data atomically.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bpf-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
