package darwin

import (
	"strconv"
	"strings"
)

// Stragglers reads the output of `ps -axwwE -o pid=,command=` (each line a
// pid, then the command line with the environment appended) and returns
// the processes other than self that carry marker as one of those words:
// the run's TMPDIR=… assignment, which every process the command started
// inherits unless it rewrote its environment. macOS has no pid namespace,
// and a process that left the command's process group (setsid) would
// otherwise outlive the run.
func Stragglers(ps []byte, marker string, self int) []int {
	if marker == "" {
		return nil
	}
	var out []int
	for _, line := range strings.Split(string(ps), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		for _, w := range f[1:] {
			if w == marker {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}
