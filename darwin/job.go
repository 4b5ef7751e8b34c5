package darwin

// Job is how a command's processes stand towards the terminal, decided by
// [PlanJob]; run_darwin.go turns it into the process attributes.
type Job struct {
	// Foreground: the command gets its own process group, and that group
	// becomes the terminal's foreground group while it runs (sbx takes the
	// terminal back after), so pagers, REPLs and prompts can read and
	// change the terminal without being stopped by SIGTTIN or SIGTTOU.
	Foreground bool
	// Setpgid: its own process group, left in the background.
	Setpgid bool
	// Setsid: a new session with no controlling terminal: nothing in the
	// sandbox can open /dev/tty or be stopped by job control.
	Setsid bool
}

// TermState is what sbx knows of its standard input when a run starts.
type TermState struct {
	// StdinTerminal is set when standard input is a terminal.
	StdinTerminal bool
	// OwnsTerminal is set when sbx's process group is that terminal's
	// foreground group (sbx is not itself a background job).
	OwnsTerminal bool
}

// PlanJob decides the command's job control. A terminal on standard input
// that sbx holds in the foreground is handed to the command; a terminal
// sbx does not hold (sbx runs in the background) is left alone, and the
// command stops when it reads it, as any background job does; without a
// terminal the command runs in a new session.
func PlanJob(t TermState) Job {
	switch {
	case t.StdinTerminal && t.OwnsTerminal:
		return Job{Foreground: true}
	case t.StdinTerminal:
		return Job{Setpgid: true}
	}
	return Job{Setsid: true}
}
