package pipeline

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// bashPaths are the files one Bash command reads and writes, resolved
// against every directory it may run in. unknown is set when one of them
// cannot be known before it runs (a dynamic word, an unknown directory).
type bashPaths struct {
	reads, writes []string
	unknown       bool
}

// commandPaths finds the files a command reads and writes: its
// redirections, and the file arguments of the commands sbx knows (cat …,
// cp, mv, install, ln, tee, touch, mkdir, rm, rmdir, truncate, chmod,
// chown, dd, sed, sort -o, uniq, tree -o, git --output, find -fprint).
func (g *Gate) commandPaths(sc *SimpleCommand) bashPaths {
	if !sc.pathsFound {
		sc.paths, sc.pathsFound = g.findPaths(sc), true
		if sc.Linked && len(sc.paths.reads)+len(sc.paths.writes) > 0 {
			sc.paths.unknown = true // a link made earlier in the string may lead elsewhere
		}
	}
	return sc.paths
}

func (g *Gate) findPaths(sc *SimpleCommand) bashPaths {
	var bp bashPaths
	add := func(w Word, write bool) {
		ps, ok := g.resolveWord(sc, w)
		bp.unknown = bp.unknown || !ok
		if write {
			bp.writes = append(bp.writes, ps...)
		} else {
			bp.reads = append(bp.reads, ps...)
		}
	}
	for _, rd := range sc.Redirects {
		if rd.Word.Values == nil {
			continue
		}
		if rd.Output && rd.Path == "/dev/null" {
			continue
		}
		add(rd.Word, rd.Output)
	}
	if len(sc.Words) == 0 || sc.Words[0].Dynamic {
		return bp
	}
	name, _ := progName(sc.Words[0].Values[0])
	for _, fa := range fileArgs(name, sc.Words[1:]) {
		if fa.into == nil {
			add(fa.w, fa.write)
			continue
		}
		// The source's name in a target that is a directory (each match
		// of a glob: cp t/.b* . copies t/.bashrc).
		names := []string{filepath.Base(fa.into.Values[0])}
		if fa.into.Glob {
			srcs, ok := g.resolveWord(sc, *fa.into)
			bp.unknown = bp.unknown || !ok
			for _, s := range srcs {
				names = append(names, filepath.Base(s))
			}
		}
		ps, ok := g.resolveWord(sc, fa.w)
		bp.unknown = bp.unknown || !ok
		for _, p := range ps {
			if fi, err := os.Stat(p); fa.always || err == nil && fi.IsDir() {
				for _, n := range names {
					bp.writes = append(bp.writes, filepath.Join(p, n))
				}
			}
		}
	}
	return bp
}

// fileArg is a file a command reads or writes, as the word that names it.
// With into set (a source's word), it is the file of the source's name in
// the directory w names: written when w is a directory on the host now,
// or always.
type fileArg struct {
	w      Word
	write  bool
	into   *Word
	always bool
}

// operands are the words after the options (an option's own argument is
// not told apart: a harmless over-approximation for paths).
func operands(words []Word) (ops []Word, opts []string) {
	dashdash := false
	for _, w := range words {
		v := w.Values[0]
		if !dashdash && !w.Dynamic && strings.HasPrefix(v, "-") && v != "-" {
			if v == "--" {
				dashdash = true
				continue
			}
			opts = append(opts, v)
			continue
		}
		ops = append(ops, w)
	}
	return ops, opts
}

