package seccomp

import _ "embed"

//go:embed bpf_amd64.bin
var bpfAMD64 []byte

//go:embed bpf_arm64.bin
var bpfARM64 []byte

// programs maps GOARCH to the embedded filter.
var programs = map[string][]byte{"amd64": bpfAMD64, "arm64": bpfARM64}
