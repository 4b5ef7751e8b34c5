package linux

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sbx-sandbox/sbx/fsrules"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", name, diff)
	}
}

// renderArgs puts one bwrap option per line, for readable golden files.
func renderArgs(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if strings.HasPrefix(a, "--") && i > 0 {
			b.WriteByte('\n')
		} else if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a)
	}
	return b.String() + "\n"
}

func TestBwrapArgsGolden(t *testing.T) {
	p := func(path string, dir bool) fsrules.Path {
		return fsrules.Path{Path: path, Exists: true, Dir: dir, Origin: "test"}
	}
	tests := []struct {
		name string
		in   PlanInput
	}{
		{"default", PlanInput{
			Policy:    &fsrules.Policy{Workspace: "/w", Writable: []fsrules.Path{p("/w", true)}},
			EmptyFile: "/state/run/empty",
			Exe:       "/usr/bin/sbx",
			StateDir:  "/state",
		}},
		{"every-key", PlanInput{
			Policy: &fsrules.Policy{
				Workspace: "/home/u/w",
				Writable:  []fsrules.Path{p("/home/u/w", true), p("/home/u/.cache/go", true), p("/tmp", true)},
				DenyWrite: []fsrules.Path{p("/home/u/w/vendor", true), {Path: "/home/u/w/new", Origin: "test"}},
				DenyRead:  []fsrules.Path{p("/home/u", true), p("/home/u/w/.env", false)},
				AllowRead: []fsrules.Path{p("/home/u/.gitconfig", false), p("/home/u/docs", true)},
			},
			EmptyFile: "/state/run/empty",
			Exe:       "/home/u/bin/sbx",
			TmpSize:   256 << 20,
			StateDir:  "/home/u/.local/state/sbx",
		}},
		{"disk-budget", PlanInput{
			Policy:      &fsrules.Policy{Workspace: "/w", Writable: []fsrules.Path{p("/w", true)}},
			EmptyFile:   "/state/run/empty",
			Exe:         "/usr/bin/sbx",
			BudgetStage: "/state/runs/r/disk",
			StateDir:    "/state",
		}},
		{"tmp-workspace", PlanInput{
			Policy:    &fsrules.Policy{Workspace: "/tmp/a/b/w", Writable: []fsrules.Path{p("/tmp/a/b/w", true), p("/tmp/a/c", true), p("/tmp/d", true)}},
			EmptyFile: "/state/run/empty",
			Exe:       "/usr/bin/sbx",
			StateDir:  "/state",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := BwrapArgs(BuildPlan(tt.in), BwrapOptions{InfoFD: 4}, []string{tt.in.Exe, InitArg})
			golden(t, "bwrap-"+tt.name+".golden", renderArgs(args))
		})
	}
}

func TestPlanOrderDenyAfterAllow(t *testing.T) {
	plan := BuildPlan(PlanInput{
		Policy: &fsrules.Policy{
			Writable:  []fsrules.Path{{Path: "/w", Dir: true, Exists: true}},
			DenyWrite: []fsrules.Path{{Path: "/w", Dir: true, Exists: true}},
		},
	})
	var kinds []OpKind
	for _, op := range plan {
		if op.Dst == "/w" {
			kinds = append(kinds, op.Kind)
		}
	}
	if len(kinds) != 2 || kinds[0] != OpBind || kinds[1] != OpROBind {
		t.Errorf("ops on /w = %v, want bind then ro-bind", kinds)
	}
}

