package main

import (
	"github.com/spf13/pflag"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// registerLimits adds the resource-limit flags. Every limit of the sandbox
// itself also takes "none", which lifts a default or a settings value. withTimeout is false for
// tool and serve, where the call's own timeout input applies.
func registerLimits(f *pflag.FlagSet, l *pipeline.LimitFlags, withTimeout bool) {
	f.StringVar(&l.MaxProcs, "max-procs", "", "at most `N` processes and threads in the sandbox (cgroup pids)")
	f.StringVar(&l.MaxMemory, "max-memory", "", "at most `SIZE` of memory for the whole sandbox, e.g. 512M, 2G (cgroup memory)")
	f.StringVar(&l.MaxCPU, "max-cpu", "", "at most `DURATION` of CPU time per process (RLIMIT_CPU)")
	f.StringVar(&l.MaxTmp, "max-tmp", "", "size of the private /tmp: `SIZE` such as 256M (a size-limited tmpfs)")
	f.StringVar(&l.MaxDisk, "max-disk", "", "at most `SIZE` added to the writable roots and /tmp together (tool and serve: 1G; none lifts it): the writes are staged in a size-limited tmpfs instead of on disk")
	f.StringVar(&l.MaxOpenFiles, "max-open-files", "", "at most `N` open descriptors per process (RLIMIT_NOFILE)")
	f.StringVar(&l.MaxOutput, "max-output", "", "keep at most `SIZE` of stdout+stderr (bytes for run, characters of the tool_result for tool and serve); the rest is read and discarded")
	if withTimeout {
		f.StringVar(&l.Timeout, "timeout", "", "kill the whole sandbox after `DURATION` of wall clock (exit status 124)")
	}
}

// txFlags are the flags of the transactional writes (run, tool, serve).
type txFlags struct {
	discard, homeWorkspace bool
}

func registerTx(f *pflag.FlagSet, t *txFlags) {
	f.BoolVar(&t.discard, "discard", false, "run the command, report what it would have changed in the writable roots, apply nothing")
	f.BoolVar(&t.homeWorkspace, "home-workspace", false, "let the home directory (or an ancestor of it) be writable; its persistence files stay protected")
}
