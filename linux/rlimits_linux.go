//go:build linux && !sbxinner

package linux

import (
	"fmt"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// rlimitFallback bounds processes and memory where no cgroup can be had.
type rlimitFallback struct {
	// procs is RLIMIT_NPROC for the command, on top of the tasks the
	// sandbox has when it starts (the init's threads). The kernel counts it
	// per user namespace, so in the sandbox's own namespace it bounds the
	// sandbox's processes and threads and nothing else; it does not bind a
	// caller that is root on the host.
	procs uint64
	// data is RLIMIT_DATA for the command: per process, not for the
	// sandbox as a whole, so only best-effort defaults fall back to it.
	data uint64
	// notes say what is in force, for the result's warnings.
	notes []string
}

// fallbackLimits decides what rlimits stand in for the cgroup that
// cgErr says cannot be had. A limit the user set that no rlimit can
// enforce as asked is an ErrUnavailable error.
func fallbackLimits(l pipeline.Limits, cgErr error, uid int) (*rlimitFallback, error) {
	fb := &rlimitFallback{}
	if l.MaxProcs > 0 {
		switch {
		case uid != 0:
			fb.procs = uint64(l.MaxProcs)
			fb.notes = append(fb.notes, fmt.Sprintf("the process limit (%d) is enforced with RLIMIT_NPROC in the sandbox's user namespace, as no cgroup can be had here: a fork past it fails with EAGAIN, and sbx cannot tell whether that happened", l.MaxProcs))
		case l.Soft(pipeline.LimitProcs):
			fb.notes = append(fb.notes, "default limits not enforced: processes: "+cgErr.Error()+" (and RLIMIT_NPROC does not bind root)")
		default:
			return nil, cgErr
		}
	}
	if l.MaxMemory > 0 {
		if !l.Soft(pipeline.LimitMemory) {
			return nil, fmt.Errorf("%w: cannot enforce the memory limit (--max-memory, sandbox.limits.maxMemory) for the sandbox as a whole: no writable memory cgroup here (delegated cgroup v2, or v1 as root); an rlimit would bound each process only, so nothing was run: lift it with --max-memory none, or run sbx where it gets a cgroup", pipeline.ErrUnavailable)
		}
		fb.data = uint64(l.MaxMemory)
		fb.notes = append(fb.notes, fmt.Sprintf("the default memory limit (%d bytes) is enforced per process with RLIMIT_DATA, not for the sandbox as a whole: no cgroup can be had here", l.MaxMemory))
	}
	return fb, nil
}