func TestPlanHiddenTreeGetsMountPointsThenReadOnly(t *testing.T) {
	plan := BuildPlan(PlanInput{
		Policy: &fsrules.Policy{
			Writable:  []fsrules.Path{{Path: "/h/w", Dir: true, Exists: true}},
			DenyRead:  []fsrules.Path{{Path: "/h", Dir: true, Exists: true}},
			AllowRead: []fsrules.Path{{Path: "/h/f", Exists: true}},
		},
		EmptyFile: "/e",
	})
	var seq []string
	for _, op := range plan {
		if strings.HasPrefix(op.Dst, "/h") {
			seq = append(seq, []string{"tmpfs", "bind", "robind", "hide", "dir", "remount-ro"}[op.Kind]+" "+op.Dst)
		}
	}
	want := []string{"hide /h", "dir /h/w", "robind /h/f", "remount-ro /h", "bind /h/w", "robind /h/f"}
	if diff := cmp.Diff(want, seq); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// A bind whose source is another path (the disk budget's /tmp) does not
// show the host's file below it: read-only binds there stay bubblewrap's.
func TestSplitPlanOnlyBelowSameView(t *testing.T) {
	plan := []Op{
		{Kind: OpBind, Src: "/state/disk/tmp", Dst: "/tmp"},
		{Kind: OpROBind, Src: "/tmp/x", Dst: "/tmp/x"},
		{Kind: OpBind, Src: "/w", Dst: "/w"},
		{Kind: OpROBind, Src: "/w/.bashrc", Dst: "/w/.bashrc"},
	}
	bw, initRO := SplitPlan(plan)
	if diff := cmp.Diff([]string{"/w/.bashrc"}, initRO); diff != "" {
		t.Errorf("init binds (-want +got):\n%s", diff)
	}
	if len(bw) != 3 {
		t.Errorf("bubblewrap ops %v, want the other three", bw)
	}
}

// Only a mask whose mount point lies on a host file system the sandbox
// sees directly can be detached by the host; Landlock keeps those that
// lie outside the writable paths unreadable, and reads the masks' files
// and what is bound inside a hidden directory.
func TestReadHiding(t *testing.T) {
	p := func(path string, dir bool) fsrules.Path {
		return fsrules.Path{Path: path, Exists: true, Dir: dir, Origin: "test"}
	}
	plan := BuildPlan(PlanInput{
		Policy: &fsrules.Policy{
			Workspace: "/tmp/a/w",
			Writable:  []fsrules.Path{p("/tmp/a/w", true), p("/h/proj", true), p("/h/.config/app", true)},
			Caches:    []fsrules.Path{p("/h/.cache/go", true)},
			DenyRead: []fsrules.Path{p("/h/.npmrc", false), p("/h/.ssh", true), p("/h/proj/.env", false),
				p("/h/proj/keys", true), p("/tmp/a/secret", false), p("/h/.cache/go/token", false),
				p("/h/.config", true), p("/proc/kcore", false)},
			AllowRead: []fsrules.Path{p("/h/.config/gh", true), p("/h/.config/git/config", false)},
		},
		Masked:    map[string]string{"/h/.npmrc": "/state/run/masked-0"},
		EmptyFile: "/state/run/empty",
		Exe:       "/h/.config/sbx/sbx",
		StateDir:  "/h/.local/state/sbx",
	})
	roots := []string{"/tmp/a/w", "/h/proj", "/h/.config/app"}
	wantMasks := []string{"/h/.config", "/h/.local/state/sbx", "/h/.npmrc", "/h/.ssh", "/h/.cache/go/token", "/tmp/a/secret"}
	if diff := cmp.Diff(wantMasks, Masks(plan, roots), sortStrings); diff != "" {
		t.Errorf("Masks (-want +got):\n%s", diff)
	}
	writable := append([]string{"/dev", "/tmp", "/h/.cache/go"}, roots...)
	missing := []string{"/h/.docker/config.json", "/h/.ssh/id_rsa", "/h/proj/.env.local", "/h/.cache/go/cred", "/proc/x"}
	hidden, files, readable := ReadHiding(plan, roots, writable, missing)
	want := []string{"/h/.config", "/h/.local/state/sbx", "/h/.npmrc", "/h/.ssh", "/h/.docker/config.json"}
	if diff := cmp.Diff(want, hidden, sortStrings); diff != "" {
		t.Errorf("hidden (-want +got):\n%s", diff)
	}
	if len(files) != 1 || files[0].Src != "/state/run/masked-0" || files[0].Dst != "/h/.npmrc" {
		t.Errorf("mask files = %+v, want the masked /h/.npmrc", files)
	}
	want = []string{"/h/.config/app", "/h/.config/gh", "/h/.config/git/config", "/h/.config/sbx/sbx"}
	if diff := cmp.Diff(want, readable, sortStrings); diff != "" {
		t.Errorf("readable (-want +got):\n%s", diff)
	}
}

var sortStrings = cmpopts.SortSlices(func(a, b string) bool { return a < b })
