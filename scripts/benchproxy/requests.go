//go:build linux

package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// smallSize is the body of each small request.
const smallSize = 1 << 10

// smallHandler serves smallSize bytes with their length.
func smallHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Length", strconv.Itoa(smallSize))
	w.Write(make([]byte, smallSize))
}

// runClient is the request loop benchproxy runs as a command (directly or
// in a sandbox): count GETs of url, through the proxy named by proxyURL
// when set, on one keep-alive connection or on a new connection each
// (fresh). It prints the loop's wall time in milliseconds; a request that
// fails or returns the wrong body fails the run.
func runClient(rawURL, proxyURL string, count int, fresh bool) error {
	tr := &http.Transport{DisableKeepAlives: fresh, MaxIdleConnsPerHost: 1}
	if proxyURL != "" {
		// Set by hand: the environment's proxy is skipped for loopback.
		u, err := url.Parse(proxyURL)
		if err != nil {
			return err
		}
		tr.Proxy = http.ProxyURL(u)
	}
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	// One untimed request first, retried for 2 s: srt's relay (socat)
	// may still be starting when its command does.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := c.Get(rawURL)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return err
		}
	}
	start := time.Now()
	for i := 0; i < count; i++ {
		resp, err := c.Get(rawURL)
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || n != smallSize {
			return fmt.Errorf("request %d: status %d, %d bytes, %v", i, resp.StatusCode, n, err)
		}
	}
	fmt.Printf("%.3f\n", float64(time.Since(start).Microseconds())/1000)
	return nil
}

// requestRow is one way to run the client: its command line with
// placeholders %MODE% (small or fresh) and %PROXY% (the proxy flag).
type requestRow struct {
	name string
	argv func(mode string) []string
	skip string
	// foreign rows (srt) that fail are reported as failed, not fatal.
	foreign bool
}

// requestRows measures many small requests on one connection and many
// new connections, directly and through the proxies, n times each,
// interleaved, and prints the medians as a table.
func requestRows(rows []requestRow, n, small, fresh int) error {
	modes := []struct {
		name, flag string
		count      int
	}{
		{fmt.Sprintf("%d × 1 KiB GETs, one keep-alive connection", small), "small", small},
		{fmt.Sprintf("%d GETs of 1 KiB, a new connection each", fresh), "fresh", fresh},
	}
	times := make([][][]float64, len(modes))
	for m := range modes {
		times[m] = make([][]float64, len(rows))
	}
	failed := map[[2]int]string{} // a foreign row's failure, per mode
	for i := 0; i < n; i++ {
		for m, mode := range modes {
			for j := range rows {
				r := rows[j]
				if r.argv == nil || failed[[2]int{m, j}] != "" {
					continue
				}
				argv := r.argv(mode.flag + " -count " + strconv.Itoa(mode.count))
				cmd := exec.Command(argv[0], argv[1:]...)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil && r.foreign {
					// srt's proxy falling over is a result, not the
					// benchmark's failure: its row says so.
					failed[[2]int{m, j}] = fmt.Sprintf("run %d: %v %s", i+1, err, strings.TrimSpace(string(out)+stderr.String()))
					continue
				}
				if err != nil {
					return fmt.Errorf("%s, %s: %v: %s%s", r.name, mode.name, err, out, stderr.String())
				}
				v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
				if err != nil {
					return fmt.Errorf("%s, %s: no time in %q", r.name, mode.name, out)
				}
				times[m][j] = append(times[m][j], v)
			}
		}
	}
	med := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	fmt.Printf("\nRequests: a 1 KiB body from the same local server, %d runs per row, interleaved, the client's loop time (a Go client; sandbox start-up not included)\n\n", n)
	fmt.Println("| workload | path | median | per request | vs direct |")
	fmt.Println("|---|---|---|---|---|")
	for m, mode := range modes {
		direct := med(times[m][0])
		for j, r := range rows {
			if f := failed[[2]int{m, j}]; f != "" {
				fmt.Printf("| %s | %s | failed: %s | | |\n", mode.name, r.name, strings.ReplaceAll(f, "|", "/"))
				continue
			}
			if len(times[m][j]) == 0 {
				fmt.Printf("| %s | %s | skipped: %s | | |\n", mode.name, r.name, r.skip)
				continue
			}
			v := med(times[m][j])
			fmt.Printf("| %s | %s | %.0f ms | %.0f µs | %.2f× |\n", mode.name, r.name, v, 1000*v/float64(mode.count), v/direct)
		}
	}
	return nil
}

// clientFlags parses "small -count N" or "fresh -count N" as built above.
func clientArgv(self, mode, url, proxy string) string {
	s := fmt.Sprintf("%s -client %s -url %s", self, mode, url)
	if proxy != "" {
		s += " -proxy " + proxy
	}
	return s
}

// exitOn ends the program on err.
func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
