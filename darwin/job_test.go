package darwin

import "testing"

func TestPlanJob(t *testing.T) {
	tests := []struct {
		t    TermState
		want Job
	}{
		{TermState{StdinTerminal: true, OwnsTerminal: true}, Job{Foreground: true}},
		{TermState{StdinTerminal: true}, Job{Setpgid: true}},
		{TermState{}, Job{Setsid: true}},
		{TermState{OwnsTerminal: true}, Job{Setsid: true}},
	}
	for _, tt := range tests {
		got := PlanJob(tt.t)
		if got != tt.want {
			t.Errorf("PlanJob(%+v) = %+v, want %+v", tt.t, got, tt.want)
		}
		n := 0
		for _, b := range []bool{got.Foreground, got.Setpgid, got.Setsid} {
			if b {
				n++
			}
		}
		if n != 1 {
			t.Errorf("PlanJob(%+v) = %+v: not exactly one mode", tt.t, got)
		}
	}
}
