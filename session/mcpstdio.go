package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// MaxMCPLine bounds one JSON-RPC message on the stdio transport.
const MaxMCPLine = 16 << 20

// MCPStdio is the stdio transport of `sbx mcp`, newline-delimited JSON-RPC
// on r and w, with a gate in front of the MCP SDK: a line the SDK would
// end the whole session on, or read another way than the client meant,
// gets a JSON-RPC error of its own and the session goes on:
//
//   - not JSON, not UTF-8, or longer than MaxMCPLine: -32700;
//   - a batch (an array), a jsonrpc other than "2.0", an id that is not a
//     string, a number or null: -32600;
//   - an object with a key twice, or two keys that differ only in case
//     ({"command":"ls","COMMAND":"rm -rf x"}: Go's decoder reads the last
//     regardless of case, a client may read the first): -32600;
//   - a request whose id is still in use by a request in flight (the SDK
//     dropped the second with no answer): -32600.
//
// Every line written to w is written whole, so these answers never split
// one of the SDK's.
func MCPStdio(r io.Reader, w io.Writer) mcp.Transport {
	pr, pw := io.Pipe()
	sdk := &lineWriter{w: pw}
	g := &mcpGate{out: &lineWriter{w: w}, inFlight: map[string]bool{}}
	g.toSDK = func(b []byte) { _, _ = sdk.Write(append(b, '\n')) }
	go func() { pw.CloseWithError(g.copy(r, sdk)) }()
	return &mcp.IOTransport{Reader: pr, Writer: g, MaxLineLength: MaxMCPLine + 1}
}

// mcpGate passes the client's acceptable lines to the SDK and the SDK's
// lines to the client, keeping the ids of the requests in flight.
type mcpGate struct {
	out      *lineWriter
	toSDK    func([]byte) // writes a line to the SDK, as from the client
	mu       sync.Mutex
	inFlight map[string]bool
}

