//go:build linux

// Command benchproxy measures download throughput through sbx's proxy
// against a direct download from the same local server, in one run:
// plain HTTP through the HTTP proxy, HTTPS through CONNECT, HTTP through
// SOCKS5, and optionally through Anthropic's srt; and through a bare relay
// (no sandbox, no checks: plain copies between two loopback sockets in its
// own process), the floor any proxy pays on this host. It also samples the peak
// RSS of the sbx process tree (sbx, bubblewrap and the in-sandbox init; not
// the command) idle and during 3 parallel downloads.
//
// Usage: go run ./scripts/benchproxy -sbx bin/sbx [-srt PATH -srt-settings FILE] [-n 5] [-mib 100]
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sbx-sandbox/sbx/creds"
	"github.com/sbx-sandbox/sbx/fsrules"
	"github.com/sbx-sandbox/sbx/integration"
	"github.com/sbx-sandbox/sbx/linux"
	"github.com/sbx-sandbox/sbx/netrules"
	"github.com/sbx-sandbox/sbx/pipeline"
)

type zeros struct{ n, size int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n >= z.size {
		return 0, io.EOF
	}
	if int64(len(p)) > z.size-z.n {
		p = p[:z.size-z.n]
	}
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

func main() {
	n := flag.Int("n", 5, "downloads per row (at least 5)")
	mib := flag.Int64("mib", 100, "download size in MiB")
	sbx := flag.String("sbx", "bin/sbx", "sbx binary")
	srt := flag.String("srt", "", "srt binary (empty: skip)")
	srtSettings := flag.String("srt-settings", "", "srt settings file")
	srtSkip := flag.String("srt-skip", "no srt given", "why srt is skipped")
	small := flag.Int("small", 1000, "small requests on one connection per run")
	fresh := flag.Int("connects", 10000, "requests on a new connection each per run")
	client := flag.String("client", "", "run as the request client: small or fresh")
	count := flag.Int("count", 0, "client: requests")
	rawURL := flag.String("url", "", "client: the URL")
	proxyURL := flag.String("proxy", "", "client: the proxy URL")
	relayTo := flag.String("relay", "", "run as a bare relay to this address")
	flag.Parse()
	if *relayTo != "" {
		exitOn(runRelay(*relayTo))
		return
	}
	if *client != "" {
		exitOn(runClient(*rawURL, *proxyURL, *count, *client == "fresh"))
		return
	}
	if *n < 5 {
		*n = 5
	}
	size := *mib << 20
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/k" {
			smallHandler(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		io.CopyBuffer(w, &zeros{size: size}, make([]byte, 256<<10))
	})
	plain := httptest.NewServer(h)
	defer plain.Close()
	tlsSrv := httptest.NewUnstartedServer(h)
	tlsSrv.TLS = &tls.Config{}
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	pp := plain.Listener.Addr().(*net.TCPAddr).Port
	tp := tlsSrv.Listener.Addr().(*net.TCPAddr).Port
	curl := func(extra, url string) string {
		return fmt.Sprintf("curl -sSk --noproxy '' %s -o /dev/null -w '%%{speed_download}\\n' %s", extra, url)
	}
	httpURL := fmt.Sprintf("http://127.0.0.1:%d/f", pp)
	httpsURL := fmt.Sprintf("https://127.0.0.1:%d/f", tp)
	plainRelay, stopPlain, err := startRelay(fmt.Sprintf("127.0.0.1:%d", pp))
	exitOn(err)
	defer stopPlain()
	tlsRelay, stopTLS, err := startRelay(fmt.Sprintf("127.0.0.1:%d", tp))
	exitOn(err)
	defer stopTLS()
	sbxRun := func(script string) []string {
		return []string{*sbx, "run", "--allow-domain", "127.0.0.1", "-c", script}
	}
	rows := []struct {
		name string
		argv []string
		skip string
	}{
		{"direct HTTP", []string{"sh", "-c", curl("", httpURL)}, ""},
		{"direct HTTPS", []string{"sh", "-c", curl("", httpsURL)}, ""},
		{"sbx HTTP proxy", sbxRun(curl("", httpURL)), ""},
		{"sbx CONNECT (HTTPS)", sbxRun(curl("", httpsURL)), ""},
		{"sbx SOCKS5", sbxRun(curl("-x socks5h://127.0.0.1:1080", httpURL)), ""},
		{"sbx TLS-terminated (HTTPS, injected token)", nil, ""},
		{"srt HTTP proxy", nil, *srtSkip},
		{"srt CONNECT (HTTPS)", nil, *srtSkip},
		{"bare relay, HTTP (no sandbox, no checks: what any relay costs here)", []string{"sh", "-c", curl("", "http://"+plainRelay+"/f")}, ""},
		{"bare relay, HTTPS (no sandbox, no checks)", []string{"sh", "-c", curl("", "https://"+tlsRelay+"/f")}, ""},
	}
	if *srt != "" {
		rows[6].argv, rows[6].skip = []string{*srt, "-s", *srtSettings, "-c", curl("", httpURL)}, ""
		rows[7].argv, rows[7].skip = []string{*srt, "-s", *srtSettings, "-c", curl("", httpsURL)}, ""
	}
	// TLS termination runs through the Go API: the proxy must trust the
	// local server's certificate, which the command line does not offer.
	mitm := mitmRunner(*sbx, tlsSrv, curl("-H \"Authorization: Bearer $BENCH_TOKEN\"", httpsURL))
	speeds := make([][]float64, len(rows))
	for i := 0; i < *n; i++ {
		for j, r := range rows {
			if strings.HasPrefix(r.name, "sbx TLS-terminated") {
				v, err := mitm()
				if err != nil {
					fmt.Fprintf(os.Stderr, "%s: %v\n", r.name, err)
					os.Exit(1)
				}
				speeds[j] = append(speeds[j], v/1e6)
				continue
			}
			if r.argv == nil {
				continue
			}
			out, err := exec.Command(r.argv[0], r.argv[1:]...).Output()
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v: %s\n", r.name, err, out)
				os.Exit(1)
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
			if err != nil || v == 0 {
				fmt.Fprintf(os.Stderr, "%s: no speed in %q\n", r.name, out)
				os.Exit(1)
			}
			speeds[j] = append(speeds[j], v/1e6)
		}
	}
	med := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	fmt.Printf("Throughput: %d MiB from a local Go server, %d downloads per row, interleaved, curl's speed (MB = 10^6 B)\n\n", *mib, *n)
	fmt.Println("| path | median MB/s | vs direct |")
	fmt.Println("|---|---|---|")
	direct := map[bool]float64{false: med(speeds[0]), true: med(speeds[1])}
	for j, r := range rows {
		if len(speeds[j]) == 0 {
			fmt.Printf("| %s | skipped: %s | |\n", r.name, r.skip)
			continue
		}
		m := med(speeds[j])
		tls := strings.Contains(r.name, "HTTPS")
		fmt.Printf("| %s | %.0f | %.0f%% |\n", r.name, m, 100*m/direct[tls])
	}

	self, err := os.Executable()
	exitOn(err)
	smallURL := fmt.Sprintf("http://127.0.0.1:%d/k", pp)
	bare := func(proxy string) func(string) []string {
		return func(mode string) []string { return []string{"sh", "-c", clientArgv(self, mode, smallURL, proxy)} }
	}
	inSbx := func(proxy string) func(string) []string {
		return func(mode string) []string { return sbxRun(clientArgv(self, mode, smallURL, proxy)) }
	}
	reqRows := []requestRow{
		{"direct", bare(""), "", false},
		{"bare relay (no sandbox, no checks)", func(mode string) []string {
			return []string{"sh", "-c", clientArgv(self, mode, "http://"+plainRelay+"/k", "")}
		}, "", false},
		{"sbx HTTP proxy", inSbx(`"$HTTP_PROXY"`), "", false},
		{"sbx SOCKS5", inSbx(`"$ALL_PROXY"`), "", false},
		{"srt HTTP proxy", nil, *srtSkip, true},
	}
	if *srt != "" {
		reqRows[4].argv = func(mode string) []string {
			return []string{*srt, "-s", *srtSettings, "-c", clientArgv(self, mode, smallURL, `"$HTTP_PROXY"`)}
		}
	}
	exitOn(requestRows(reqRows, *n, *small, *fresh))

	name := filepath.Base(*sbx)
	idle := peakMemory(sbxRun("sleep 2"), name)
	loaded := peakMemory(sbxRun(fmt.Sprintf("(%s) & (%s) & (%s) & wait", curl("", httpURL), curl("", httpsURL), curl("-x socks5h://127.0.0.1:1080", httpURL))), name)
	fmt.Printf("\nTLS-terminated / plain CONNECT: %.0f%%\n", 100*med(speeds[5])/med(speeds[3]))
	fmt.Printf("\nPeak memory of the sbx process tree (sbx, its helper, bwrap, init; not the command), PSS (the binary's shared pages counted once): idle %.1f MiB, 3 parallel downloads %.1f MiB; RSS summed per process: idle %.1f MiB, loaded %.1f MiB\n",
		idle.pss, loaded.pss, idle.rss, loaded.rss)
}

