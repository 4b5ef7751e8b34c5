//go:build linux && !sbxinner

package linux

import (
	"context"
	"io"
	"os"
	"reflect"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// A warm sandbox is launched ahead of the call that uses it (Executor.Warm):
// its run directory, proxy, cgroups, transaction helper, overlays,
// bubblewrap and init all exist, and the init waits for its command. It is
// launched only once the call before has ended and its writes are merged,
// runs exactly one command, and is thrown away after it: nothing of one
// call (a file in /tmp, a process, a socket, an environment change) can
// reach the next.
type warm struct {
	// spec is the call the sandbox was launched after: the next call
	// takes it only if its policy (everything but the command, its
	// environment, directory and timeout) is the same.
	spec  *pipeline.Spec
	ready chan struct{} // closed once launched, or failed (err)
	err   error
	r     *run
	l     *launched
	// stdout and stderr are sbx's ends of the command's output pipes.
	stdout, stderr *os.File
	// ids are the host paths the sandbox is built on (writable roots,
	// bind sources) as they were at its launch.
	ids map[string]fileID
}

// hostIDs records the device and inode of every host path r's sandbox
// is built on: its writable roots (the overlays' lower layers) and the
// sources of its binds (a Unix socket, a masked file). The paths the
// binds hide are r.hidden.
func hostIDs(r *run) map[string]fileID {
	ids := map[string]fileID{}
	for _, w := range r.spec.FS.Writable {
		ids[w.Path] = statID(w.Path)
	}
	for _, op := range r.plan {
		if op.Src != "" {
			ids[op.Src] = statID(op.Src)
		}
	}
	// A Unix socket the settings allow is resolved at the launch: a link
	// to one the host re-points since (another daemon's) makes the
	// sandbox stale, as a fresh run would reach the new one only.
	for _, p := range r.spec.Platform.UnixSockets {
		ids[p] = statID(p)
	}
	return ids
}

// hiddenIDs records the identity of each host path the plan hides or
// masks (a denyRead file or directory, a credential file shown with
// placeholders): when the host replaces or moves one, a warm sandbox
// launched before is stale (not used), and a run during which it
// happened says so. A mask follows a path, not a file: the kernel
// detaches a mount whose mount point the host replaces, and on a
// writable root's overlay the old file or directory shows under the new
// name the host gives it (and the new one at the old name, once the old
// directory is looked up by its new name).
func hiddenIDs(plan []Op) map[string]hiddenID {
	ids := map[string]hiddenID{}
	for _, op := range plan {
		if (op.Kind == OpHide || op.Kind == OpROBind && op.Src != op.Dst) && op.Why != whyMountPoint {
			ids[op.Dst] = statHidden(op.Dst)
		}
	}
	return ids
}

// hiddenID is a file's identity across replacements: its device and
// inode, and its birth time (its change time where the file system keeps
// none): ext4 gives a replaced file its old inode number back after two
// editor-style saves.
type hiddenID struct {
	fileID
	born unix.StatxTimestamp
}

// statHidden is p's hiddenID (zero: it does not exist).
func statHidden(p string) hiddenID {
	var sx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, p, 0, unix.STATX_INO|unix.STATX_BTIME|unix.STATX_CTIME, &sx) != nil {
		return hiddenID{}
	}
	id := hiddenID{fileID: fileID{unix.Mkdev(sx.Dev_major, sx.Dev_minor), sx.Ino}, born: sx.Ctime}
	if sx.Mask&unix.STATX_BTIME != 0 {
		id.born = sx.Btime
	}
	return id
}

// unhidden warns of every hidden path the host replaced since the plan
// was built.
func (r *run) unhidden() []string {
	var out []string
	for p, id := range r.hidden {
		now := statHidden(p)
		switch {
		case now == id:
		case now == hiddenID{} && slices.Contains(r.readHidden, p):
			out = append(out, p+" was moved or removed on the host during the run: what was put at its path since stayed unreadable to the command (Landlock)")
		case slices.Contains(r.readHidden, p):
			out = append(out, p+" was replaced on the host during the run: the new one stayed unreadable to the command (Landlock), as did anything else put beside it since the start")
		default:
			out = append(out, p+" was replaced on the host during the run: the sandbox may have seen it unmasked (its new content, or the old one under the name the host gave it: a mask follows a path, not a file)")
		}
	}
	slices.Sort(out)
	return out
}

// movedHidden names a hidden path the host replaced since the plan was
// built ("" if none).
func (r *run) movedHidden() string {
	for p, id := range r.hidden {
		if statHidden(p) != id {
			return p
		}
	}
	return ""
}