// optValue returns the value of an option given as -x V, -xV, --long=V or
// --long V, with the word it came from. A long option may be abbreviated
// (getopt_long takes any unique prefix: sed --expr=…); a prefix another
// option shares only makes more words count as values (stricter).
func optValue(words []Word, short, long string) []Word {
	var out []Word
	for i, w := range words {
		v := w.Values[0]
		name, val, glued := strings.Cut(v, "=")
		abbrev := long != "" && len(name) >= 3 && strings.HasPrefix(name, "--") && strings.HasPrefix(long, name)
		// In a cluster of short options (sort -uo FILE, grep -if FILE):
		// the rest of the word after the letter, or the next word. A
		// letter that another option's glued value holds only makes
		// more words count (stricter).
		k := -1
		if short != "" && len(v) > 2 && v[0] == '-' && v[1] != '-' && !w.Dynamic {
			k = strings.IndexByte(v[1:], short[1]) + 1
		}
		switch {
		case (v == short || abbrev && !glued || k > 0 && k == len(v)-1) && i+1 < len(words):
			out = append(out, words[i+1])
		case k > 0 && k < len(v)-1:
			out = append(out, Word{Values: []string{v[k+1:]}, Dynamic: w.Dynamic, Glob: w.Glob})
		case abbrev && glued:
			out = append(out, Word{Values: []string{val}, Dynamic: w.Dynamic, Glob: w.Glob})
		}
	}
	return out
}

// isFileCommand reports whether fileArgs knows the program name (a switch:
// this runs for every command of every decision).
func isFileCommand(name string) bool {
	switch name {
	case "cat", "head", "tail", "less", "more", "nl", "tac", "strings", "xxd", "od", "base64",
		"cut", "diff", "cmp", "wc", "stat", "comm", "paste", "join", "md5sum", "sha1sum", "sha256sum", "sha512sum",
		"file", "hexdump", "grep", "egrep", "fgrep", "rg",
		"mv", "tee", "touch", "mkdir", "rm", "rmdir", "truncate", "shred", "unlink", "cp", "install", "ln",
		"chmod", "chown", "chgrp", "dd", "sed", "sort", "uniq", "tree", "git", "find", "go", "date", "du", "tar", "gtar":
		return true
	}
	return false
}

func fileArgs(name string, words []Word) []fileArg {
	if !isFileCommand(name) {
		return nil
	}
	ops, _ := operands(words)
	all := func(write bool) []fileArg {
		var out []fileArg
		for _, w := range ops {
			out = append(out, fileArg{w: w, write: write})
		}
		return out
	}
	switch name {
	case "cat", "head", "tail", "less", "more", "nl", "tac", "strings", "xxd", "od", "base64",
		"cut", "diff", "cmp", "wc", "stat", "comm", "paste", "join", "md5sum", "sha1sum", "sha256sum", "sha512sum",
		"file", "hexdump":
		// Options that name a file read: diff --from-file/--to-file, wc
		// --files0-from (its names end up in messages).
		return append(all(false), read(append(optValue(words, "", "--from-file"), append(optValue(words, "", "--to-file"),
			optValue(words, "", "--files0-from")...)...))...)
	case "grep", "egrep", "fgrep", "rg":
		// The pattern is the first operand unless -e or -f gives it.
		if len(optValue(words, "-e", "--regexp")) == 0 && len(optValue(words, "-f", "--file")) == 0 && len(ops) > 0 {
			ops = ops[1:]
		}
		out := read(optValue(words, "-f", "--file")) // the patterns' file
		for _, w := range ops {
			out = append(out, fileArg{w: w, write: false})
		}
		return out
	case "mv":
		t := optValue(words, "-t", "--target-directory")
		srcs := ops
		if len(t) == 0 && len(ops) > 0 {
			t, srcs = ops[len(ops)-1:], ops[:len(ops)-1]
		}
		return append(append(all(true), written(t)...), destWrites(words, t, srcs, "mv")...)
	case "tee", "touch", "mkdir", "rm", "rmdir", "truncate", "shred", "unlink":
		return all(true)
	case "cp", "install", "ln":
		return copyArgs(name, words, ops)
	case "chmod", "chown", "chgrp":
		if len(ops) > 0 {
			ops = ops[1:] // the mode or owner
		}
		var out []fileArg
		for _, w := range ops {
			out = append(out, fileArg{w: w, write: true})
		}
		return out
	case "dd":
		var out []fileArg
		for _, w := range ops {
			if v, ok := strings.CutPrefix(w.Values[0], "of="); ok {
				out = append(out, fileArg{w: Word{Values: []string{v}, Dynamic: w.Dynamic, Glob: w.Glob}, write: true})
			} else if v, ok := strings.CutPrefix(w.Values[0], "if="); ok {
				out = append(out, fileArg{w: Word{Values: []string{v}, Dynamic: w.Dynamic, Glob: w.Glob}, write: false})
			}
		}
		return out
	case "sed":
		return sedArgs(words, ops)
	case "sort":
		return append(append(all(false), written(optValue(words, "-o", "--output"))...), read(optValue(words, "", "--files0-from"))...)
	case "tar", "gtar":
		return tarArgs(words)
	case "uniq":
		if len(ops) > 1 {
			return []fileArg{{w: ops[0], write: false}, {w: ops[1], write: true}}
		}
		return all(false)
	case "tree":
		out := written(optValue(words, "-o", ""))
		if len(optValue(words, "", "--fromfile")) > 0 || slices.ContainsFunc(words, func(w Word) bool { return w.Values[0] == "--fromfile" }) {
			out = append(out, read(ops)...) // its operands are files of names it prints
		}
		return out
	case "git":
		// blame --contents FILE and config --file FILE read a file.
		out := written(optValue(words, "", "--output"))
		is := func(sub string) bool {
			return slices.ContainsFunc(ops, func(w Word) bool { return w.Values[0] == sub })
		}
		if is("blame") {
			out = append(out, read(optValue(words, "", "--contents"))...)
		}
		if is("config") {
			out = append(out, read(optValue(words, "-f", "--file"))...)
		}
		return out
	case "date":
		return read(optValue(words, "-f", "--file"))
	case "du":
		return read(optValue(words, "", "--files0-from"))
	case "go":
		return goOutput(words)
	case "find":
		var out []fileArg
		for i, w := range words {
			if slices.Contains([]string{"-fprint", "-fprint0", "-fprintf", "-fls"}, w.Values[0]) && i+1 < len(words) {
				out = append(out, fileArg{w: words[i+1], write: true})
			}
		}
		return out
	}
	return nil
}

