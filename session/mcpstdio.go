package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxMCPLine bounds one JSON-RPC message on the stdio transport.
const MaxMCPLine = 16 << 20

// MCPStdio is the stdio transport of `sbx mcp`, newline-delimited JSON-RPC
// on r and w, with a gate in front of the MCP SDK: a line the SDK would
// end the whole session on, drop without an answer, or read another way
// than the client meant, gets a JSON-RPC error of its own and the session
// goes on (see [mcpGate.verdict]): not JSON, not UTF-8, or longer than
// MaxMCPLine (-32700); a batch, nesting past 256, a member JSON-RPC does
// not have, a jsonrpc other than "2.0", an id the SDK would not send back
// as written, a key twice or two keys that differ only in case, a request
// reusing the id of one in flight, a message that is neither a request
// nor the answer to a request of the server's, a malformed error (-32600).
// A malformed answer to a request of the server's is answered to the
// server instead, as the client's error.
//
// Every line written to w is written whole, so these answers never split
// one of the SDK's.
func MCPStdio(r io.Reader, w io.Writer) mcp.Transport {
	pr, pw := io.Pipe()
	sdk := &lineWriter{w: pw}
	g := &mcpGate{out: &lineWriter{w: w}, inFlight: map[string]bool{}, serverPending: map[string]bool{}}
	g.answered = sync.NewCond(&g.mu)
	go func() { pw.CloseWithError(g.copy(r, sdk)) }()
	return &mcp.IOTransport{Reader: pr, Writer: g, MaxLineLength: MaxMCPLine + 1}
}

// maxEOFWait bounds the wait, at the end of input, for the calls under way:
// the longest Bash timeout and a minute.
const maxEOFWait = 11 * time.Minute

// mcpGate passes the client's acceptable lines to the SDK and the SDK's
// lines to the client, keeping the ids of the requests in flight.
type mcpGate struct {
	out *lineWriter
	mu  sync.Mutex
	// inFlight are the ids of the client's requests not yet answered, and
	// serverPending those of the server's requests to the client (an
	// elicitation) not yet answered, by [idKey].
	inFlight, serverPending map[string]bool
	// answered is signalled (with mu) each time a response leaves.
	answered *sync.Cond
}

// copy reads the client's lines until r ends, answering those it refuses.
func (g *mcpGate) copy(r io.Reader, to io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, long, err := readLine(br, MaxMCPLine)
		if long {
			g.reply(nil, -32700, fmt.Sprintf("a message longer than %d bytes; not read", MaxMCPLine))
		} else if line = bytes.TrimSpace(line); len(line) > 0 {
			// Trimmed: the SDK ends the session on white space after a
			// message ("invalid trailing data").
			v := g.verdict(line)
			switch {
			case v.code == 0:
				if _, werr := to.Write(append(line, '\n')); werr != nil {
					return werr
				}
			case v.toServer:
				// A malformed answer to a request of the server's: the
				// server gets an error in its place (an ask is denied).
				g.mu.Lock()
				delete(g.serverPending, idKey(v.id))
				g.mu.Unlock()
				b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": v.id,
					"error": map[string]any{"code": v.code, "message": "sbx refused the client's response: " + v.msg}})
				if _, werr := to.Write(append(b, '\n')); werr != nil {
					return werr
				}
			default:
				g.reply(v.id, v.code, v.msg)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				g.waitAnswered(maxEOFWait)
				return nil
			}
			return err
		}
	}
}

// waitAnswered waits, at the end of input, until every call under way is
// answered or max has passed, as sbx serve lets them finish (a client
// that wants them stopped sends SIGTERM).
func (g *mcpGate) waitAnswered(max time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	giveUp := false
	t := time.AfterFunc(max, func() {
		g.mu.Lock()
		giveUp = true
		g.answered.Broadcast()
		g.mu.Unlock()
	})
	defer t.Stop()
	for len(g.inFlight) > 0 && !giveUp {
		g.answered.Wait()
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

// reply answers a refused line.
func (g *mcpGate) reply(id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": "sbx: " + msg}})
	_, _ = g.out.Write(append(b, '\n'))
}

// Write passes the SDK's output on, forgetting the id of each response and
// noting that of each request of the server's.
func (g *mcpGate) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte("\n")) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method *string         `json:"method"`
		}
		if len(line) == 0 || json.Unmarshal(line, &m) != nil || m.ID == nil {
			continue
		}
		g.mu.Lock()
		if m.Method == nil {
			delete(g.inFlight, idKey(m.ID))
			g.answered.Broadcast()
		} else {
			g.serverPending[idKey(m.ID)] = true
		}
		g.mu.Unlock()
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