// statID is p's identity (zero: it does not exist).
func statID(p string) fileID {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil {
		return fileID{}
	}
	return fileID{uint64(st.Dev), st.Ino}
}

// stale reports whether the host moved something the sandbox is built on
// since its launch: a workspace renamed or removed and made again, a
// socket whose server was restarted. The sandbox would still show the
// old one.
func (w *warm) stale() bool {
	for p, id := range w.ids {
		if statID(p) != id {
			return true
		}
	}
	return w.r != nil && len(w.r.unhidden()) > 0
}

// warmPool holds at most one warm sandbox.
type warmPool struct {
	mu     sync.Mutex
	next   *warm
	closed bool
	wg     sync.WaitGroup // launches, discards and clean-ups in flight
	// warnings are those of the clean-ups done in the background, for
	// the next result.
	warnings []string
	// tried are the killed runs (run directory names) a clean-up of this
	// executor found and could not finish (a workspace removed since):
	// they do not send every warm call to a cold start.
	tried map[string]bool
}

// noteTried records the killed runs left after a clean-up.
func (p *warmPool) noteTried(dead []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tried == nil {
		p.tried = map[string]bool{}
	}
	for _, d := range dead {
		p.tried[d] = true
	}
}

// untried reports whether a killed run is among dead that no clean-up of
// this executor has tried to finish.
func (p *warmPool) untried(dead []string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range dead {
		if !p.tried[d] {
			return true
		}
	}
	return false
}

// takeWarm returns the warm sandbox if the call can use it: same policy,
// no input, output into writers (a terminal or a file must stay what it
// is, so those calls start cold), and no run killed since its launch. A
// sandbox that does not fit is thrown away.
func (e *Executor) takeWarm(ctx context.Context, s *pipeline.Spec, stdio pipeline.Stdio) *warm {
	if !e.Warm || !warmable(stdio, s.OneStream) {
		return nil
	}
	e.pool.mu.Lock()
	w := e.pool.next
	e.pool.next = nil
	e.pool.mu.Unlock()
	if w == nil {
		return nil
	}
	select {
	case <-w.ready:
	case <-ctx.Done():
		e.discard(w)
		return nil
	}
	// A run killed since the launch leaves its merge to finish: the call
	// starts cold, which waits for it (or finishes it) and says so.
	if w.err != nil || !samePolicy(w.spec, s) || w.stale() || e.pool.untried(deadRuns(e.StateDir)) {
		e.discard(w)
		return nil
	}
	return w
}

// warmablePolicy reports whether a sandbox for s may be launched ahead: a
// writable root that is a single file is copied into the sandbox at the
// launch, so its content would be the launch's, not the call's.
func warmablePolicy(s *pipeline.Spec) bool {
	for _, w := range s.FS.Writable {
		if !w.Dir {
			return false
		}
	}
	return true
}

// warmable reports whether a call's streams suit a warm sandbox, whose
// stdin is /dev/null and whose stdout and stderr are two pipes, or one
// (oneStream) for a call that gives one writer for both.
func warmable(stdio pipeline.Stdio, oneStream bool) bool {
	_, outFile := stdio.Stdout.(*os.File)
	_, errFile := stdio.Stderr.(*os.File)
	return stdio.Stdin == nil && !outFile && !errFile && sameWriter(stdio.Stdout, stdio.Stderr) == oneStream
}

// samePolicy reports whether two calls need the same sandbox: their specs
// differ at most in the command, its environment and directory (which the
// init gets with the command) and the timeout (which sbx applies).
func samePolicy(a, b *pipeline.Spec) bool {
	x, y := *a, *b
	x.Argv, x.Env, x.Dir, x.Timeout = nil, nil, "", 0
	y.Argv, y.Env, y.Dir, y.Timeout = nil, nil, "", 0
	return reflect.DeepEqual(x, y)
}

// Prewarm launches a warm sandbox for a first Run with the policy of s,
// if Warm is set and none is waiting.
func (e *Executor) Prewarm(s *pipeline.Spec) { e.refill(s) }

// WaitWarm waits until the warm sandbox being launched, if any, is ready
// for a call or has failed to launch, or until ctx ends. It reports
// whether a warm sandbox is ready. A caller that must know what the next
// call's sandbox was built on (a test that then changes the host) waits
// here first.
func (e *Executor) WaitWarm(ctx context.Context) bool {
	e.pool.mu.Lock()
	w := e.pool.next
	e.pool.mu.Unlock()
	if w == nil {
		return false
	}
	select {
	case <-w.ready:
		return w.err == nil
	case <-ctx.Done():
		return false
	}
}