// goWriteFlags are go's flags whose value is a file it writes (go build
// -o, go test -c -o and its profiles).
var goWriteFlags = []string{"o", "coverprofile", "cpuprofile", "memprofile", "blockprofile", "mutexprofile",
	"trace", "outputdir", "test.coverprofile", "test.cpuprofile", "test.memprofile", "test.trace"}

// goOutput is what go build and go test write: goWriteFlags' values
// (-o FILE, -o=FILE, --o, as Go's flag package reads them).
func goOutput(words []Word) []fileArg {
	var out []fileArg
	for i, w := range words {
		name, val, glued := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(w.Values[0], "-"), "-"), "=")
		if !strings.HasPrefix(w.Values[0], "-") || !slices.Contains(goWriteFlags, name) {
			continue
		}
		switch {
		case glued:
			out = append(out, fileArg{w: Word{Values: []string{val}, Dynamic: w.Dynamic, Glob: w.Glob}, write: true})
		case i+1 < len(words):
			out = append(out, fileArg{w: words[i+1], write: true})
		}
	}
	return out
}

// read makes the files of words read ones.
func read(words []Word) []fileArg {
	out := make([]fileArg, 0, len(words))
	for _, w := range words {
		out = append(out, fileArg{w: w, write: false})
	}
	return out
}

func written(ws []Word) []fileArg {
	var out []fileArg
	for _, w := range ws {
		out = append(out, fileArg{w: w, write: true})
	}
	return out
}

// copyArgs: cp/install/ln write their target (-t DIR, or the last operand)
// and what destWrites adds, and read the rest.
func copyArgs(name string, words, ops []Word) []fileArg {
	var out []fileArg
	var srcs []Word
	t := optValue(words, "-t", "--target-directory")
	if len(t) > 0 {
		for _, w := range ops {
			if !slices.ContainsFunc(t, func(x Word) bool { return slices.Equal(x.Values, w.Values) }) {
				srcs = append(srcs, w)
			}
		}
	} else if len(ops) > 0 {
		t, srcs = ops[len(ops)-1:], ops[:len(ops)-1]
	}
	for _, w := range srcs {
		out = append(out, fileArg{w: w, write: false})
	}
	return append(append(out, written(t)...), destWrites(words, t, srcs, name)...)
}

