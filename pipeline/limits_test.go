package pipeline

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{"1", 1, false},
		{"4096", 4096, false},
		{"512K", 512 << 10, false},
		{"512k", 512 << 10, false},
		{"64M", 64 << 20, false},
		{"64MiB", 64 << 20, false},
		{"64MB", 64 << 20, false},
		{"1.5G", 3 << 29, false},
		{" 2g ", 2 << 30, false},
		{"1T", 1 << 40, false},
		{"", 0, true},
		{"M", 0, true},
		{"0", 0, true},
		{"-5M", 0, true},
		{"5X", 0, true},
		{"1..2M", 0, true},
		{"99999999999T", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1", "64M", "1.5GiB", "", "x", "1e9", "NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < 1 {
			t.Fatalf("ParseSize(%q) = %d with no error", s, n)
		}
	})
}

func TestResolveLimits(t *testing.T) {
	file := &settings.File{Path: "/ws/.claude/settings.json"}
	st := &settings.Settings{Limits: map[string]settings.String{
		"maxProcs":  {V: "100", Set: true, File: file},
		"maxMemory": {V: "1G", Set: true, File: file},
	}}
	got, err := ResolveLimits(st, LimitFlags{MaxProcs: "7", MaxCPU: "90s"}, DefaultToolLimits())
	if err != nil {
		t.Fatal(err)
	}
	want := RunLimits{Limits: Limits{MaxProcs: 7, MaxMemory: 1 << 30, MaxCPU: 90 * time.Second, MaxDisk: 1 << 30, BestEffort: true, Set: LimitProcs | LimitMemory},
		Timeout: DefaultBashTimeout, MaxOutput: MaxOutputChars}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// Defaults stay best effort; a limit the host might not enforce that
	// the user sets is strict, and only that one (--max-procs as a user
	// without a cgroup falls back to RLIMIT_NPROC and must not be refused
	// for the default memory limit beside it).
	all := LimitProcs | LimitMemory | LimitTmp | LimitDisk
	for _, tt := range []struct {
		fl     LimitFlags
		strict LimitKind
	}{
		{LimitFlags{}, 0},
		{LimitFlags{MaxOutput: "1M", Timeout: "5s", MaxCPU: "1s", MaxOpenFiles: "64"}, 0},
		{LimitFlags{MaxProcs: "64"}, LimitProcs},
		{LimitFlags{MaxMemory: "1G"}, LimitMemory},
		{LimitFlags{MaxTmp: "1G"}, LimitTmp},
		{LimitFlags{MaxDisk: "1G"}, LimitDisk},
		{LimitFlags{MaxDisk: "1G", MaxProcs: "9"}, LimitDisk | LimitProcs},
		{LimitFlags{MaxDisk: "none"}, 0},
	} {
		got, _ := ResolveLimits(nil, tt.fl, DefaultToolLimits())
		for k := LimitProcs; k&all != 0; k <<= 1 {
			if want := tt.strict&k == 0; got.Soft(k) != want {
				t.Errorf("%+v: Soft(%b) %v, want %v", tt.fl, k, got.Soft(k), want)
			}
		}
	}
	if got, _ := ResolveLimits(nil, LimitFlags{MaxProcs: "64"}, RunLimits{}); got.Soft(LimitProcs) || got.Soft(LimitMemory) {
		t.Error("without defaults (sbx run) no limit is best effort")
	}
	if got, err := ResolveLimits(nil, LimitFlags{MaxDisk: "none", MaxProcs: "NONE"}, DefaultToolLimits()); err != nil || got.MaxDisk != 0 || got.MaxProcs != 0 || got.MaxMemory != 2<<30 {
		t.Errorf("none should lift exactly the limits it is given: %+v %v", got, err)
	}
	if got, _ := ResolveLimits(st, LimitFlags{}, DefaultToolLimits()); got.Soft(LimitProcs) || got.Soft(LimitMemory) || !got.Soft(LimitDisk) {
		t.Error("sandbox.limits.maxProcs and maxMemory in settings should make those limits strict, and only those")
	}
	for _, tt := range []struct {
		st    *settings.Settings
		fl    LimitFlags
		where string
	}{
		{nil, LimitFlags{MaxMemory: "lots"}, "--max-memory"},
		{nil, LimitFlags{MaxProcs: "0"}, "--max-procs"},
		{nil, LimitFlags{Timeout: "-1s"}, "--timeout"},
		{nil, LimitFlags{Timeout: "none"}, "--timeout"},
		{nil, LimitFlags{MaxDisk: "0"}, "--max-disk"},
		{&settings.Settings{Limits: map[string]settings.String{"maxCpu": {V: "soon", Set: true, File: file}}}, LimitFlags{}, "/ws/.claude/settings.json: sandbox.limits.maxCpu"},
	} {
		_, err := ResolveLimits(tt.st, tt.fl, RunLimits{})
		var le *LimitError
		if !errors.As(err, &le) || !strings.HasPrefix(err.Error(), tt.where) {
			t.Errorf("%+v: error %v, want a LimitError naming %s", tt.fl, err, tt.where)
		}
	}
}