// refill launches the next warm sandbox in the background, after a call
// with spec s has ended.
func (e *Executor) refill(s *pipeline.Spec) {
	if !e.Warm || !warmablePolicy(s) {
		return
	}
	e.pool.mu.Lock()
	defer e.pool.mu.Unlock()
	if e.pool.closed || e.pool.next != nil {
		return
	}
	w := &warm{spec: s, ready: make(chan struct{})}
	e.pool.next = w
	e.pool.wg.Add(1)
	go func() {
		defer e.pool.wg.Done()
		w.launch(e)
		// The helper's fork left every page of sbx write-protected: make
		// them writable again before the next call writes them.
		rearmWrites()
	}()
}

// launch prepares the run and starts its helper with two output pipes.
func (w *warm) launch(e *Executor) {
	defer close(w.ready)
	r, err := e.newRun(context.Background(), w.spec, nil)
	if err != nil {
		w.err = err
		return
	}
	w.ids = hostIDs(r)
	var outW, errW *os.File
	if w.stdout, outW, err = os.Pipe(); err == nil {
		switch {
		case w.spec.OneStream:
			w.l, err = r.launch(pipeline.Stdio{Stdout: outW, Stderr: outW})
		default:
			if w.stderr, errW, err = os.Pipe(); err == nil {
				w.l, err = r.launch(pipeline.Stdio{Stdout: outW, Stderr: errW})
				errW.Close()
			}
		}
		outW.Close()
	}
	if err != nil {
		w.err = err
		w.closePipes()
		r.close()
		return
	}
	w.r = r
}

func (w *warm) closePipes() {
	for _, f := range []*os.File{w.stdout, w.stderr} {
		if f != nil {
			f.Close()
		}
	}
}

// call runs the command of s in the warm sandbox.
func (w *warm) call(ctx context.Context, s *pipeline.Spec, stdio pipeline.Stdio, tr *pipeline.Trace) (*pipeline.Result, error) {
	r := w.r
	defer r.closeLater()
	defer w.closePipes()
	r.trace = tr
	r.stamps.Store(tr)
	var wg sync.WaitGroup
	for _, c := range []struct {
		from *os.File
		to   io.Writer
	}{{w.stdout, stdio.Stdout}, {w.stderr, stdio.Stderr}} {
		if c.from == nil {
			continue // one stream: stdout's pipe carries both
		}
		to := c.to
		if to == nil {
			to = io.Discard
		}
		wg.Add(1)
		go func(from *os.File) {
			defer wg.Done()
			io.Copy(to, from)
		}(c.from)
	}
	w.l.fds.waitCopies = wg.Wait
	if err := r.complete(ctx, w.l, s); err != nil {
		return nil, err
	}
	return r.res, nil
}

// discard throws a warm sandbox away in the background: its init gets no
// command and exits, the helper merges nothing, the run is removed.
func (e *Executor) discard(w *warm) {
	e.pool.wg.Add(1)
	go func() {
		defer e.pool.wg.Done()
		<-w.ready
		if w.err != nil {
			return
		}
		for _, f := range []*os.File{w.stdout, w.stderr} {
			if f != nil {
				go io.Copy(io.Discard, f)
			}
		}
		_ = w.r.complete(context.Background(), w.l, nil)
		w.closePipes()
		w.r.close()
	}()
}

// later runs f, the end of a warm call's clean-up, in the background;
// the warnings it returns come with the next result.
// After Close, f runs before later returns.
func (e *Executor) later(f func() []string) {
	done := func() {
		if ws := f(); len(ws) > 0 {
			e.pool.mu.Lock()
			e.pool.warnings = append(e.pool.warnings, ws...)
			e.pool.mu.Unlock()
		}
	}
	e.pool.mu.Lock()
	closed := e.pool.closed
	if !closed {
		e.pool.wg.Add(1)
	}
	e.pool.mu.Unlock()
	if closed {
		done()
		return
	}
	go func() {
		defer e.pool.wg.Done()
		done()
	}()
}

// laterWarnings takes the warnings of the clean-ups done in the
// background so far.
func (e *Executor) laterWarnings() []string {
	e.pool.mu.Lock()
	defer e.pool.mu.Unlock()
	ws := e.pool.warnings
	e.pool.warnings = nil
	return ws
}

// Close throws away the warm sandbox, if any, and waits until every
// sandbox launched ahead is gone. Runs after Close start cold.
func (e *Executor) Close() error {
	e.pool.mu.Lock()
	e.pool.closed = true
	w := e.pool.next
	e.pool.next = nil
	e.pool.mu.Unlock()
	if w != nil {
		e.discard(w)
	}
	e.pool.wg.Wait()
	return nil
}
