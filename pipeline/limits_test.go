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
	want := RunLimits{Limits: Limits{MaxProcs: 7, MaxMemory: 1 << 30, MaxCPU: 90 * time.Second, MaxDisk: 1 << 30},
		Timeout: DefaultBashTimeout, MaxOutput: MaxOutputChars}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// Defaults stay best effort unless the user sets a limit the host
	// might not enforce.
	for _, tt := range []struct {
		fl   LimitFlags
		want bool
	}{
		{LimitFlags{}, true},
		{LimitFlags{MaxOutput: "1M", Timeout: "5s", MaxCPU: "1s", MaxOpenFiles: "64"}, true},
		{LimitFlags{MaxProcs: "64"}, false},
		{LimitFlags{MaxMemory: "1G"}, false},
		{LimitFlags{MaxTmp: "1G"}, false},
		{LimitFlags{MaxDisk: "1G"}, false},
		{LimitFlags{MaxDisk: "none"}, true},
	} {
		if got, _ := ResolveLimits(nil, tt.fl, DefaultToolLimits()); got.BestEffort != tt.want {
			t.Errorf("%+v: BestEffort %v, want %v", tt.fl, got.BestEffort, tt.want)
		}
	}
	if got, err := ResolveLimits(nil, LimitFlags{MaxDisk: "none", MaxProcs: "NONE"}, DefaultToolLimits()); err != nil || got.MaxDisk != 0 || got.MaxProcs != 0 || got.MaxMemory != 2<<30 {
		t.Errorf("none should lift exactly the limits it is given: %+v %v", got, err)
	}
	if got, _ := ResolveLimits(st, LimitFlags{}, DefaultToolLimits()); got.BestEffort {
		t.Error("sandbox.limits.maxProcs in settings should make the limits strict")
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
