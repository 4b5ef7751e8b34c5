package seccomp

import (
	"encoding/binary"
	"fmt"
)

// Classic BPF opcodes the by-number block uses.
const (
	opLdNr   = 0x20 // ld [0]: the syscall number
	opJeq    = 0x15
	opJge    = 0x35
	opJgt    = 0x25
	opRet    = 0x06
	classJmp = 0x05
	opJa     = 0x05 // BPF_JMP|BPF_JA
)

// retErrno is SECCOMP_RET_ERRNO with the errno in its data.
func retErrno(errno uint32) uint32 { return 0x00050000 | errno }

// InsertByNumber puts rules that have only a number and no conditions in
// front of prog's decision tree, right after the program loads the
// syscall number: libseccomp translates numbers for a foreign architecture
// by name, so rules for calls it does not know (newer than it) cannot be
// given to it there. Each run of consecutive numbers with one action
// becomes a range check. Jumps that cross the insertion point are moved;
// an offset that no longer fits is an error.
func InsertByNumber(prog []Instruction, rules []Rule) ([]Instruction, error) {
	at := -1
	for i, in := range prog {
		if in.Code == opLdNr && in.K == 0 {
			at = i + 1
			break
		}
	}
	if at < 0 {
		return nil, fmt.Errorf("seccomp: the program never loads the syscall number")
	}
	block, err := rangeChecks(rules)
	if err != nil {
		return nil, err
	}
	out := make([]Instruction, 0, len(prog)+len(block))
	for i, in := range prog[:at] {
		moved, err := moveJump(in, i, at, len(block))
		if err != nil {
			return nil, err
		}
		out = append(out, moved)
	}
	out = append(out, block...)
	return append(out, prog[at:]...), nil
}

// moveJump adds n to the offsets of the jump at index i whose targets lie
// at or after at.
func moveJump(in Instruction, i, at, n int) (Instruction, error) {
	if in.Code&0x07 != classJmp {
		return in, nil
	}
	if in.Code == opJa {
		if i+1+int(in.K) >= at {
			in.K += uint32(n)
		}
		return in, nil
	}
	for _, off := range []*uint8{&in.Jt, &in.Jf} {
		if i+1+int(*off) < at {
			continue
		}
		if int(*off)+n > 255 {
			return in, fmt.Errorf("seccomp: jump at %d no longer fits after inserting %d instructions", i, n)
		}
		*off += uint8(n)
	}
	return in, nil
}

// rangeChecks turns rules (numbers only, no conditions) into range checks:
// jge lo; jgt hi; ret action, for each run of consecutive numbers.
func rangeChecks(rules []Rule) ([]Instruction, error) {
	var block []Instruction
	for i := 0; i < len(rules); {
		r := rules[i]
		if r.Nr == 0 || len(r.Conds) > 0 {
			return nil, fmt.Errorf("seccomp: rule %q cannot be inserted by number", r.Syscall)
		}
		j := i + 1
		for j < len(rules) && rules[j].Nr == rules[j-1].Nr+1 && rules[j].Action == r.Action && len(rules[j].Conds) == 0 {
			j++
		}
		ret := retErrno(1)
		switch r.Action {
		case ENOSYS:
			ret = retErrno(38)
		case EPERM:
		default:
			return nil, fmt.Errorf("seccomp: rule %q: only EPERM and ENOSYS can be inserted by number", r.Syscall)
		}
		block = append(block,
			Instruction{Code: opJge, K: r.Nr, Jt: 0, Jf: 2},
			Instruction{Code: opJgt, K: rules[j-1].Nr, Jt: 1, Jf: 0},
			Instruction{Code: opRet, K: ret})
		i = j
	}
	return block, nil
}

// Encode lays a program out as the kernel reads it (little-endian, like
// both supported architectures).
func Encode(prog []Instruction) []byte {
	out := make([]byte, 8*len(prog))
	for i, in := range prog {
		b := out[8*i:]
		binary.LittleEndian.PutUint16(b, in.Code)
		b[2], b[3] = in.Jt, in.Jf
		binary.LittleEndian.PutUint32(b[4:], in.K)
	}
	return out
}