// tarArgs: the archive (-f) is written when tar creates, appends or
// updates one and read otherwise; list files (-T, -X) are read; the
// snapshot (-g) and index files are written; what an extraction writes is
// named inside the archive: unknown.
func tarArgs(words []Word) []fileArg {
	mode := ""
	for i, w := range words {
		v := w.Values[0]
		switch {
		case w.Dynamic:
		case strings.HasPrefix(v, "--"):
			switch l := longOption(strings.SplitN(v, "=", 2)[0], []string{"--extract", "--get", "--create", "--append", "--update", "--concatenate", "--catenate", "--delete"}); l {
			case "--extract", "--get":
				mode += "x"
			case "":
			default:
				mode += "c"
			}
		case strings.HasPrefix(v, "-") || i == 0:
			// A cluster, or the old-style first word (tar xf a.tar).
			if strings.ContainsAny(v, "x") {
				mode += "x"
			}
			if strings.ContainsAny(v, "crAu") {
				mode += "c"
			}
		}
	}
	var out []fileArg
	archives := optValue(words, "-f", "--file")
	if len(words) > 0 && !strings.HasPrefix(words[0].Values[0], "-") && strings.Contains(words[0].Values[0], "f") && len(words) > 1 {
		archives = append(archives, words[1]) // tar cf ARCHIVE …
	}
	for _, a := range archives {
		out = append(out, fileArg{w: a, write: strings.Contains(mode, "c")})
	}
	out = append(out, read(append(optValue(words, "-T", "--files-from"), optValue(words, "-X", "--exclude-from")...))...)
	out = append(out, written(append(optValue(words, "-g", "--listed-incremental"), optValue(words, "", "--index-file")...))...)
	if strings.Contains(mode, "x") {
		out = append(out, unknownWrite)
	}
	return out
}

// unknownWrite is a write whose path cannot be known statically.
var unknownWrite = fileArg{w: Word{Values: []string{""}, Dynamic: true}, write: true}

// destWrites is what cp, mv, install and ln write besides their target:
// the target joined with each source's name (a target that is a directory
// receives a source under its own name: cp t/.bashrc ~ writes
// ~/.bashrc), and a backup of each (-b with -S SUFFIX renames the file in
// place to its name and the suffix: mv -b -S rc f .bash makes .bashrc; a
// backup without -S takes its suffix from the environment: unknown). A
// recursive copy of a directory's contents (cp -r src/. dst, -T) writes
// every file below: unknown.
func destWrites(words, targets, srcs []Word, name string) []fileArg {
	_, opts := operands(words)
	short := func(c rune) bool {
		return slices.ContainsFunc(opts, func(o string) bool { return !strings.HasPrefix(o, "--") && strings.ContainsRune(o, c) })
	}
	long := func(l string) bool {
		return slices.ContainsFunc(opts, func(o string) bool { n, _, _ := strings.Cut(o, "="); return len(n) >= 4 && strings.HasPrefix(l, n) })
	}
	explicit := len(optValue(words, "-t", "--target-directory")) > 0
	var out []fileArg
	var dests []string
	for _, t := range targets {
		for _, tv := range t.Values {
			dests = append(dests, tv)
			dir := explicit || strings.HasSuffix(tv, "/") || tv == "." || tv == ".." || tv == "~"
			for _, s := range srcs {
				if s.Dynamic {
					out = append(out, unknownWrite) // a source's name known only when it runs
					continue
				}
				for _, sv := range s.Values {
					src := Word{Values: []string{sv}, Glob: s.Glob}
					out = append(out, fileArg{w: Word{Values: []string{tv}, Dynamic: t.Dynamic, Glob: t.Glob}, write: true, into: &src, always: dir})
					dests = append(dests, filepath.Join(tv, filepath.Base(sv)))
				}
			}
		}
	}
	if recursive := name == "cp" && (short('r') || short('R') || short('a') || long("--recursive") || long("--archive")); recursive {
		if short('T') || long("--no-target-directory") || slices.ContainsFunc(srcs, func(s Word) bool {
			return slices.ContainsFunc(s.Values, func(v string) bool { b := filepath.Base(v); return b == "." || b == ".." })
		}) {
			out = append(out, unknownWrite)
		}
	}
	if name == "install" && short('D') {
		out = append(out, unknownWrite) // -D makes the target's missing directories
	}
	if !short('b') && !long("--backup") && !short('S') && !long("--suffix") {
		return out
	}
	suffixes := optValue(words, "-S", "--suffix")
	if len(suffixes) == 0 {
		return append(out, unknownWrite)
	}
	for _, d := range dests {
		for _, s := range suffixes {
			out = append(out, fileArg{w: Word{Values: []string{d + s.Values[0]}, Dynamic: s.Dynamic}, write: true})
		}
	}
	return out
}

