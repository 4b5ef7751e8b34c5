package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Descendants lists the processes below pid (not pid itself), from /proc.
func Descendants(root int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 {
				ppid, _ := strconv.Atoi(f[1])
				children[ppid] = append(children[ppid], pid)
			}
		}
	}
	var out []int
	for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// PidsWith lists the host processes whose command line contains marker
// (from /proc, or from ps(1) where there is no /proc).
func PidsWith(marker string) []int {
	if runtime.GOOS != "linux" {
		return pidsWithPS(marker)
	}
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); bytes.Contains(b, []byte(marker)) {
			out = append(out, pid)
		}
	}
	return out
}

// SbxPids lists the processes of sbx built at bin: bin's own, the
// transaction helpers (argv[0] is bin), and the in-sandbox inits and
// limits stubs, which run from sbx-inner's memfd (argv[1] names them).
func SbxPids(bin string) []int {
	pids := PidsWith(bin)
	for _, arg := range []string{"\x00__sbx_init\x00", "\x00__sbx_rlimit\x00"} {
		for _, p := range PidsWith(arg) {
			if !slices.Contains(pids, p) {
				pids = append(pids, p)
			}
		}
	}
	return pids
}

// PeakWatcher samples a count every 20 ms and keeps the highest value.
type PeakWatcher struct {
	mu   sync.Mutex
	peak int
	quit chan struct{}
	done chan struct{}
}

// WatchPeak starts sampling; the peak is -1 until a sample is taken.
func WatchPeak(sample func() int) *PeakWatcher {
	w := &PeakWatcher{peak: -1, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			n := sample()
			w.mu.Lock()
			w.peak = max(w.peak, n)
			w.mu.Unlock()
		}
	}()
	return w
}

// Peak is the highest count seen so far.
func (w *PeakWatcher) Peak() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

// Stop ends the sampling and returns the peak.
func (w *PeakWatcher) Stop() int {
	close(w.quit)
	<-w.done
	return w.Peak()
}

func pidsWithPS(marker string) []int {
	b, err := exec.Command("ps", "-axww", "-o", "pid=,command=").Output()
	if err != nil {
		return nil
	}
	var out []int
	for _, line := range strings.Split(string(b), "\n") {
		pidText, cmd, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !strings.Contains(cmd, marker) {
			continue
		}
		if pid, err := strconv.Atoi(pidText); err == nil && pid != os.Getpid() {
			out = append(out, pid)
		}
	}
	return out
}
