package main

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// runCallBench measures one Bash tool call three ways, interleaved in one
// run: through a long-lived `sbx serve` (its sandboxes launched while the
// caller thinks), through `sbx tool` (one process and one cold sandbox per
// call), and raw bubblewrap; for `true` (a bash builtin: bash runs in the
// sandbox) and for `cat /etc/hostname` (a program: the sandbox execs it
// without bash's start). Each serve call comes after a pause (the caller
// "thinking"), as an agent's calls do.
func runCallBench(sbx string, n int, think time.Duration) error {
	call, stop, err := startServe(sbx)
	if err != nil {
		return err
	}
	defer stop()
	first, err := call(0, "true")
	if err != nil {
		return err
	}
	for _, command := range []string{"true", "cat /etc/hostname"} {
		if err := callBench(sbx, call, command, n, think, first); err != nil {
			return err
		}
		first = 0
	}
	return nil
}

// callBench is runCallBench for one command; first, when not 0, is the
// time of serve's first call.
func callBench(sbx string, call func(int, string) (time.Duration, error), command string, n int, think time.Duration, first time.Duration) error {
	tool := func(id int) (time.Duration, error) {
		cmd := exec.Command(sbx, "tool")
		cmd.Stdin = strings.NewReader(fmt.Sprintf(`{"type":"tool_use","id":"c%d","name":"Bash","input":{"command":%q}}`, id, command))
		start := time.Now()
		b, err := cmd.Output()
		if err != nil || strings.Contains(string(b), `"is_error":true`) {
			return 0, fmt.Errorf("sbx tool: %v %s", err, b)
		}
		return time.Since(start), nil
	}
	timed := func(argv ...string) func(int) (time.Duration, error) {
		return func(int) (time.Duration, error) {
			start := time.Now()
			err := exec.Command(argv[0], argv[1:]...).Run()
			return time.Since(start), err
		}
	}
	serve := func(id int) (time.Duration, error) { return call(id, command) }
	// A Bash tool call runs its command with bash -c: the same in raw
	// bubblewrap is the floor for one.
	raw := append([]string{"bwrap", "--ro-bind", "/", "/"}, strings.Fields(command)...)
	rawBash := []string{"bwrap", "--ro-bind", "/", "/", "/bin/bash", "-c", command}
	names := []string{"`sbx serve`, one call after the first (warm)", "`sbx tool`, one call (cold)", "`bwrap --ro-bind / / " + command + "`",
		"`bwrap --ro-bind / / /bin/bash -c '" + command + "'` (what a Bash call runs)"}
	fns := []func(int) (time.Duration, error){serve, tool, timed(raw...), timed(rawBash...)}
	med, rows, err := interleave(fns, n, think)
	if err != nil {
		return err
	}
	fmt.Printf("\nOne Bash tool call (`%s`, the tool calls' default limits), %d interleaved calls each, %s pause before each\n\n", command, n, think)
	fmt.Println("| path | median | p10 | p90 |")
	fmt.Println("|---|---|---|---|")
	if first != 0 {
		fmt.Printf("| `sbx serve`, its first call, sent at once (its sandbox still launching) | %s | | |\n", ms(first))
	}
	for j, r := range rows {
		fmt.Printf("| %s | %s |\n", names[j], r)
	}
	label := "warm serve call"
	if command != "true" {
		label = "warm serve call of `" + command + "`"
	}
	fmt.Printf("\n%s / raw bwrap: %.2f×; / raw bwrap running bash -c: %.2f×; cold `sbx tool` / warm serve call: %.2f×\n",
		label, ratio(med[0], med[2]), ratio(med[0], med[3]), ratio(med[1], med[0]))
	return nil
}

