//go:build linux && !sbxinner

package linux

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/pipeline"
)

// childFDs is sbx's side of the descriptor table in initspec.go: the
// child's ends, passed in table order, and the parent's. Every early
// return closes what was opened.
type childFDs struct {
	specR, infoW, readyW, holdR *os.File // the child's ends (3, 4, 8, 9)
	stdio                       []*os.File
	specW, infoR, readyR, holdW *os.File // sbx's ends
	// later are more child ends (stdio pipes, the helper's control
	// socket), closed once the helper has started.
	later      []*os.File
	waitCopies func()
}

// openChildFDs opens the pipes of the table; hold adds fd 9.
func openChildFDs(stdio pipeline.Stdio, hold bool) (f *childFDs, err error) {
	f = &childFDs{waitCopies: func() {}}
	defer func() {
		if err != nil {
			f.closeChildEnds()
			f.closeParentEnds()
		}
	}()
	if f.specR, f.specW, err = os.Pipe(); err != nil {
		return f, err
	}
	if f.infoR, f.infoW, err = os.Pipe(); err != nil {
		return f, err
	}
	if f.readyR, f.readyW, err = os.Pipe(); err != nil {
		return f, err
	}
	if hold {
		if f.holdR, f.holdW, err = os.Pipe(); err != nil {
			return f, err
		}
	}
	f.stdio, f.later, f.waitCopies, err = fileStdio(stdio)
	return f, err
}

// table is the child's descriptors from 3 on, in the order of the table.
func (f *childFDs) table() []*os.File {
	t := append([]*os.File{f.specR, f.infoW}, f.stdio...)
	t = append(t, f.readyW)
	if f.holdR != nil {
		t = append(t, f.holdR)
	}
	return t
}

// closeChildEnds closes sbx's copies of the child's ends (the child has
// its own once started).
func (f *childFDs) closeChildEnds() {
	for _, c := range append([]*os.File{f.specR, f.infoW, f.readyW, f.holdR}, f.later...) {
		if c != nil {
			c.Close()
		}
	}
	f.specR, f.infoW, f.readyW, f.holdR, f.later = nil, nil, nil, nil, nil
}

// closeParentEnds closes the parent's ends that no goroutine took over.
func (f *childFDs) closeParentEnds() {
	for _, c := range []*os.File{f.specW, f.infoR, f.readyR, f.holdW} {
		if c != nil {
			c.Close()
		}
	}
}

// sandboxPID is the sandbox's init, once bubblewrap has reported it,
// held by a pidfd: a signal never reaches a process that reused its pid
// after it exited (the helper merges for a while after). Signals wait
// until the init also said InitRunning: before, it has no handler for
// them, so PID 1 of a namespace drops them (or the runtime dies of them,
// and the run fails as a sandbox that could not be built). SIGKILL goes
// as soon as the pid is known.
type sandboxPID struct {
	mu      sync.Mutex
	pid     int  // the init's pid as the host sees it, once set
	fd      int  // -1 until set, and after close
	known   bool // set was called (the init may be gone already)
	running bool // the init said InitRunning: it takes signals
	closed  bool
	pending []os.Signal
}

func newSandboxPID() *sandboxPID { return &sandboxPID{fd: -1} }

func (p *sandboxPID) set(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.known, p.pid = true, pid
	if p.closed {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		p.pending = nil
		return // it is gone already
	}
	p.fd = fd
	p.flush()
}

// hostPID returns the init's pid as the host sees it while it is held
// (0 before bubblewrap reported it, and once it is gone or released).
func (p *sandboxPID) hostPID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd < 0 {
		return 0
	}
	return p.pid
}

// takesSignals records InitRunning.
func (p *sandboxPID) takesSignals() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running = true
	p.flush()
}

// flush sends the held signals the init can take now.
func (p *sandboxPID) flush() {
	if p.fd < 0 {
		return
	}
	held := p.pending[:0]
	for _, s := range p.pending {
		if p.running || s == syscall.SIGKILL {
			_ = unix.PidfdSendSignal(p.fd, s.(syscall.Signal), nil, 0)
		} else {
			held = append(held, s)
		}
	}
	p.pending = held
}

func (p *sandboxPID) signal(s os.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known && p.fd < 0 {
		return // gone, or closed
	}
	p.pending = append(p.pending, s)
	p.flush()
}

// close releases the pidfd.
func (p *sandboxPID) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
}

