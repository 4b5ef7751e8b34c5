package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// txCase is one workload of the transactional-writes benchmark: a shell
// command run in a workspace by sbx and, as the baseline in the same run,
// by bubblewrap with the workspace bound read-write (what sbx did before
// writes became transactions).
type txCase struct {
	name  string
	ws    string       // workspace
	cmd   string       // shell command, run in ws
	reset func() error // undone between runs, not timed (nil: nothing)
	sbx   []time.Duration
	bwrap []time.Duration
}

// runTxBench builds the workspaces under dir and measures each case n
// times, sbx and bubblewrap interleaved.
func runTxBench(sbx, dir string, n int) error {
	cases, err := txCases(dir)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		for _, c := range cases {
			for _, which := range []string{"sbx", "bwrap"} {
				if c.reset != nil {
					if err := c.reset(); err != nil {
						return fmt.Errorf("%s: reset: %w", c.name, err)
					}
				}
				d, err := timeTx(sbx, which, c)
				if err != nil {
					return err
				}
				if which == "sbx" {
					c.sbx = append(c.sbx, d)
				} else {
					c.bwrap = append(c.bwrap, d)
				}
			}
		}
	}
	fmt.Printf("\nTransactional writes, %d interleaved runs each: `sbx run -c CMD` against `bwrap --bind WS WS … sh -c CMD` (the workspace written directly)\n\n", n)
	fmt.Println("| workload | sbx median | bwrap bind median | ratio |")
	fmt.Println("|---|---|---|---|")
	for _, c := range cases {
		a, b := median(c.sbx), median(c.bwrap)
		fmt.Printf("| %s | %s | %s | %.2f× |\n", c.name, ms(a), ms(b), ratio(a, b))
	}
	empty, big := median(cases[0].sbx), median(cases[1].sbx)
	fmt.Printf("\nsbx start-up, 100,000-file workspace / empty workspace: %.2f×\n", ratio(big, empty))
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func timeTx(sbx, which string, c *txCase) (time.Duration, error) {
	var cmd *exec.Cmd
	if which == "sbx" {
		cmd = exec.Command(sbx, "run", "--mode", "bypassPermissions", "-c", c.cmd)
	} else {
		cmd = exec.Command("bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
			"--bind", c.ws, c.ws, "--chdir", c.ws, "--unshare-pid", "--die-with-parent", "sh", "-c", c.cmd)
	}
	cmd.Dir = c.ws
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s (%s): %v\n%s", c.name, which, err, out)
	}
	return d, nil
}

// txCases builds the workspaces: empty, 100,000 files, one of 200 MiB,
// and a git repository of 10,000 files.
func txCases(dir string) ([]*txCase, error) {
	mk := func(name string) (string, error) {
		p := filepath.Join(dir, name)
		return p, os.MkdirAll(p, 0o755)
	}
	empty, err := mk("empty")
	if err != nil {
		return nil, err
	}
	many, err := mk("many")
	if err != nil {
		return nil, err
	}
	if err := manyFiles(many, 1000, 100); err != nil {
		return nil, err
	}
	small, err := mk("small")
	if err != nil {
		return nil, err
	}
	big, err := mk("big")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(big, "big"), make([]byte, 200<<20), 0o644); err != nil {
		return nil, err
	}
	repo, err := mk("repo")
	if err != nil {
		return nil, err
	}
	if err := manyFiles(repo, 100, 100); err != nil {
		return nil, err
	}
	git := exec.Command("sh", "-c", "git init -q . && git add -A && git -c user.name=b -c user.email=b@b commit -qm base")
	git.Dir = repo
	if out, err := git.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("git: %v %s", err, out)
	}
	return []*txCase{
		{name: "start-up, empty workspace (`true`)", ws: empty, cmd: "true"},
		{name: "start-up, 100,000-file workspace (`true`)", ws: many, cmd: "true"},
		{name: "3,000 small files written", ws: small, cmd: `mkdir w && cd w && i=0; while [ $i -lt 3000 ]; do echo $i > f$i; i=$((i+1)); done`,
			reset: func() error { return os.RemoveAll(filepath.Join(small, "w")) }},
		{name: "a 200 MiB file appended to", ws: big, cmd: "echo x >> big"},
		{name: "`git commit` in a 10,000-file repository", ws: repo,
			cmd: "echo x >> d0/f0 && git -c user.name=b -c user.email=b@b commit -qam x"},
	}, nil
}

// manyFiles makes dirs directories of files small files each.
func manyFiles(root string, dirs, files int) error {
	for d := range dirs {
		dp := filepath.Join(root, "d"+strconv.Itoa(d))
		if err := os.MkdirAll(dp, 0o755); err != nil {
			return err
		}
		for f := range files {
			if err := os.WriteFile(filepath.Join(dp, "f"+strconv.Itoa(f)), []byte(strings.Repeat("x", 64)), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
