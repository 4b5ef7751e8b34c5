package pipeline

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// ParseSize reads a byte count: a plain number of bytes, or a number with
// a unit: K, M, G, T (powers of 1024, also written KiB, MiB …, or KB, MB …,
// which sbx reads as the same powers of 1024). Case does not matter.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (K, M, G, T)", s)
	}
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "b"), "i")
	var mult float64
	switch unit {
	case "":
		mult = 1
	case "k":
		mult = 1 << 10
	case "m":
		mult = 1 << 20
	case "g":
		mult = 1 << 30
	case "t":
		mult = 1 << 40
	default:
		return 0, fmt.Errorf("size %q: unknown unit (want K, M, G or T)", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	v := f * mult
	if v < 1 || v > math.MaxInt64/2 || math.IsNaN(v) {
		return 0, fmt.Errorf("size %q: out of range", s)
	}
	return int64(v), nil
}

// LimitFlags are resource limits given on the command line, as text; ""
// means not given.
type LimitFlags struct {
	MaxProcs, MaxMemory, MaxCPU, Timeout, MaxOutput, MaxTmp, MaxOpenFiles, MaxDisk string
}

// RunLimits is everything that bounds one run: the executor's Limits, the
// wall clock and the output kept.
type RunLimits struct {
	Limits
	Timeout   time.Duration
	MaxOutput int64
}

// LimitError is a limit that cannot be read; Source names the flag or the
// settings file and key.
type LimitError struct {
	Source string
	Value  string
	Err    error
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %q: %v", e.Source, e.Value, e.Err)
}

func (e *LimitError) Unwrap() error { return e.Err }

// ResolveLimits merges the limits: a flag wins over settings, settings over
// def (the defaults of the calling command).
func ResolveLimits(st *settings.Settings, fl LimitFlags, def RunLimits) (RunLimits, error) {
	out := def
	type field struct {
		key, flag, text string
		set             func(string) error
	}
	// "none" lifts one of the executor's limits (a default of sbx tool, or
	// one set in a lower settings level).
	none := func(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "none") }
	count := func(dst *int) func(string) error {
		return func(v string) error {
			if none(v) {
				*dst = 0
				return nil
			}
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 1 {
				return errors.New("want a whole number of at least 1, or none")
			}
			*dst = n
			return nil
		}
	}
	size := func(dst *int64, lift bool) func(string) error {
		return func(v string) error {
			if lift && none(v) {
				*dst = 0
				return nil
			}
			n, err := ParseSize(v)
			if err != nil {
				return err
			}
			*dst = n
			return nil
		}
	}
	dur := func(dst *time.Duration, lift bool) func(string) error {
		return func(v string) error {
			if lift && none(v) {
				*dst = 0
				return nil
			}
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil || d <= 0 {
				return errors.New("want a positive duration such as 90s or 5m")
			}
			*dst = d
			return nil
		}
	}
	fields := []field{
		{"maxProcs", "--max-procs", fl.MaxProcs, count(&out.MaxProcs)},
		{"maxMemory", "--max-memory", fl.MaxMemory, size(&out.MaxMemory, true)},
		{"maxCpu", "--max-cpu", fl.MaxCPU, dur(&out.MaxCPU, true)},
		{"timeout", "--timeout", fl.Timeout, dur(&out.Timeout, false)},
		{"maxOutput", "--max-output", fl.MaxOutput, size(&out.MaxOutput, false)},
		{"maxTmp", "--max-tmp", fl.MaxTmp, size(&out.MaxTmp, true)},
		{"maxOpenFiles", "--max-open-files", fl.MaxOpenFiles, count(&out.MaxOpenFiles)},
		{"maxDisk", "--max-disk", fl.MaxDisk, size(&out.MaxDisk, true)},
	}
	for _, f := range fields {
		src, v := "", ""
		switch {
		case f.text != "":
			src, v = f.flag, f.text
		case st != nil && st.Limits[f.key].Set:
			s := st.Limits[f.key]
			src, v = s.File.Path+": sandbox.limits."+f.key, s.V
		default:
			continue
		}
		if err := f.set(v); err != nil {
			return RunLimits{}, &LimitError{Source: src, Value: v, Err: err}
		}
		// The limits a host may be unable to enforce: one the user sets
		// is enforced or the run is refused; the defaults beside it stay
		// best effort.
		kinds := map[string]LimitKind{"maxProcs": LimitProcs, "maxMemory": LimitMemory, "maxTmp": LimitTmp, "maxDisk": LimitDisk}
		if k, ok := kinds[f.key]; ok && !none(v) {
			out.Set |= k
		}
	}
	return out, nil
}

// DefaultToolLimits are the limits of an agent's Bash call (sbx tool and
// sbx serve) unless flags or settings say otherwise. The disk budget holds
// the private /tmp too, so /tmp has no bound of its own. They are best effort:
// a host that cannot enforce one gets a warning in the result, not a
// refusal; a limit the user sets is never best effort.
func DefaultToolLimits() RunLimits {
	return RunLimits{
		Limits:    Limits{MaxProcs: 512, MaxMemory: 2 << 30, MaxDisk: 1 << 30, BestEffort: true},
		Timeout:   DefaultBashTimeout,
		MaxOutput: MaxOutputChars,
	}
}