// sedArgs: the script is the first operand unless -e or -f gives it; the
// files are read, and written with -i; w and W commands in the script
// write their file.
func sedArgs(words, ops []Word) []fileArg {
	_, opts := operands(words)
	inPlace := slices.ContainsFunc(opts, func(o string) bool {
		return strings.HasPrefix(o, "-i") || strings.HasPrefix(o, "--in-place") || (!strings.HasPrefix(o, "--") && strings.Contains(o, "i"))
	})
	scripts := optValue(words, "-e", "--expression")
	if len(scripts) == 0 && len(optValue(words, "-f", "--file")) == 0 && len(ops) > 0 {
		scripts, ops = ops[:1], ops[1:]
	}
	var out []fileArg
	for _, w := range ops {
		if slices.ContainsFunc(scripts, func(x Word) bool { return slices.Equal(x.Values, w.Values) }) {
			continue
		}
		out = append(out, fileArg{w: w, write: inPlace})
	}
	if len(optValue(words, "-f", "--file")) > 0 {
		out = append(out, unknownWrite) // a script file's w commands
	}
	for _, s := range scripts {
		in := readSed(s.Values[0])
		if s.Dynamic || in.unsure {
			out = append(out, unknownWrite)
		}
		for _, f := range in.reads {
			out = append(out, fileArg{w: Word{Values: []string{f}, Dynamic: s.Dynamic}, write: false})
		}
		for _, f := range in.writes {
			out = append(out, fileArg{w: Word{Values: []string{f}, Dynamic: s.Dynamic}, write: true})
		}
	}
	return out
}

// sedMayRunCode reports whether sed's arguments may run a command: a
// script (any argument, or an -e/--expression value under any spelling)
// with the e command or flag, or a script file (-f, --file), which is not
// read.
func sedMayRunCode(words []Word) bool {
	for _, w := range words {
		v := w.Values[0]
		name, _, _ := strings.Cut(v, "=")
		if w.Dynamic || len(name) >= 3 && strings.HasPrefix(name, "--") && strings.HasPrefix("--file", name) ||
			len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.ContainsRune(v, 'f') {
			return true
		}
	}
	scripts := optValue(words, "-e", "--expression")
	if ops, _ := operands(words); len(scripts) == 0 && len(ops) > 0 {
		scripts = ops[:1]
	}
	return slices.ContainsFunc(scripts, func(w Word) bool { return sedRunsCode(w.Values[0]) })
}

func sedRunsCode(script string) bool {
	in := readSed(script)
	return in.runs || in.unsure
}

// resolveWord returns the absolute paths a word may name, one per value
// and per directory the command may run in; a glob adds what it matches
// now. ok is false when the word or a directory is not known.
func (g *Gate) resolveWord(sc *SimpleCommand, w Word) (paths []string, ok bool) {
	if w.Dynamic {
		return nil, false
	}
	dirs := sc.Dirs
	if len(dirs) == 0 {
		dirs = []string{g.Cwd}
	}
	ok = true
	for _, v := range w.Values {
		for _, d := range dirs {
			var p string
			switch {
			case filepath.IsAbs(v):
				p = filepath.Clean(v)
			case d == "":
				ok = false
				continue
			default:
				p = filepath.Join(d, v)
			}
			paths = append(paths, p)
			if w.Glob {
				m, complete := boundedGlob(p, maxGlobEntries)
				paths = append(paths, m...)
				ok = ok && complete // not every match known: not decided on them
			}
		}
	}
	return paths, ok
}
