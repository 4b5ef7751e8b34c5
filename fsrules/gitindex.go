package fsrules

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxGitIndex bounds the index files the merge reads to check them (git's
// index of a million files is ~100 MiB).
const MaxGitIndex = 256 << 20

// IsGitIndexName reports whether name, at the top of a git directory, is
// an index file: the index, or a split index's shared part.
func IsGitIndexName(name string) bool {
	return name == "index" || strings.HasPrefix(name, "sharedindex.")
}

// GitIndexSafe reports whether an index file (a git directory's index or
// a split index's sharedindex.*) holds only paths git would have put
// there itself. Git checks a path when it adds it to the index, and
// trusts the index it reads: `git restore .` or `git checkout-index -a`
// on the host writes every entry's path as it stands, so an entry named
// .git/hooks/pre-commit, written by a sandbox that edited the index
// bytes, would plant a hook in the host's repository. Every entry's path
// must pass git's own checks (no "." or ".." component, no .git in any
// spelling the protectNTFS and protectHFS checks know, no symbolic link
// named .gitmodules and the like). Object names are SHA-256's when the
// repository's config says so (see [GitUsesSHA256]), else SHA-1's, as
// git reads them (it does not verify the checksum on reading); an index
// that cannot be read as version 2, 3 or 4 is refused.
func GitIndexSafe(data []byte, sha256Names bool) (ok bool, why string) {
	if len(data) > MaxGitIndex {
		return false, "the index is over 256 MiB"
	}
	hashLen := sha1.Size
	if sha256Names {
		hashLen = sha256.Size
	}
	if err := checkIndexEntries(data, hashLen); err != nil {
		return false, "the index " + err.Error()
	}
	return true, ""
}

// GitUsesSHA256 reports whether a repository's config (its common
// directory's) makes its object names SHA-256, as git reads it: the last
// extensions.objectFormat, honoured only when the last
// core.repositoryFormatVersion is 1 or more.
func GitUsesSHA256(config []byte) bool {
	keys, _ := parseGitConfig(config)
	version, format := "0", ""
	for _, k := range keys {
		switch {
		case k.section == "core" && !k.hasSub && k.name == "repositoryformatversion":
			version = strings.TrimSpace(k.value)
		case k.section == "extensions" && !k.hasSub && k.name == "objectformat":
			format = strings.TrimSpace(k.value)
		}
	}
	v, err := strconv.Atoi(version)
	return err == nil && v >= 1 && strings.EqualFold(format, "sha256")
}

// indexEntryFixed is the size of an entry's fixed fields before its object
// name: ctime, mtime, dev, ino, mode, uid, gid, size (ten 32-bit words).
const indexEntryFixed = 40

// checkIndexEntries reads the entries of index data whose object names
// are hashLen bytes long, and checks each path: in sequence, as git reads
// them with one thread, and block by block as an IEOT extension lays
// them out, as git's threaded reader reads them (each block's first
// entry with no previous path to share a prefix with).
func checkIndexEntries(data []byte, hashLen int) error {
	if len(data) < 12 || string(data[:4]) != "DIRC" {
		return errors.New("does not begin with DIRC")
	}
	version := binary.BigEndian.Uint32(data[4:])
	if version < 2 || version > 4 {
		return fmt.Errorf("has version %d, which git does not write", version)
	}
	count := binary.BigEndian.Uint32(data[8:])
	end := len(data) - hashLen // the checksum
	if end < 12 {
		return errors.New("is too short")
	}
	ix := indexReader{data: data[:end], version: version, hashLen: hashLen}
	if _, err := ix.entries(12, count); err != nil {
		return err
	}
	for _, b := range ieotBlocks(data, hashLen) {
		if _, err := ix.entries(int(b[0]), b[1]); err != nil {
			return fmt.Errorf("(in the block at %d its IEOT extension names) %v", b[0], err)
		}
	}
	return nil
}

// indexReader reads the entries of an index (its checksum cut off).
type indexReader struct {
	data    []byte
	version uint32
	hashLen int
}

// entries reads n entries from off, the first with no previous path, and
// checks their paths; it returns where the next entry would begin.
func (ix indexReader) entries(off int, n uint32) (int, error) {
	var prev []byte
	for i := uint32(0); i < n; i++ {
		if off < 12 || off+indexEntryFixed+ix.hashLen+2 > len(ix.data) {
			return 0, fmt.Errorf("ends inside entry %d", i)
		}
		mode := binary.BigEndian.Uint32(ix.data[off+24:])
		flagsAt := off + indexEntryFixed + ix.hashLen
		flags := binary.BigEndian.Uint16(ix.data[flagsAt:])
		nameAt := flagsAt + 2
		if flags&0x4000 != 0 { // extended flags follow
			if ix.version < 3 {
				return 0, fmt.Errorf("entry %d has extended flags in a version 2 index", i)
			}
			nameAt += 2
		}
		if nameAt >= len(ix.data) {
			return 0, fmt.Errorf("ends inside entry %d", i)
		}
		var name []byte
		var next int
		var err error
		if ix.version == 4 {
			name, next, err = v4Name(ix.data, nameAt, int(flags&0xfff), prev)
		} else {
			name, next, err = v2Name(ix.data, off, nameAt, int(flags&0xfff))
		}
		if err != nil {
			return 0, fmt.Errorf("entry %d: %v", i, err)
		}
		if len(name) == 0 && mode&0o170000 == 0o120000 {
			// A split index's replacing entry keeps the shared entry's
			// name and takes this mode: it could make .gitmodules a link.
			return 0, fmt.Errorf("entry %d replaces a shared entry with a symbolic link, which sbx cannot check", i)
		}
		if why := gitIndexPathProblem(string(name), mode); why != "" {
			return 0, fmt.Errorf("holds the path %q, which git never writes there: %s", name, why)
		}
		prev, off = name, next
	}
	return off, nil
}

// ieotBlocks are the blocks (offset, entries) of the index's IEOT
// extension, found as git finds it: through the EOIE extension at the
// end, which gives where the extensions begin (git also checks a hash of
// their headers; without it, it reads in sequence, which is checked too).
// Git 2.39's EOIE holds a 20-byte hash whatever the object names; one of
// the names' length is looked for too, for git versions that write that.
func ieotBlocks(data []byte, hashLen int) [][2]uint32 {
	var out [][2]uint32
	for _, eoieHash := range []int{sha1.Size, hashLen} {
		out = append(out, ieotAt(data, hashLen, eoieHash)...)
		if eoieHash == hashLen {
			break
		}
	}
	return out
}

// ieotAt is ieotBlocks for an EOIE whose hash is eoieHash bytes long.
func ieotAt(data []byte, hashLen, eoieHash int) [][2]uint32 {
	be := binary.BigEndian.Uint32
	eoie := len(data) - hashLen - (8 + 4 + eoieHash)
	if eoie < 12 || string(data[eoie:eoie+4]) != "EOIE" || be(data[eoie+4:]) != uint32(4+eoieHash) {
		return nil
	}
	off := int(be(data[eoie+8:]))
	if off < 12 || off >= eoie {
		return nil
	}
	for off+8 <= len(data)-hashLen {
		size := int(be(data[off+4:]))
		if string(data[off:off+4]) != "IEOT" {
			if size > len(data) {
				return nil
			}
			off += 8 + size
			continue
		}
		if size < 4 || off+8+size > len(data) || be(data[off+8:]) != 1 {
			return nil // git does not use it
		}
		var blocks [][2]uint32
		for b := data[off+12 : off+8+size]; len(b) >= 8; b = b[8:] {
			blocks = append(blocks, [2]uint32{be(b), be(b[4:])})
		}
		return blocks
	}
	return nil
}

// v2Name is the path of a version 2 or 3 entry beginning at off, its name
// at nameAt: the nameLen bytes git copies (or, at 0xfff, those up to the
// NUL), padded with NULs to a multiple of 8 bytes; and where the next
// entry begins.
func v2Name(data []byte, off, nameAt, nameLen int) ([]byte, int, error) {
	if nameLen == 0xfff {
		n := bytes.IndexByte(data[nameAt:], 0)
		if n < 0 {
			return nil, 0, errors.New("name not terminated")
		}
		nameLen = n
	}
	if nameAt+nameLen >= len(data) || data[nameAt+nameLen] != 0 {
		return nil, 0, errors.New("name not terminated where its length says")
	}
	name := data[nameAt : nameAt+nameLen]
	next := off + ((nameAt - off + nameLen + 8) &^ 7)
	if next > len(data) {
		return nil, 0, errors.New("padding past the end")
	}
	return name, next, nil
}

// v4Name is the path of a version 4 entry: a varint number of bytes to
// strip from the previous path, then the rest, NUL-terminated; and where
// the next entry begins. With no previous path (the first entry of a
// block) git ignores the number.
func v4Name(data []byte, nameAt, nameLen int, prev []byte) (name []byte, next int, err error) {
	strip, n := varint(data[nameAt:])
	if n < 0 {
		return nil, 0, errors.New("prefix length past the end")
	}
	if prev == nil {
		strip = 0
	}
	if strip > uint64(len(prev)) {
		return nil, 0, errors.New("strips more than the previous path")
	}
	rest := nameAt + n
	end := bytes.IndexByte(data[rest:], 0)
	if end < 0 {
		return nil, 0, errors.New("name not terminated")
	}
	name = append(append([]byte{}, prev[:len(prev)-int(strip)]...), data[rest:rest+end]...)
	if nameLen != 0xfff && nameLen != len(name) {
		return nil, 0, errors.New("name length differs from its flags")
	}
	return name, rest + end + 1, nil
}

// varint decodes git's offset varint (its pack and index v4 one, not
// LEB128) as decode_varint does: the value and the bytes read; on an
// overflow git reads 0 and leaves the bytes to the name (n == 0); past
// the end of b, n < 0.
func varint(b []byte) (v uint64, n int) {
	if len(b) == 0 {
		return 0, -1
	}
	c := b[0]
	v, n = uint64(c&0x7f), 1
	for c&0x80 != 0 {
		v++
		if v == 0 || v>>57 != 0 {
			return 0, 0
		}
		if n >= len(b) {
			return 0, -1
		}
		c = b[n]
		n++
		v = v<<7 + uint64(c&0x7f)
	}
	return v, n
}

// gitIndexPathProblem says why git would refuse path (with the entry's
// mode) in its index, "" when it would not.
func gitIndexPathProblem(path string, mode uint32) string {
	switch {
	case path == "":
		return "" // a split index's entry that takes its shared entry's path
	case strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") || strings.Contains(path, "//"):
		return "not a relative path"
	case strings.IndexByte(path, 0) >= 0:
		return "a NUL inside"
	}
	if why := gitComponentProblem(path); why != "" {
		return why
	}
	if mode&0o170000 == 0o120000 {
		base := path[strings.LastIndexAny(path, `/\`)+1:]
		for _, n := range []string{".gitmodules", ".gitattributes", ".gitignore", ".mailmap"} {
			if isDotGitLike(base, n) {
				return "a symbolic link named " + n
			}
		}
	}
	return ""
}

// gitComponentProblem says why a component of path (split at slashes
// and, as protectNTFS does, backslashes) is one git refuses: . or .., or
// .git in any spelling.
func gitComponentProblem(path string) string {
	for _, c := range strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == '\\' }) {
		switch {
		case c == "." || c == "..":
			return "a . or .. component"
		case isDotGitLike(c, ".git"):
			return "a .git component"
		}
	}
	return ""
}

// isDotGitLike reports whether component c names the file n (".git",
// ".gitmodules" …) on some file system git protects: in any case, with
// trailing dots and spaces or an alternate data stream (NTFS), as its
// 8.3 short name (git~1, gitmod~1 …), or with Unicode code points HFS+
// ignores.
func isDotGitLike(c, n string) bool {
	c = strings.Map(func(r rune) rune {
		if r >= 0x200c && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x206a && r <= 0x206f || r == 0xfeff {
			return -1
		}
		return r
	}, c)
	if i := strings.IndexByte(c, ':'); i >= 0 {
		c = c[:i]
	}
	c = strings.TrimRight(c, ". ")
	if strings.EqualFold(c, n) {
		return true
	}
	short := strings.TrimPrefix(n, ".")
	if len(short) > 6 {
		short = short[:6]
	}
	lc := strings.ToLower(c)
	return strings.HasPrefix(lc, short+"~") && len(lc) > len(short)+1 && strings.Trim(lc[len(short)+1:], "0123456789") == ""
}
