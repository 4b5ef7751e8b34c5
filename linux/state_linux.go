//go:build linux

package linux

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sbx-sandbox/sbx/fsrules"
)

// A run directory lives under StateDir/runs/<pid>-<starttime>. It holds what
// a later run needs to undo this one if sbx is killed: the placeholders it
// created on the host, the policy and the pre-run snapshot (so files created
// during the run can still be quarantined), and an empty file for denyRead
// binds.
const (
	recordFile   = "record.json"
	policyFile   = "policy.json"
	snapshotFile = "snapshot.json"
	emptyFile    = "empty"
)

// record is written before any placeholder is created.
type record struct {
	PID          int             `json:"pid"`
	Start        uint64          `json:"start"`
	Placeholders []fsrules.Entry `json:"placeholders"`
	// NetDir is the private directory of the proxy's socket.
	NetDir string `json:"netDir,omitempty"`
}

// procStart returns a process's start time in clock ticks since boot, which
// together with the pid identifies it.
func procStart(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: split after the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("bad /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, errors.New("short /proc stat")
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22 overall
}

func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// newRunDir creates this process's run directory.
func newRunDir(stateDir string) (string, *record, error) {
	pid := os.Getpid()
	start, err := procStart(pid)
	if err != nil {
		return "", nil, err
	}
	runs := filepath.Join(stateDir, "runs")
	if err := os.MkdirAll(runs, 0o700); err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp(runs, fmt.Sprintf("%d-%d-", pid, start))
	if err != nil {
		return "", nil, err
	}
	rec := &record{PID: pid, Start: start}
	if err := os.WriteFile(filepath.Join(dir, emptyFile), nil, 0o444); err != nil {
		return "", nil, err
	}
	return dir, rec, nil
}

// removePlaceholder removes a placeholder if it is still what sbx created:
// the same inode (an empty regular file) it recorded. Anything else is left
// alone.
func removePlaceholder(e fsrules.Entry) error {
	fi, err := os.Lstat(e.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	ours := fi.Mode().IsRegular() && fi.Size() == 0
	if e.ID != "" {
		ours = ours && fsrules.FileID(e.Path) == e.ID
	}
	if !ours {
		return fmt.Errorf("placeholder %s was replaced during the run; left in place", e.Path)
	}
	if err := os.Remove(e.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove placeholder %s: %w", e.Path, err)
	}
	return nil
}

// CleanReport says what [CleanStale] did.
type CleanReport struct {
	Runs         []string `json:"runs"`         // stale run directories removed
	Placeholders []string `json:"placeholders"` // placeholders removed from host paths
	Quarantined  []string `json:"quarantined"`  // protected files created by a killed run, moved
	Errors       []string `json:"errors,omitempty"`
}

// CleanStale undoes what runs of sbx that were killed left behind: their
// placeholders, the protected files they let appear (moved to quarantine),
// and their run directories. Runs whose process still lives are skipped.
func CleanStale(stateDir string) (*CleanReport, error) {
	rep := &CleanReport{}
	runs := filepath.Join(stateDir, "runs")
	ents, err := os.ReadDir(runs)
	if errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		dir := filepath.Join(runs, e.Name())
		var rec record
		rerr := readJSON(filepath.Join(dir, recordFile), &rec)
		if rerr == nil {
			if start, err := procStart(rec.PID); err == nil && start == rec.Start {
				continue // still running
			}
		} else if !staleEnough(dir) {
			continue // being set up right now
		}
		for _, p := range rec.Placeholders {
			if err := removePlaceholder(p); err != nil {
				rep.Errors = append(rep.Errors, err.Error())
			} else {
				rep.Placeholders = append(rep.Placeholders, p.Path)
			}
		}
		if rec.NetDir != "" && strings.HasPrefix(filepath.Base(rec.NetDir), "sbx-net-") {
			if err := os.RemoveAll(rec.NetDir); err != nil {
				rep.Errors = append(rep.Errors, err.Error())
			}
		}
		for _, err := range removeStaleCgroups("sbx-" + e.Name()) {
			rep.Errors = append(rep.Errors, err.Error())
		}
		moved, err := quarantineAfter(dir, filepath.Join(stateDir, "quarantine", e.Name()))
		rep.Quarantined = append(rep.Quarantined, moved...)
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
			continue // keep the run directory so the next clean tries again
		}
		if err := os.RemoveAll(dir); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
			continue
		}
		rep.Runs = append(rep.Runs, dir)
	}
	if len(rep.Errors) > 0 {
		return rep, fmt.Errorf("clean: %s", strings.Join(rep.Errors, "; "))
	}
	return rep, nil
}

// staleEnough reports whether a run directory without a record is older than
// its own setup could take, judged by the pid in its name.
func staleEnough(dir string) bool {
	name := filepath.Base(dir)
	parts := strings.SplitN(name, "-", 3)
	if len(parts) < 2 {
		return true
	}
	pid, err1 := strconv.Atoi(parts[0])
	start, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return true
	}
	cur, err := procStart(pid)
	return err != nil || cur != start
}

// quarantineAfter rescans the writable roots of the run in runDir and moves
// every protected file that appeared since its snapshot to qdir.
func quarantineAfter(runDir, qdir string) ([]string, error) {
	var pol fsrules.Policy
	var before fsrules.Snapshot
	if err := readJSON(filepath.Join(runDir, policyFile), &pol); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil // the run never got as far as starting the sandbox
		}
		return nil, err
	}
	if err := readJSON(filepath.Join(runDir, snapshotFile), &before); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	after, err := fsrules.Scan(&pol)
	if err != nil {
		return nil, err
	}
	created := fsrules.Created(&before, after)
	if len(created) == 0 {
		return nil, nil
	}
	return fsrules.Quarantine(qdir, created)
}
