package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

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
	g := &mcpGate{out: &lineWriter{w: w}, inFlight: map[string]bool{}}
	go func() { pw.CloseWithError(g.copy(r, pw)) }()
	return &mcp.IOTransport{Reader: pr, Writer: g, MaxLineLength: MaxMCPLine + 1}
}

// mcpGate passes the client's acceptable lines to the SDK and the SDK's
// lines to the client, keeping the ids of the requests in flight.
type mcpGate struct {
	out      *lineWriter
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
// 0: none), with the id to answer (nil: null).
func (g *mcpGate) check(line []byte) (json.RawMessage, int, string) {
	if t := bytes.TrimSpace(line); t[0] == '[' {
		return nil, -32600, "JSON-RPC batches are not supported: send one message per line"
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, -32700, "parse error: " + err.Error()
	}
	id := m["id"]
	n, err := settings.ParseJSON("message", line)
	if err != nil {
		// Valid to Go's decoder, but with a key twice (or not UTF-8).
		return validID(id), -32600, "the message cannot be read one way only: " + err.Error()
	}
	if n.Kind != settings.KindObject {
		return nil, -32600, "a JSON-RPC message is an object"
	}
	if k := foldTwin(n); k != "" {
		return validID(id), -32600, fmt.Sprintf("keys that differ only in case (%q): the message cannot be read one way only", k)
	}
	if v, ok := n.Fields["jsonrpc"]; !ok || v.Kind != settings.KindString || v.Str != "2.0" {
		return validID(id), -32600, `"jsonrpc" must be "2.0"`
	}
	if id != nil && validID(id) == nil {
		return nil, -32600, "an id is a string, a number or null"
	}
	if _, req := m["method"]; req && id != nil {
		key := string(id)
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.inFlight[key] {
			return id, -32600, "this id is in use by a request in flight; ids are never reused in a session"
		}
		g.inFlight[key] = true
	}
	return nil, 0, ""
}

// validID is id when it is a string, a number or null, else nil.
func validID(id json.RawMessage) json.RawMessage {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return nil
	}
	switch v.(type) {
	case string, float64, nil:
		return id
	}
	return nil
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
			delete(g.inFlight, string(m.ID))
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
