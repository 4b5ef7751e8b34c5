package seccomp

//go:generate go run -tags seccompgen ./gen .

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"
)

// ErrNoProgram is returned on an architecture sbx has no compiled filter for.
var ErrNoProgram = errors.New("seccomp: no compiled filter for this architecture")

// Instruction is one classic BPF instruction, laid out as struct sock_filter.
type Instruction struct {
	Code uint16
	Jt   uint8
	Jf   uint8
	K    uint32
}

// FileName is the name of the compiled program of a variant for goarch:
// bpf_amd64.bin, bpf_amd64_unix.bin …
func FileName(goarch string, v Variant) string {
	if v == Supervised {
		return "bpf_" + goarch + "_unix.bin"
	}
	return "bpf_" + goarch + ".bin"
}

// Program returns the compiled filter of a variant for goarch ("amd64" or
// "arm64").
func Program(goarch string, v Variant) ([]Instruction, error) {
	raw, ok := programs[FileName(goarch, v)]
	if !ok || len(raw) == 0 {
		return nil, fmt.Errorf("%w (%s, %s)", ErrNoProgram, goarch, v)
	}
	return Decode(raw)
}

// Native returns the compiled filter of a variant for the running
// architecture.
func Native(v Variant) ([]Instruction, error) { return Program(runtime.GOARCH, v) }

// Decode reads a program laid out as struct sock_filter entries.
func Decode(raw []byte) ([]Instruction, error) {
	if len(raw)%8 != 0 {
		return nil, fmt.Errorf("seccomp: program length %d is not a multiple of 8", len(raw))
	}
	out := make([]Instruction, 0, len(raw)/8)
	for i := 0; i < len(raw); i += 8 {
		// Both supported architectures are little-endian.
		out = append(out, Instruction{
			Code: binary.LittleEndian.Uint16(raw[i:]),
			Jt:   raw[i+2],
			Jf:   raw[i+3],
			K:    binary.LittleEndian.Uint32(raw[i+4:]),
		})
	}
	return out, nil
}

// Disassemble renders a program one instruction per line, for golden tests
// and review.
func Disassemble(prog []Instruction) string {
	var s string
	for i, in := range prog {
		r := bpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
		s += fmt.Sprintf("%3d %v\n", i, r.Disassemble())
	}
	return s
}