// watchInfo reads bubblewrap's info (fd 4) and records the init's host
// pid in target; the returned channel delivers it once, for the cgroup
// hand-off, and is closed.
func (r *run) watchInfo(infoR *os.File, helperPID int, target *sandboxPID) <-chan int {
	initPID := make(chan int, 1)
	go func() {
		defer infoR.Close()
		defer close(initPID)
		var info struct {
			ChildPID int `json:"child-pid"`
		}
		// The helper has a pid namespace of its own: bubblewrap reports
		// the pid the helper sees.
		if json.NewDecoder(infoR).Decode(&info) == nil && info.ChildPID > 0 {
			if pid, err := hostPIDBelow(helperPID, info.ChildPID); err == nil {
				target.set(pid)
				initPID <- pid
			}
		}
		io.Copy(io.Discard, infoR)
	}()
	return initPID
}

// initState is what the init said on fd 8.
type initState struct {
	ran, tmpFull bool
}

// watchReady reads the init's messages (fd 8) until EOF, and moves a held
// command into its cgroup when the init says it waits (fd 9); running is
// closed at InitRunning, or at the end of the messages.
func (r *run) watchReady(readyR, holdW *os.File, initPID <-chan int, target *sandboxPID) (<-chan initState, <-chan struct{}) {
	out := make(chan initState, 1)
	running := make(chan struct{})
	go func() {
		defer readyR.Close()
		var st initState
		defer func() {
			if !st.ran {
				close(running)
			}
		}()
		var b [1]byte
		for n := 0; n < 32; n++ {
			if k, _ := readyR.Read(b[:]); k != 1 {
				break
			}
			switch b[0] {
			case InitStamp:
				r.readStamp(readyR)
			case InitRunning:
				if !st.ran {
					close(running)
				}
				st.ran = true
				target.takesSignals()
			case InitForked:
				r.release(holdW, initPID)
				holdW = nil
			case TmpFullReport:
				st.tmpFull = true
			}
		}
		if holdW != nil {
			holdW.Close()
		}
		io.Copy(io.Discard, readyR)
		out <- st
	}()
	return out, running
}

// readStamp reads the rest of an InitStamp message into the run's trace.
func (r *run) readStamp(readyR io.Reader) {
	var m [9]byte
	if _, err := io.ReadFull(readyR, m[:]); err != nil || int(m[0]) >= len(initPhases) {
		return
	}
	r.stamps.Load().Add(pipeline.Stamp{Name: initPhases[m[0]], Time: int64(binary.LittleEndian.Uint64(m[1:]))})
}

// release moves the held command into the run's cgroups and lets it go;
// when it cannot, the command runs only if the limits were best-effort
// defaults (closing fd 9 without a byte stops it).
func (r *run) release(holdW *os.File, initPID <-chan int) {
	if holdW == nil {
		return
	}
	defer holdW.Close()
	err := r.joinCgroup(initPID)
	switch {
	case err == nil:
		holdW.Write([]byte{1})
	case errors.Is(err, syscall.ESRCH) || errors.Is(err, errCommandGone):
		// It died before its exec (a signal sbx passed on): nothing of
		// it ran, and the init reports how it ended.
	case r.spec.Limits.Soft(pipeline.LimitProcs | pipeline.LimitMemory):
		r.cgWarn = "default limits not enforced: the command could not join its cgroup: " + err.Error()
		holdW.Write([]byte{1})
	default:
		r.cgErr = err
	}
}

// errCommandGone is joinCgroup's error when the held command is no longer
// there to move: it died before its exec (it is no longer the init's
// child, or the init itself has exited), by a signal sbx passed on.
var errCommandGone = errors.New("the command ended before it joined its cgroup")

// joinCgroup moves the command (the init's only child, held before its
// exec) into the run's cgroups.
func (r *run) joinCgroup(initPID <-chan int) error {
	pid, ok := <-initPID
	if !ok {
		return errors.New("bubblewrap never reported the sandbox's pid")
	}
	kids, err := childrenOf(pid)
	if err == nil && len(kids) != 1 {
		// The init forks the command from a thread that then exits: the
		// per-thread children lists can miss it while it is handed to
		// another thread. Its parent, as a process, never changes.
		kids, err = childrenByStat(pid)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errCommandGone // the init is gone, and its namespace with it
	case err != nil:
		return err
	case len(kids) == 0:
		return errCommandGone
	}
	if len(kids) != 1 {
		return fmt.Errorf("the sandbox's init has %d children, want 1", len(kids))
	}
	return r.cg.add(kids[0])
}
