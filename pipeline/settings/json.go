package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// Kind is the JSON type of a [Node].
type Kind uint8

// The JSON kinds a [Node] can hold.
const (
	KindNull Kind = iota
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "boolean"
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	case KindArray:
		return "array"
	case KindObject:
		return "object"
	}
	return "unknown"
}

// Pos is a 1-based line and column in a settings file.
type Pos struct {
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Node is one JSON value with the position where it starts, so that every
// validation error can name the file, line and column it is about.
type Node struct {
	Kind   Kind
	Pos    Pos
	Bool   bool
	Number json.Number
	Str    string
	Elems  []*Node  // Array elements.
	Keys   []string // Object keys in file order.
	Fields map[string]*Node
}

// ParseError is returned for a settings file that is not valid JSON.
type ParseError struct {
	File string
	Pos  Pos
	Msg  string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s:%s: invalid JSON: %s", e.File, e.Pos, e.Msg)
}

// posAt converts a byte offset of data into a line and column (for
// errors: it scans data, so it is not for every token).
func posAt(data []byte, off int64) Pos {
	return newLineIndex(data).pos(off)
}

// lineIndex converts byte offsets into lines and columns in O(log n): the
// offsets of the newlines are found once, so a file's every token can
// carry its position and parsing stays linear in the file's size.
type lineIndex struct {
	size int64
	nl   []int
}

func newLineIndex(data []byte) *lineIndex {
	ix := &lineIndex{size: int64(len(data))}
	for i, b := range data {
		if b == '\n' {
			ix.nl = append(ix.nl, i)
		}
	}
	return ix
}

func (ix *lineIndex) pos(off int64) Pos {
	off = min(max(off, 0), ix.size)
	i := sort.SearchInts(ix.nl, int(off)) // newlines before off
	last := -1
	if i > 0 {
		last = ix.nl[i-1]
	}
	return Pos{Line: i + 1, Col: int(off) - last}
}

// ParseJSON parses data into a [Node] tree. Duplicate object keys are an
// error: JSON leaves their meaning open, and a security setting must not
// depend on which copy a reader keeps.
func ParseJSON(file string, data []byte) (*Node, error) {
	// JSON text is UTF-8; a decoder would turn a stray byte into U+FFFD,
	// and a path holding one would name another file (the real one would
	// go unprotected): refused, where it is.
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, size := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			off += size
		}
		return nil, &ParseError{File: file, Pos: posAt(data, int64(off)), Msg: "not valid UTF-8 (JSON text must be; a path whose name is not UTF-8 cannot be written here: rename it, or match it with a wildcard)"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &jsonParser{file: file, data: data, dec: dec, lines: newLineIndex(data)}
	n, err := p.value()
	if err != nil {
		return nil, err
	}
	// Anything after the top-level value is an error.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &ParseError{File: file, Pos: posAt(data, dec.InputOffset()), Msg: "unexpected data after the top-level value"}
	}
	return n, nil
}

type jsonParser struct {
	file  string
	data  []byte
	dec   *json.Decoder
	lines *lineIndex
}

func (p *jsonParser) fail(err error) error {
	off := p.dec.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	msg := err.Error()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		msg = "unexpected end of file"
	}
	return &ParseError{File: p.file, Pos: p.lines.pos(off), Msg: msg}
}

// start returns the position of the next token: InputOffset points just
// past the previous token, so skip whitespace and separators.
func (p *jsonParser) start() Pos {
	off := p.dec.InputOffset()
	for off < int64(len(p.data)) && strings.IndexByte(" \t\r\n,:", p.data[off]) >= 0 {
		off++
	}
	return p.lines.pos(off)
}

// replacementChar returns the first string (key or value) under n that
// holds U+FFFD, or nil.
func replacementChar(n *Node) *Node {
	switch n.Kind {
	case KindString:
		if strings.ContainsRune(n.Str, utf8.RuneError) {
			return n
		}
	case KindArray:
		for _, e := range n.Elems {
			if r := replacementChar(e); r != nil {
				return r
			}
		}
	case KindObject:
		for _, k := range n.Keys {
			if strings.ContainsRune(k, utf8.RuneError) {
				return n
			}
			if r := replacementChar(n.Fields[k]); r != nil {
				return r
			}
		}
	}
	return nil
}

func (p *jsonParser) value() (*Node, error) {
	pos := p.start()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.fail(err)
	}
	n := &Node{Pos: pos}
	switch t := tok.(type) {
	case nil:
		n.Kind = KindNull
	case bool:
		n.Kind, n.Bool = KindBool, t
	case json.Number:
		n.Kind, n.Number = KindNumber, t
	case string:
		n.Kind, n.Str = KindString, t
	case json.Delim:
		switch t {
		case '[':
			n.Kind = KindArray
			for p.dec.More() {
				e, err := p.value()
				if err != nil {
					return nil, err
				}
				n.Elems = append(n.Elems, e)
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, p.fail(err)
			}
		case '{':
			n.Kind = KindObject
			n.Fields = map[string]*Node{}
			for p.dec.More() {
				kpos := p.start()
				kt, err := p.dec.Token()
				if err != nil {
					return nil, p.fail(err)
				}
				key, ok := kt.(string)
				if !ok {
					return nil, &ParseError{File: p.file, Pos: kpos, Msg: "object key must be a string"}
				}
				if _, dup := n.Fields[key]; dup {
					return nil, &ParseError{File: p.file, Pos: kpos, Msg: fmt.Sprintf("duplicate key %q", key)}
				}
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				n.Keys = append(n.Keys, key)
				n.Fields[key] = v
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, p.fail(err)
			}
		default:
			return nil, &ParseError{File: p.file, Pos: pos, Msg: fmt.Sprintf("unexpected %q", t)}
		}
	}
	return n, nil
}
