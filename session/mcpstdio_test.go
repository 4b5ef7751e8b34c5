package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpPeer is a client end of MCPStdio served by an MCP server with a tool
// "wait" that returns when release is closed.
type mcpPeer struct {
	t       *testing.T
	in      *io.PipeWriter
	out     *bufio.Scanner
	release chan struct{}
	done    chan error
}

func newMCPPeer(t *testing.T) *mcpPeer {
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	p := &mcpPeer{t: t, release: make(chan struct{}), done: make(chan error, 1)}
	mcp.AddTool(srv, &mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
		Word string `json:"word"`
	}) (*mcp.CallToolResult, any, error) {
		<-p.release
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Word}}}, nil, nil
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p.in, p.out = inW, bufio.NewScanner(outR)
	p.out.Buffer(nil, 1<<20)
	go func() { p.done <- srv.Run(context.Background(), MCPStdio(inR, outW)); outW.Close() }()
	t.Cleanup(func() { inW.Close() })
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	p.recv()
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return p
}

func (p *mcpPeer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

// recv returns the next message's id and error code (0: a result).
func (p *mcpPeer) recv() (string, int, string) {
	p.t.Helper()
	got := make(chan bool, 1)
	go func() { got <- p.out.Scan() }()
	select {
	case ok := <-got:
		if !ok {
			p.t.Fatalf("the server ended: %v", p.out.Err())
		}
	case <-time.After(10 * time.Second):
		p.t.Fatal("no answer in 10 s")
	}
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(p.out.Bytes(), &m); err != nil {
		p.t.Fatalf("%q: %v", p.out.Bytes(), err)
	}
	if m.Error != nil {
		return string(m.ID), m.Error.Code, m.Error.Message
	}
	return string(m.ID), 0, p.out.Text()
}

// Lines the SDK would end the session on, or read another way than the
// client, are answered with an error and the session goes on; a request
// reusing an id in flight gets an error, not silence.
func TestMCPStdioAnswersWhatTheSDKCannot(t *testing.T) {
	p := newMCPPeer(t)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{"word":"one"}}}`)
	tests := []struct {
		line, id string
		code     int
		msg      string
	}{
		{`[{"jsonrpc":"2.0","id":3,"method":"ping"}]`, "null", -32600, "batches"},
		{`[]`, "null", -32600, "batches"},
		{`not json`, "null", -32700, "parse error"},
		{`{"jsonrpc":"1.0","id":4,"method":"ping"}`, "4", -32600, `"jsonrpc" must be "2.0"`},
		{`{"id":5,"method":"ping"}`, "5", -32600, `"jsonrpc" must be "2.0"`},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "null", -32600, "an id is"},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"wait","arguments":{"word":"a","word":"b"}}}`, "6", -32600, `duplicate key "word"`},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"wait","arguments":{"word":"a","WORD":"b"}}}`, "7", -32600, "only in case"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "1", -32600, "in flight"},
		{`null`, "null", -32600, "is an object"},
		// The SDK ends the session past 1,000 levels.
		{`{"jsonrpc":"2.0","id":11,"method":"ping","params":{"_meta":{"x":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}}}`, "11", -32600, "nested"},
		// Ids the SDK would send back as another id (or not at all).
		{`{"jsonrpc":"2.0","id":1.0,"method":"ping"}`, "null", -32600, "an id is"},
		{`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, "null", -32600, "an id is"},
		{`{"jsonrpc":"2.0","id":99999999999999999999,"method":"ping"}`, "null", -32600, "an id is"},
		{`{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`, "null", -32600, "an id is"},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, "null", -32600, "an id is"},
		{`{"jsonrpc":"2.0","id":12,"Method":"ping"}`, "null", -32600, "not a member"},
		{`{"jsonrpc":"2.0","id":17,"\u0069d":18,"method":"ping"}`, "null", -32600, "one way only"},
		// The SDK ended the session on these.
		{`{"jsonrpc":"2.0","method":5}`, "null", -32600, "method is a string"},
		{`{"jsonrpc":"2.0","id":14,"method":{}}`, "14", -32600, "method is a string"},
		{`{"jsonrpc":"2.0"}`, "null", -32600, "neither a request"},
		{`{"jsonrpc":"2.0","id":15}`, "null", -32600, "neither a request"},
		{`{"jsonrpc":"2.0","id":5,"error":"x"}`, "null", -32600, "neither a request"},
		{`{"jsonrpc":"1.0","id":5,"result":{}}`, "null", -32600, `"jsonrpc" must be "2.0"`},
		{`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, "null", -32600, "an id is"},
		{"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}", "null", -32600, "not valid UTF-8"},
		{"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\",\"x\":\"\xff\"}", "8", -32600, "not valid UTF-8"},
	}
	for _, tt := range tests {
		p.send(tt.line)
		id, code, msg := p.recv()
		if id != tt.id || code != tt.code || !strings.Contains(msg, tt.msg) {
			t.Errorf("%s: id %s code %d %q, want id %s code %d %q", tt.line, id, code, msg, tt.id, tt.code, tt.msg)
		}
	}
	// An answer to no request of the server's is refused with a null id
	// (the client's own id 99 could be one of its requests in flight).
	p.send(`{"jsonrpc":"2.0","id":99,"result":{"a":1}}`)
	if id, code, msg := p.recv(); id != "null" || code != -32600 || !strings.Contains(msg, "neither a request") {
		t.Errorf("an answer to nothing: id %s code %d %q", id, code, msg)
	}
	p.send(`{"jsonrpc":"2.0","id":13,"method":"ping"}`)
	if id, code, _ := p.recv(); id != "13" || code != 0 {
		t.Errorf("after it: id %s code %d", id, code)
	}
	p.send("{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"ping\"} \t") // the SDK ended the session on the white space
	if id, code, _ := p.recv(); id != "16" || code != 0 {
		t.Errorf("a ping with white space after it: id %s code %d", id, code)
	}
	p.send(`{"jsonrpc":"2.0","id":"\u0061","method":"ping"}`)
	if id, code, _ := p.recv(); id != `"a"` || code != 0 {
		t.Errorf("an escaped string id: id %s code %d", id, code)
	}
	close(p.release)
	if id, code, text := p.recv(); id != "1" || code != 0 || !strings.Contains(text, "one") {
		t.Errorf("the call in flight: id %s code %d %s", id, code, text)
	}
	// The id is free again once answered.
	p.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if id, code, _ := p.recv(); id != "1" || code != 0 {
		t.Errorf("ping reusing an answered id: id %s code %d", id, code)
	}
	p.send(`{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"` + strings.Repeat("x", MaxMCPLine) + `"}}`)
	if id, code, msg := p.recv(); id != "null" || code != -32700 || !strings.Contains(msg, "longer than") {
		t.Errorf("an over-long line: id %s code %d %q", id, code, msg)
	}
	p.send(`{"jsonrpc":"2.0","id":10,"method":"ping"}`)
	if id, code, _ := p.recv(); id != "10" || code != 0 {
		t.Errorf("after an over-long line: id %s code %d", id, code)
	}
}

// FuzzMCPVerdict: whatever the gate passes on, the SDK's own decoder
// reads (one it cannot read ends the session), and an id the gate tracks
// comes back from the SDK's encoder as the same id.
func FuzzMCPVerdict(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"bash","arguments":{"command":"ls"}}}`,
		`{"jsonrpc":"2.0","id":7.0,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":5}`,
		`{"jsonrpc":"2.0","id":5,"error":{"code":"x","message":"m"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			return
		}
		g := &mcpGate{inFlight: map[string]bool{}, serverPending: map[string]bool{"n:5": true, "s:x": true}}
		if v := g.verdict(line); v.code != 0 {
			return
		}
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			t.Fatalf("the gate passed %q, the SDK cannot read it: %v", line, err)
		}
		if r, ok := msg.(*jsonrpc.Request); ok && r.ID.IsValid() {
			var m map[string]json.RawMessage
			_ = json.Unmarshal(line, &m)
			out, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: r.ID, Result: json.RawMessage("{}")})
			var back map[string]json.RawMessage
			_ = json.Unmarshal(out, &back)
			if idKey(back["id"]) != idKey(m["id"]) {
				t.Fatalf("id %s comes back as %s", m["id"], back["id"])
			}
		}
	})
}

// The end of input lets a call under way finish and be answered (sbx mcp
// exited at once, the call killed with no answer).
func TestMCPStdioAnswersCallsAfterEndOfInput(t *testing.T) {
	p := newMCPPeer(t)
	p.send(`{"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"wait","arguments":{"word":"done"}}}`)
	time.Sleep(100 * time.Millisecond)
	p.in.Close()
	time.Sleep(200 * time.Millisecond)
	close(p.release)
	if id, code, text := p.recv(); id != `"last"` || code != 0 || !strings.Contains(text, "done") {
		t.Errorf("after the end of input: id %s code %d %s", id, code, text)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Error("the server did not end after answering")
	}
}
