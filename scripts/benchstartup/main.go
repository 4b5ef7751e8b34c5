// Command benchstartup measures the start-up cost of sbx against baselines
// measured in the same run, interleaved: bare exec, raw bubblewrap, the same
// namespace set in bubblewrap, and optionally Anthropic's srt. It prints a
// Markdown table of medians and the ratios sbx/bwrap and srt/sbx.
//
// With -tx N it also measures the transactional writes (start-up in an
// empty and a 100,000-file workspace, 3,000 small files written, a 200 MiB
// file appended to, git commit in a 10,000-file repository), each against
// the same command with the workspace bound read-write by bubblewrap.
//
// It also breaks `sbx run -- true` down by phase (-phases N, from `sbx run
// --debug`) and measures a Bash tool call through a long-lived `sbx serve`
// (warm sandboxes) and through `sbx tool` (cold) against raw bubblewrap
// (-calls N).
//
// Usage: go run ./scripts/benchstartup -sbx bin/sbx [-srt PATH -srt-settings FILE] [-n 30] [-tx 10] [-phases 15] [-calls 20]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

type bench struct {
	name  string
	argv  []string
	times []time.Duration
	skip  string
}

func main() {
	n := flag.Int("n", 30, "runs of each command (at least 20)")
	sbx := flag.String("sbx", "bin/sbx", "sbx binary")
	srt := flag.String("srt", "", "srt binary (empty: skip the srt row)")
	srtSettings := flag.String("srt-settings", "", "srt settings file")
	srtSkip := flag.String("srt-skip", "", "why srt is skipped, for the report")
	txRuns := flag.Int("tx", 0, "also run the transactional-writes workloads this many times each (0: skip), in a scratch directory under -tx-dir")
	txDir := flag.String("tx-dir", os.TempDir(), "where to build the transactional-writes workspaces")
	calls := flag.Int("calls", 20, "also measure this many Bash tool calls through sbx serve (warm) and sbx tool (cold) (0: skip)")
	phases := flag.Int("phases", 15, "also break `sbx run -- true` down by phase over this many runs (0: skip)")
	flag.Parse()
	if *n < 20 {
		*n = 20
	}
	benches := []*bench{
		{name: "bare `true`", argv: []string{"true"}},
		{name: "`bwrap --ro-bind / / true`", argv: []string{"bwrap", "--ro-bind", "/", "/", "true"}},
		{name: "bwrap, sbx's namespace set", argv: []string{"bwrap", "--new-session", "--die-with-parent",
			"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup",
			"--disable-userns", "--cap-drop", "ALL", "--as-pid-1", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "true"}},
		{name: "`sbx run -- true` (default policy)", argv: []string{*sbx, "run", "--", "true"}},
	}
	srtBench := &bench{name: "`srt true`", skip: *srtSkip}
	if *srt != "" {
		srtBench.argv = []string{*srt, "-s", *srtSettings, "true"}
		srtBench.skip = ""
	} else if srtBench.skip == "" {
		srtBench.skip = "no srt given"
	}
	benches = append(benches, srtBench)
	// The same run with process, memory and CPU limits: the cost of the
	// per-run cgroup. Skipped where this host cannot give sbx one.
	limArgv := []string{*sbx, "run", "--max-procs", "512", "--max-memory", "2G", "--max-cpu", "60s", "--", "true"}
	limBench := &bench{name: "`sbx run --max-procs 512 --max-memory 2G --max-cpu 60s -- true`", argv: limArgv}
	if out, err := exec.Command(limArgv[0], limArgv[1:]...).CombinedOutput(); err != nil {
		limBench.argv, limBench.skip = nil, "limits unavailable: "+strings.TrimSpace(string(out))
	}
	benches = append(benches, limBench)
	// The same run with a disk budget: the cost of the helper's namespaces,
	// the budget tmpfs, the overlay and the (empty) merge.
	diskArgv := []string{*sbx, "run", "--max-disk", "1G", "--", "true"}
	diskBench := &bench{name: "`sbx run --max-disk 1G -- true`", argv: diskArgv}
	if out, err := exec.Command(diskArgv[0], diskArgv[1:]...).CombinedOutput(); err != nil {
		diskBench.argv, diskBench.skip = nil, "disk budget unavailable: "+strings.TrimSpace(string(out))
	}
	benches = append(benches, diskBench)

	// Warm up, and check that every command works.
	for _, b := range benches {
		if b.argv == nil {
			continue
		}
		for i := 0; i < 3; i++ {
			if out, err := exec.Command(b.argv[0], b.argv[1:]...).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n%s", b.name, err, out)
				os.Exit(1)
			}
		}
	}
	for i := 0; i < *n; i++ {
		for _, b := range benches {
			if b.argv == nil {
				continue
			}
			cmd := exec.Command(b.argv[0], b.argv[1:]...)
			start := time.Now()
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", b.name, err)
				os.Exit(1)
			}
			b.times = append(b.times, time.Since(start))
		}
	}
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Printf("Start-up, %d interleaved runs each, wall time per command (host %s, kernel %s, %d CPUs)\n\n",
		*n, host, strings.TrimSpace(string(kernel)), numCPU())
	fmt.Println("| command | median | p10 | p90 |")
	fmt.Println("|---|---|---|---|")
	med := map[int]time.Duration{}
	for i, b := range benches {
		if b.argv == nil {
			fmt.Printf("| %s | skipped: %s | | |\n", b.name, b.skip)
			continue
		}
		slices.Sort(b.times)
		q := func(f float64) time.Duration { return b.times[int(f*float64(len(b.times)-1))] }
		med[i] = q(0.5)
		fmt.Printf("| %s | %s | %s | %s |\n", b.name, ms(q(0.5)), ms(q(0.1)), ms(q(0.9)))
	}
	fmt.Println()
	fmt.Printf("sbx / raw bwrap (`--ro-bind / /`): %.2f×\n", ratio(med[3], med[1]))
	fmt.Printf("sbx / bwrap with sbx's namespace set: %.2f×\n", ratio(med[3], med[2]))
	if d, ok := med[4]; ok {
		fmt.Printf("srt / sbx: %.1f×\n", ratio(d, med[3]))
	} else {
		fmt.Printf("srt / sbx: skipped (%s)\n", srtBench.skip)
	}
	if d, ok := med[5]; ok {
		fmt.Printf("sbx with limits / sbx: %.2f×\n", ratio(d, med[3]))
	}
	if d, ok := med[6]; ok {
		fmt.Printf("sbx with a disk budget / sbx: %.2f×\n", ratio(d, med[3]))
	}
	if *phases > 0 {
		if err := runPhaseBench(*sbx, *phases); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if *calls > 0 {
		if err := runCallBench(*sbx, *calls, 150*time.Millisecond); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if *txRuns > 0 {
		dir, err := os.MkdirTemp(*txDir, "sbx-bench-tx-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer os.RemoveAll(dir)
		if err := runTxBench(*sbx, dir, *txRuns); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func numCPU() int {
	data, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(data), "processor\t:")
}
