//go:build linux

package prefault

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// residentShare returns, for each read-only mapping of this test's own
// executable, the share of its pages mapped in (smaps' Rss over Size).
func residentShare(t *testing.T) map[string]float64 {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	shares := map[string]float64{}
	var cur string
	var size float64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 6 && strings.Contains(f[0], "-"):
			cur = ""
			if f[5] == exe && (f[1] == "r-xp" || f[1] == "r--p") {
				cur = f[0] + " " + f[1]
			}
		case cur != "" && len(f) >= 2 && f[0] == "Size:":
			size, _ = strconv.ParseFloat(f[1], 64)
		case cur != "" && len(f) >= 2 && f[0] == "Rss:":
			rss, _ := strconv.ParseFloat(f[1], 64)
			shares[cur] = rss / size
		}
	}
	return shares
}

// The package's init left the executable's code and read-only data
// mapped in whole (a test binary touches a fraction of either).
func TestInitPopulatesTheExecutable(t *testing.T) {
	shares := residentShare(t)
	if len(shares) < 2 {
		t.Fatalf("the executable's code and read-only data not found in smaps: %v", shares)
	}
	for m, s := range shares {
		if s < 0.99 {
			t.Errorf("%s: %.0f%% of its pages mapped in", m, 100*s)
		}
	}
}

func TestParseMapsLine(t *testing.T) {
	tests := []struct {
		line string
		want mapping
		ok   bool
	}{
		{"00400000-009bd000 r-xp 00000000 fe:00 1234   /tmp/sbx", mapping{0x400000, 0x9bd000, "r-xp", "/tmp/sbx"}, true},
		{"7f00-7f10 r--p 0 00:00 0 /a dir/with spaces (deleted)", mapping{0x7f00, 0x7f10, "r--p", "/a dir/with spaces (deleted)"}, true},
		{"c000000000-c000400000 rw-p 00000000 00:00 0 ", mapping{}, false},
		{"c000000000-c000400000 rw-p 00000000 00:00 0", mapping{}, false},
		{"zz-10 r-xp 0 0:0 1 /x", mapping{}, false},
		{"20-10 r-xp 0 0:0 1 /x", mapping{}, false},
		{"", mapping{}, false},
	}
	for _, tt := range tests {
		got, ok := parseMapsLine([]byte(tt.line))
		if ok != tt.ok || got != tt.want {
			t.Errorf("%q: %+v %v, want %+v %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParseMapsLine(f *testing.F) {
	f.Add("00400000-009bd000 r-xp 00000000 fe:00 1234   /tmp/sbx")
	f.Add("7f00-7f10 r--p 0 00:00 0 /a b")
	f.Fuzz(func(t *testing.T, line string) {
		if m, ok := parseMapsLine([]byte(line)); ok && (m.hi <= m.lo || m.path == "") {
			t.Fatalf("%q: %+v", line, m)
		}
	})
}
