package darwin

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// Violation is one operation Seatbelt denied to the sandboxed command, as
// the unified log reports it.
type Violation struct {
	Time      string `json:"time,omitempty"`
	Process   string `json:"process"`
	PID       int    `json:"pid"`
	Operation string `json:"operation"`
	// Target is what the operation was applied to (a path, an address),
	// as the log words it; empty when the log gives none.
	Target string `json:"target,omitempty"`
}

// NewTag returns a fresh per-run tag: every deny rule of the run's profile
// carries it as its message, so the run's denials can be told apart from
// every other sandbox's in the log.
func NewTag() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "sbx_" + hex.EncodeToString(b)
}

var tagRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// LogStreamArgs are the arguments of /usr/bin/log that stream the denials
// tagged tag, one JSON object per line.
func LogStreamArgs(tag string) []string {
	return []string{"stream", "--style", "ndjson", "--predicate", `eventMessage ENDSWITH "` + tag + `"`}
}

// IsLogBanner reports whether line is the banner `log stream` prints once
// it streams ("Filtering the log data using …"): on stdout or on stderr
// depending on the macOS version, and not with every --style.
func IsLogBanner(line []byte) bool {
	return strings.HasPrefix(strings.TrimSpace(string(line)), "Filtering the log data")
}

// sandboxMsgRE matches the kernel's denial message: "Sandbox: NAME(PID)
// deny(N) OPERATION TARGET…", the profile's message for the rule last.
var sandboxMsgRE = regexp.MustCompile(`^Sandbox: (.+)\((\d+)\) deny\(\d+\) (\S+)(?: (.*))?$`)

// ParseLogLine reads one line of `log stream --style ndjson` and returns
// the denial it reports, if the line is a Seatbelt denial carrying tag.
// The message format is the kernel's, documented nowhere: lines it does
// not recognise are skipped (collection is best effort).
func ParseLogLine(line []byte, tag string) (Violation, bool) {
	if !tagRE.MatchString(tag) {
		return Violation{}, false
	}
	var ev struct {
		Timestamp    string `json:"timestamp"`
		EventMessage string `json:"eventMessage"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return Violation{}, false
	}
	msg := strings.TrimSpace(ev.EventMessage)
	if !strings.HasSuffix(msg, tag) {
		return Violation{}, false
	}
	msg = strings.TrimSpace(strings.TrimSuffix(msg, tag))
	m := sandboxMsgRE.FindStringSubmatch(msg)
	if m == nil {
		return Violation{}, false
	}
	pid, err := strconv.Atoi(m[2])
	if err != nil {
		return Violation{}, false
	}
	return Violation{Time: ev.Timestamp, Process: m[1], PID: pid, Operation: m[3], Target: m[4]}, true
}