// memory is the peak of the summed proportional set size (PSS: a page
// shared by n processes counts 1/n, so the one binary's pages count once)
// and of the summed RSS (each process's shared pages counted again) of the
// processes in a tree named like sbx's binary (sbx) or bwrap, in MiB.
type memory struct{ pss, rss float64 }

// peakMemory runs argv and samples the tree's memory every 10 ms.
func peakMemory(argv []string, sbxName string) memory {
	sbxName = sbxName[:min(len(sbxName), 15)] // the kernel keeps 15 bytes
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	var peak memory
	for {
		select {
		case <-done:
			return peak
		case <-time.After(10 * time.Millisecond):
		}
		var sum memory
		for _, pid := range append([]int{cmd.Process.Pid}, integration.Descendants(cmd.Process.Pid)...) {
			dir := filepath.Join("/proc", strconv.Itoa(pid))
			comm, err := os.ReadFile(filepath.Join(dir, "comm"))
			if name := strings.TrimSpace(string(comm)); err != nil || name != sbxName && name != "bwrap" {
				continue
			}
			rollup, err := os.ReadFile(filepath.Join(dir, "smaps_rollup"))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(rollup), "\n") {
				f := strings.Fields(line)
				if len(f) < 2 {
					continue
				}
				kib, _ := strconv.ParseFloat(f[1], 64)
				switch f[0] {
				case "Pss:":
					sum.pss += kib / 1024
				case "Rss:":
					sum.rss += kib / 1024
				}
			}
		}
		peak = memory{max(peak.pss, sum.pss), max(peak.rss, sum.rss)}
	}
}

