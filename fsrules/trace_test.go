package fsrules

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// traceFixture is a home and a workspace with what Compile looks at:
// credential files present and missing, a name pattern, a git repository,
// links, a denyWrite glob and a second writable root.
func traceFixture(t *testing.T) (root string, in Input, host Host) {
	root = t.TempDir()
	for _, d := range []string{"home/.ssh", "ws/.git/objects", "ws/.git/refs", "ws/sub", "other"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{
		"home/.ssh/id_rsa": "key", "ws/.git/HEAD": "ref: refs/heads/main\n",
		"ws/.git/config": "[core]\n\tbare = false\n", "ws/sub/a": "a",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("sub", filepath.Join(root, "ws/link")); err != nil {
		t.Fatal(err)
	}
	home, ws := filepath.Join(root, "home"), filepath.Join(root, "ws")
	rule := func(p string) Rule { return Rule{Pattern: p, BaseDir: ws, Origin: "test", Optional: true} }
	in = Input{
		Workspace:     ws,
		AllowWrite:    []Rule{rule(filepath.Join(root, "other"))},
		DenyWrite:     []Rule{rule("./locked/**"), rule("./link/deny")},
		DenyRead:      []Rule{rule(home + "/.netrc"), rule(home + "/.ssh"), rule(home + "/.aws/credentials"), rule("./secret*")},
		AllowRead:     []Rule{rule(home + "/.ssh/id_rsa.pub")},
		DenyReadNames: []NamePattern{{Dir: home, Name: ".env*", Origin: "test"}},
		Self:          []Rule{rule(home + "/.state")},
	}
	return root, in, Host{Home: home}
}

// traceMutations change the fixture in ways Compile sees and in ways it
// does not (a file's content or times where it reads neither).
var traceMutations = []struct {
	name, after string // after: the change that makes this one possible
	do          func(root string) error
}{
	{"netrc appears", "", func(r string) error { return os.WriteFile(r+"/home/.netrc", []byte("x"), 0o600) }},
	{"netrc goes", "netrc appears", func(r string) error { return os.Remove(r + "/home/.netrc") }},
	{"aws dir appears", "", func(r string) error { return os.MkdirAll(r+"/home/.aws", 0o700) }},
	{"aws credentials appear", "aws dir appears", func(r string) error { return os.WriteFile(r+"/home/.aws/credentials", nil, 0o600) }},
	{"aws goes", "aws dir appears", func(r string) error { return os.RemoveAll(r + "/home/.aws") }},
	{"aws a link", "", func(r string) error { return os.Symlink("../ws/sub", r+"/home/.aws") }},
	{"env file appears", "", func(r string) error { return os.WriteFile(r+"/home/.env.local", nil, 0o600) }},
	{"env file goes", "env file appears", func(r string) error { return os.Remove(r + "/home/.env.local") }},
	{"secret appears", "", func(r string) error { return os.WriteFile(r+"/ws/secret.txt", nil, 0o600) }},
	{"secret goes", "secret appears", func(r string) error { return os.Remove(r + "/ws/secret.txt") }},
	{"locked appears", "", func(r string) error { return os.MkdirAll(r+"/ws/locked/x", 0o755) }},
	{"locked goes", "locked appears", func(r string) error { return os.RemoveAll(r + "/ws/locked") }},
	{"link re-pointed", "", func(r string) error {
		os.Remove(r + "/ws/link")
		return os.Symlink("..", r+"/ws/link")
	}},
	{"link back", "link re-pointed", func(r string) error {
		os.Remove(r + "/ws/link")
		return os.Symlink("sub", r+"/ws/link")
	}},
	{"git config edited", "", func(r string) error {
		return os.WriteFile(r+"/ws/.git/config", []byte("[core]\n\tworktree = /\n"), 0o644)
	}},
	{"git config back", "git config edited", func(r string) error {
		return os.WriteFile(r+"/ws/.git/config", []byte("[core]\n\tbare = false\n"), 0o644)
	}},
	{"git HEAD goes", "", func(r string) error { return os.Remove(r + "/ws/.git/HEAD") }},
	{"git HEAD back", "git HEAD goes", func(r string) error { return os.WriteFile(r+"/ws/.git/HEAD", []byte("ref: refs/heads/main\n"), 0o644) }},
	{"nested repository", "", func(r string) error { return os.MkdirAll(r+"/ws/sub/.git/objects", 0o755) }},
	{"nested repository goes", "nested repository", func(r string) error { return os.RemoveAll(r + "/ws/sub/.git") }},
	{"home link to a protected file", "", func(r string) error { return os.Symlink(r+"/ws/sub/a", r+"/home/.bashrc") }},
	{"home link goes", "home link to a protected file", func(r string) error { return os.Remove(r + "/home/.bashrc") }},
	{"other removed", "", func(r string) error { return os.RemoveAll(r + "/other") }},
	{"other back", "other removed", func(r string) error { return os.MkdirAll(r+"/other", 0o755) }},
	{"ssh mode", "", func(r string) error { return os.Chmod(r+"/home/.ssh", 0o711) }},
	{"public key appears", "", func(r string) error { return os.WriteFile(r+"/home/.ssh/id_rsa.pub", nil, 0o644) }},
	{"a file's content", "", func(r string) error { return os.WriteFile(r+"/ws/sub/a", []byte(time.Now().String()), 0o644) }},
	{"a file's times", "", func(r string) error {
		return os.Chtimes(r+"/home/.ssh/id_rsa", time.Now(), time.Now().Add(-time.Hour))
	}},
}

// TestTraceSameMeansSamePolicy changes the host at random and checks that
// whenever the trace of the last compile answers Same, a compile now gives
// the policy compiled then; and that a compile through the trace gives the
// policy a plain one does.
func TestTraceSameMeansSamePolicy(t *testing.T) {
	root, in, host := traceFixture(t)
	rng := rand.New(rand.NewPCG(1, 2))
	compile := func(tr *Trace) *Policy {
		h := host
		if tr != nil {
			h = tr.Host(host)
		}
		p, err := Compile(in, h)
		if err != nil {
			return nil // the fixture's workspace may not compile (a core.worktree): compared as nil
		}
		return p
	}
	tr := NewTrace()
	last := compile(tr)
	var same, changed int
	for step := range 400 {
		m := traceMutations[rng.IntN(len(traceMutations))]
		_ = m.do(root) // some fail in the fixture's current state: as well
		now := compile(nil)
		if traced := compile(NewTrace()); !reflect.DeepEqual(now, traced) {
			t.Fatalf("step %d (%s): a compile through a trace differs from a plain one", step, m.name)
		}
		if tr.Same() {
			same++
			if !reflect.DeepEqual(now, last) {
				t.Fatalf("step %d (%s): the trace answers Same but the policy changed:\nthen %+v\nnow  %+v", step, m.name, last, now)
			}
			continue
		}
		changed++
		tr = NewTrace()
		last = compile(tr)
	}
	if same < 50 || changed < 50 {
		t.Errorf("the walk reused %d and compiled %d times: it must exercise both", same, changed)
	}
}

// TestTraceSeesEachChange: each change Compile sees makes Same false, and
// those it does not see (a content it does not read, times) keep it true.
func TestTraceSeesEachChange(t *testing.T) {
	// The workspace's HEAD and nested repositories are the merge's to
	// check, not the compile's.
	unseen := map[string]bool{"a file's content": true, "a file's times": true, "git HEAD goes": true,
		"git HEAD back": true, "nested repository": true, "nested repository goes": true}
	for _, m := range traceMutations {
		t.Run(m.name, func(t *testing.T) {
			root, in, host := traceFixture(t)
			for _, pre := range traceMutations {
				if pre.name == m.after {
					if err := pre.do(root); err != nil {
						t.Fatal(err)
					}
				}
			}
			tr := NewTrace()
			if _, err := Compile(in, tr.Host(host)); err != nil {
				t.Fatal(err)
			}
			if !tr.Same() {
				t.Fatal("nothing changed and the trace says it did")
			}
			if err := m.do(root); err != nil {
				t.Fatal(err)
			}
			if got := tr.Same(); got != unseen[m.name] {
				t.Errorf("Same() = %v after %q", got, m.name)
			}
		})
	}
}

// TestTraceUnstableAnswer: a question answered two ways during one compile
// (the host changing under it) is never Same.
func TestTraceUnstableAnswer(t *testing.T) {
	n := 0
	host := Host{Home: "/h", Lstat: func(p string) (fs.FileInfo, error) {
		n++
		if n%2 == 0 {
			return nil, fs.ErrNotExist
		}
		return os.Lstat("/")
	}}
	tr := NewTrace()
	h := tr.Host(host)
	h.Lstat("/x")
	h.Lstat("/x")
	if tr.Same() {
		t.Error("an answer that changed during the compile was taken as stable")
	}
	var none *Trace
	if none.Same() {
		t.Error("a nil trace is Same")
	}
}

func ExampleTrace() {
	tr := NewTrace()
	dir, _ := os.MkdirTemp("", "trace")
	defer os.RemoveAll(dir)
	in := Input{Workspace: dir, DenyRead: []Rule{{Pattern: dir + "/.netrc", Origin: "example", Optional: true}}}
	Compile(in, tr.Host(Host{Home: dir}))
	fmt.Println(tr.Same())
	os.WriteFile(dir+"/.netrc", nil, 0o600)
	fmt.Println(tr.Same())
	// Output:
	// true
	// false
}
