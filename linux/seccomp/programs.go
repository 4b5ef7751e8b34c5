package seccomp

import _ "embed"

//go:embed bpf_amd64.bin
var bpfAMD64 []byte

//go:embed bpf_arm64.bin
var bpfARM64 []byte

//go:embed bpf_amd64_unix.bin
var bpfAMD64Unix []byte

//go:embed bpf_arm64_unix.bin
var bpfARM64Unix []byte

// programs maps a program's file name (see [FileName]) to the embedded
// filter.
var programs = map[string][]byte{
	FileName("amd64", Strict): bpfAMD64, FileName("arm64", Strict): bpfARM64,
	FileName("amd64", Supervised): bpfAMD64Unix, FileName("arm64", Supervised): bpfARM64Unix,
}