// mitmRunner returns a function that downloads through sbx with a masked
// token bound to 127.0.0.1, so that TLS is terminated and the token
// injected, and reports curl's speed.
func mitmRunner(sbx string, srv *httptest.Server, script string) func() (float64, error) {
	return func() (float64, error) {
		ws, err := os.MkdirTemp("", "sbx-bench-ws-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(ws)
		home, err := os.MkdirTemp("", "sbx-bench-home-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(home)
		pol, err := fsrules.Compile(fsrules.Input{Workspace: ws}, fsrules.Host{Home: home})
		if err != nil {
			return 0, err
		}
		rules, err := netrules.Compile([]netrules.Entry{{Pattern: "127.0.0.1", Origin: "bench"}}, nil)
		if err != nil {
			return 0, err
		}
		masked, err := creds.MaskEnv([]string{"BENCH_TOKEN=bench-secret-value-123", "PATH=/usr/bin:/bin"},
			creds.Config{Vars: map[string]creds.VarConfig{"BENCH_TOKEN": {Hosts: []string{"127.0.0.1"}}}})
		if err != nil {
			return 0, err
		}
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		ex := &linux.Executor{Exe: sbx, StateDir: filepath.Join(ws, ".state"), UpstreamRoots: roots}
		var out, errOut bytes.Buffer
		res, err := ex.Run(context.Background(), &pipeline.Spec{Argv: []string{"/bin/sh", "-c", script}, Env: masked.Env, Dir: ws, FS: pol,
			Net: &pipeline.NetPolicy{Rules: rules, Strict: true}, Secrets: masked.Secrets}, pipeline.Stdio{Stdout: &out, Stderr: &errOut})
		if err != nil {
			return 0, err
		}
		if res.ExitCode != 0 {
			return 0, fmt.Errorf("exit %d: %s", res.ExitCode, errOut.String())
		}
		return strconv.ParseFloat(strings.TrimSpace(out.String()), 64)
	}
}