// copy reads the client's lines until r ends, answering those it refuses.
func (g *mcpGate) copy(r io.Reader, to io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, long, err := readLine(br, MaxMCPLine)
		if long {
			g.reply(nil, -32700, fmt.Sprintf("a message longer than %d bytes; not read", MaxMCPLine))
		} else if len(bytes.TrimSpace(line)) > 0 {
			if id, code, msg := g.check(line); code != 0 {
				g.reply(id, code, msg)
			} else if _, werr := to.Write(append(line, '\n')); werr != nil {
				return werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// readLine reads one line without its newline; a line over max is
// consumed and reported long, not returned.
func readLine(br *bufio.Reader, max int) (line []byte, long bool, err error) {
	for {
		frag, ferr := br.ReadSlice('\n')
		if len(line)+len(frag) > max+1 {
			long, line = true, nil
		} else if !long {
			line = append(line, frag...)
		}
		if !errors.Is(ferr, bufio.ErrBufferFull) {
			return bytes.TrimSuffix(line, []byte("\n")), long, ferr
		}
	}
}

// check returns the JSON-RPC error for a line the SDK must not see (code
// 0: none), with the id to answer (nil: null). A refused response (the
// client answering one of the server's requests) is answered to the SDK
// instead, as an error from the client, so that the server's request ends
// (an ask answered that way is denied) and the client is not sent an
// error that looks like the answer to a request of its own.
func (g *mcpGate) check(line []byte) (json.RawMessage, int, string) {
	id, code, msg, response := g.verdict(line)
	if code == 0 || !response {
		return id, code, msg
	}
	if id != nil {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
			"error": map[string]any{"code": code, "message": "sbx refused the client's response: " + msg}})
		g.toSDK(b)
		return nil, 0, "" // nothing for the client
	}
	return nil, code, "a response the server cannot match to a request: " + msg
}

// maxMCPDepth bounds the nesting of a message, well below the SDK's own
// limit (1,000, past which it ends the session).
const maxMCPDepth = 256

// mcpMembers are the members a JSON-RPC 2.0 message may have.
var mcpMembers = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// verdict is check's decision; response tells whether line is a response
// (no method: a result or an error).
func (g *mcpGate) verdict(line []byte) (id json.RawMessage, code int, msg string, response bool) {
	if t := bytes.TrimSpace(line); t[0] == '[' {
		return nil, -32600, "JSON-RPC batches are not supported: send one message per line", false
	}
	if d := depth(line); d > maxMCPDepth {
		return nil, -32600, fmt.Sprintf("nested %d deep; at most %d", d, maxMCPDepth), false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, -32700, "parse error: " + err.Error(), false
	}
	_, method := m["method"]
	response = !method && (m["result"] != nil || m["error"] != nil)
	raw, key := m["id"], idKey(m["id"])
	if key != "" {
		id = raw
	}
	n, err := settings.ParseJSON("message", line)
	switch {
	case err != nil:
		// Valid to Go's decoder, but with a key twice (or not UTF-8).
		return id, -32600, "the message cannot be read one way only: " + err.Error(), response
	case n.Kind != settings.KindObject:
		return nil, -32600, "a JSON-RPC message is an object", false
	}
	if k := foldTwin(n); k != "" {
		return id, -32600, fmt.Sprintf("keys that differ only in case (%q): the message cannot be read one way only", k), response
	}
	for _, k := range n.Keys {
		if !slices.Contains(mcpMembers, k) {
			return id, -32600, fmt.Sprintf("%q is not a member of a JSON-RPC 2.0 message", k), response
		}
	}
	if v := n.Fields["jsonrpc"]; v == nil || v.Kind != settings.KindString || v.Str != "2.0" {
		return id, -32600, `"jsonrpc" must be "2.0"`, response
	}
	if raw != nil && key == "" || response && raw == nil {
		return nil, -32600, "an id is a string or an integer (-2^63 to 2^63-1), as sent back unchanged", response
	}
	if method && raw != nil {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.inFlight[key] {
			return id, -32600, "this id is in use by a request in flight; ids are never reused in a session", false
		}
		g.inFlight[key] = true
	}
	return nil, 0, "", response
}

// idKey is the identity of a JSON-RPC id as the SDK reads it, "" for one
// it would not send back as the client wrote it: null, a number that is
// not an integer of 64 bits (7.0, 1.5, 1e3 and 2^64 come back as other
// numbers), a string whose escapes hold no character (a lone surrogate
// comes back as U+FFFD).
func idKey(raw json.RawMessage) string {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if raw == nil || d.Decode(&v) != nil {
		return ""
	}
	switch x := v.(type) {
	case string:
		if strings.ContainsRune(x, utf8.RuneError) && !bytes.ContainsRune(raw, utf8.RuneError) &&
			!bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`)) {
			return ""
		}
		return "s:" + x
	case json.Number:
		i, err := strconv.ParseInt(x.String(), 10, 64)
		if err != nil {
			return ""
		}
		return "n:" + strconv.FormatInt(i, 10)
	}
	return ""
}

// depth is the deepest nesting of arrays and objects in a JSON text.
func depth(b []byte) int {
	d, deepest, in, esc := 0, 0, false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case in:
		case c == '{' || c == '[':
			d++
			deepest = max(deepest, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}

// foldTwin returns a key of an object in n (at any depth) that another key
// of the same object equals regardless of case, or "".
func foldTwin(n *settings.Node) string {
	switch n.Kind {
	case settings.KindObject:
		seen := map[string]bool{}
		for _, k := range n.Keys {
			f := strings.ToLower(strings.ToUpper(k))
			if seen[f] {
				return k
			}
			seen[f] = true
		}
		for _, k := range n.Keys {
			if t := foldTwin(n.Fields[k]); t != "" {
				return t
			}
		}
	case settings.KindArray:
		for _, e := range n.Elems {
			if t := foldTwin(e); t != "" {
				return t
			}
		}
	}
	return ""
}

// reply answers a refused line.
func (g *mcpGate) reply(id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": "sbx: " + msg}})
	_, _ = g.out.Write(append(b, '\n'))
}

// Write passes the SDK's output on, and forgets the id of each response.
func (g *mcpGate) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte("\n")) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method *string         `json:"method"`
		}
		if len(line) > 0 && json.Unmarshal(line, &m) == nil && m.ID != nil && m.Method == nil {
			g.mu.Lock()
			delete(g.inFlight, idKey(m.ID))
			g.mu.Unlock()
		}
	}
	return g.out.Write(p)
}

// Close implements io.Closer; the caller's writer stays open.
func (g *mcpGate) Close() error { return nil }

// lineWriter writes only whole lines to w, each in one call, so that two
// writers' lines never interleave; a partial line waits for its end.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	i := bytes.LastIndexByte(l.buf, '\n')
	if i < 0 {
		return len(p), nil
	}
	if _, err := l.w.Write(l.buf[:i+1]); err != nil {
		return 0, err
	}
	l.buf = append(l.buf[:0], l.buf[i+1:]...)
	return len(p), nil
}
