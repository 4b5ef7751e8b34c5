// Command benchreport combines the outputs of scripts/bench-startup,
// scripts/bench-proxy and the gate benchmark into bench/report.md, with an
// SVG chart of the ratios each measured against its baseline in the same
// run.
//
// Usage: go run ./scripts/benchreport -startup F -proxy F -gate F -out bench
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

type bar struct {
	label string
	value float64 // ratio, 1 = baseline
	note  string
}

func main() {
	startup := flag.String("startup", "", "output of scripts/bench-startup")
	proxy := flag.String("proxy", "", "output of scripts/bench-proxy")
	gate := flag.String("gate", "", "output of go test -bench BenchmarkDecide")
	out := flag.String("out", "bench", "output directory")
	flag.Parse()
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return string(b)
	}
	s, p, g := read(*startup), read(*proxy), read(*gate)
	var bars []bar
	num := func(re, text string) (float64, bool) {
		m := regexp.MustCompile(re).FindStringSubmatch(text)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(m[1], 64)
		return v, err == nil
	}
	if v, ok := num(`sbx / raw bwrap[^:]*: ([0-9.]+)×`, s); ok {
		bars = append(bars, bar{"start-up: sbx / raw bwrap", v, "lower is better; 1 = bwrap --ro-bind / / true"})
	}
	if v, ok := num(`sbx / bwrap with sbx's namespace set: ([0-9.]+)×`, s); ok {
		bars = append(bars, bar{"start-up: sbx / bwrap, same namespaces", v, ""})
	}
	if v, ok := num(`srt / sbx: ([0-9.]+)×`, s); ok {
		bars = append(bars, bar{"start-up: srt / sbx", v, "higher means sbx is faster"})
	}
	if v, ok := num(`sbx with limits / sbx: ([0-9.]+)×`, s); ok {
		bars = append(bars, bar{"start-up: with --max-procs/--max-memory/--max-cpu / without", v, ""})
	}
	if v, ok := num(`sbx with a disk budget / sbx: ([0-9.]+)×`, s); ok {
		bars = append(bars, bar{"start-up: with --max-disk / without", v, ""})
	}
	if v, ok := num(`warm serve call / raw bwrap: ([0-9.]+)×`, s); ok {
		bars = append(bars, bar{"tool call: warm sbx serve / raw bwrap", v, "lower is better"})
	}
	if v, ok := num("warm serve call of `cat /etc/hostname` / raw bwrap: ([0-9.]+)×", s); ok {
		bars = append(bars, bar{"tool call of a program: warm sbx serve / raw bwrap", v, "lower is better; cat /etc/hostname"})
	}
	if v, ok := num(`warm serve call / raw bwrap: [0-9.]+×; / raw bwrap running bash -c: ([0-9.]+)×`, s); ok {
		bars = append(bars, bar{"tool call: warm sbx serve / raw bwrap running bash -c true", v, "lower is better; what a Bash call runs"})
	}
	if v, ok := num(`cold .sbx tool. / warm serve call: ([0-9.]+)×`, s); ok {
		bars = append(bars, bar{"tool call: cold sbx tool / warm sbx serve", v, "higher means warm calls gain more"})
	}
	for _, row := range []string{"sbx HTTP proxy", "sbx CONNECT \\(HTTPS\\)", "sbx SOCKS5", "sbx TLS-terminated \\(HTTPS, injected token\\)", "srt HTTP proxy", "srt CONNECT \\(HTTPS\\)",
		"bare relay, HTTP \\(no sandbox, no checks: what any relay costs here\\)", "bare relay, HTTPS \\(no sandbox, no checks\\)"} {
		if v, ok := num(`\| `+row+` \| [0-9.]+ \| ([0-9.]+)% \|`, p); ok {
			bars = append(bars, bar{"throughput: " + strings.ReplaceAll(row, `\`, "") + " / direct", v / 100, ""})
		}
	}
	for _, row := range []struct{ re, label string }{
		{`GETs, one keep-alive connection \| sbx HTTP proxy \|[^|]*\|[^|]*\| ([0-9.]+)× \|`, "requests: small, one connection, sbx HTTP proxy / direct"},
		{`GETs, one keep-alive connection \| sbx SOCKS5 \|[^|]*\|[^|]*\| ([0-9.]+)× \|`, "requests: small, one connection, sbx SOCKS5 / direct"},
		{`a new connection each \| sbx HTTP proxy \|[^|]*\|[^|]*\| ([0-9.]+)× \|`, "requests: a connection each, sbx HTTP proxy / direct"},
		{`a new connection each \| srt HTTP proxy \|[^|]*\|[^|]*\| ([0-9.]+)× \|`, "requests: a connection each, srt HTTP proxy / direct"},
	} {
		if v, ok := num(row.re, p); ok {
			bars = append(bars, bar{row.label, v, "lower is better"})
		}
	}
	var gateLine string
	if m := regexp.MustCompile(`(BenchmarkDecide\S*\s+\d+\s+([0-9.]+) ns/op.*)`).FindStringSubmatch(g); m != nil {
		gateLine = m[1]
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	var md strings.Builder
	fmt.Fprintf(&md, "# sbx benchmark report\n\n%s, host %s, kernel %s, %s/%s, %d CPUs. Reproduce with `make bench`.\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), host, strings.TrimSpace(string(kernel)), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	fmt.Fprintf(&md, "Every figure is measured against its baseline in the same run.\n\n![ratios](ratios.svg)\n\n## Start-up\n\n%s\n## Proxy throughput and memory\n\n%s\n## Permission gate\n\n50 rules across levels, a 10-part compound command, no hooks (target ≤ 15 µs):\n\n    %s\n",
		strings.TrimSpace(s)+"\n", strings.TrimSpace(p)+"\n", gateLine)
	if err := os.WriteFile(filepath.Join(*out, "report.md"), []byte(md.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(filepath.Join(*out, "ratios.svg"), []byte(svg(bars)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// svg draws one horizontal bar per ratio on a log scale, with a line at 1.
func svg(bars []bar) string {
	const w, left, rowH = 860, 330, 30
	h := 60 + rowH*len(bars)
	maxV := 1.0
	for _, b := range bars {
		maxV = max(maxV, b.value)
	}
	minV := 0.05
	scale := func(v float64) float64 {
		v = max(v, minV)
		return (logf(v) - logf(minV)) / (logf(maxV*1.2) - logf(minV)) * float64(w-left-60)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="13">`, w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="22" font-size="15">sbx ratios against same-run baselines (log scale; line = 1×)</text>`)
	one := left + scale(1)
	for i, br := range bars {
		y := 40 + i*rowH
		fmt.Fprintf(&b, `<text x="10" y="%d">%s</text>`, y+16, esc(br.label))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="20" fill="#4a7bd0"/>`, left, y+2, scale(br.value))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.2f×</text>`, float64(left)+scale(br.value)+6, y+16, br.value)
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="32" x2="%.1f" y2="%d" stroke="#c33" stroke-dasharray="4 3"/></svg>`, one, one, h-10)
	return b.String()
}

func logf(v float64) float64 { return math.Log(v) }

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