// interleave runs each of fns n times, in turn, after a pause of think
// before each, and returns each one's median and its "median | p10 | p90"
// row.
func interleave(fns []func(int) (time.Duration, error), n int, think time.Duration) ([]time.Duration, []string, error) {
	times := make([][]time.Duration, len(fns))
	for i := 1; i <= n; i++ {
		for j, f := range fns {
			time.Sleep(think)
			d, err := f(i)
			if err != nil {
				return nil, nil, err
			}
			times[j] = append(times[j], d)
		}
	}
	med := make([]time.Duration, len(fns))
	rows := make([]string, len(fns))
	for j, ts := range times {
		slices.Sort(ts)
		q := func(f float64) time.Duration { return ts[int(f*float64(len(ts)-1))] }
		med[j] = q(0.5)
		rows[j] = fmt.Sprintf("%s | %s | %s", ms(q(0.5)), ms(q(0.1)), ms(q(0.9)))
	}
	return med, rows, nil
}

// startServe starts `sbx serve` and returns a function that sends it one
// Bash call and times the answer.
func startServe(sbx string) (call func(int, string) (time.Duration, error), stop func(), err error) {
	serve := exec.Command(sbx, "serve")
	in, err := serve.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	outPipe, err := serve.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := serve.Start(); err != nil {
		return nil, nil, err
	}
	out := bufio.NewReader(outPipe)
	call = func(id int, command string) (time.Duration, error) {
		line := fmt.Sprintf(`{"type":"tool_use","id":"b%d","name":"Bash","input":{"command":%q}}`+"\n", id, command)
		start := time.Now()
		if _, err := io.WriteString(in, line); err != nil {
			return 0, err
		}
		res, err := out.ReadString('\n')
		d := time.Since(start)
		if err != nil || strings.Contains(res, `"is_error":true`) {
			return 0, fmt.Errorf("serve call: %v %s", err, res)
		}
		return d, nil
	}
	return call, func() { in.Close(); serve.Wait() }, nil
}

// debugLine is one phase of `sbx run --debug`: "sbx: debug: T ms +D ms NAME".
var debugLine = regexp.MustCompile(`^sbx: debug: +([0-9.]+) ms +\+([0-9.]+) ms  (.+)$`)

// runPhaseBench runs `sbx run --debug -- true` n times and prints, per
// phase, the median time it took (from the phase before it) and the
// median time it ended at.
func runPhaseBench(sbx string, n int) error {
	type phase struct{ at, took []float64 }
	phases := map[string]*phase{}
	var total []float64
	for i := 0; i < n; i++ {
		cmd := exec.Command(sbx, "run", "--debug", "--", "true")
		cmd.Stdout = io.Discard
		b, err := cmd.StderrPipe()
		if err != nil {
			return err
		}
		start := time.Now()
		if err := cmd.Start(); err != nil {
			return err
		}
		lines, _ := io.ReadAll(b)
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("sbx run --debug: %v\n%s", err, lines)
		}
		total = append(total, float64(time.Since(start).Microseconds())/1000)
		for _, l := range strings.Split(string(lines), "\n") {
			m := debugLine.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			p := phases[m[3]]
			if p == nil {
				p = &phase{}
				phases[m[3]] = p
			}
			at, _ := strconv.ParseFloat(m[1], 64)
			took, _ := strconv.ParseFloat(m[2], 64)
			p.at, p.took = append(p.at, at), append(p.took, took)
		}
	}
	names := make([]string, 0, len(phases))
	for name := range phases {
		names = append(names, name)
	}
	median := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
	slices.SortFunc(names, func(a, b string) int {
		return int(1000 * (median(phases[a].at) - median(phases[b].at)))
	})
	fmt.Printf("\nWhere `sbx run -- true` spends its time (`sbx run --debug`, median of %d runs; the process's own start before the first phase is not stamped)\n\n", n)
	fmt.Println("| phase ended | took | at |")
	fmt.Println("|---|---|---|")
	for _, name := range names {
		fmt.Printf("| %s | %.2f ms | %.2f ms |\n", strings.ReplaceAll(name, "|", "/"), median(phases[name].took), median(phases[name].at))
	}
	fmt.Printf("| whole process, as the caller sees it | | %.2f ms |\n", median(total))
	return nil
}
