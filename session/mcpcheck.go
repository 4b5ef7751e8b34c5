package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sbx-sandbox/sbx/pipeline"
	"github.com/sbx-sandbox/sbx/pipeline/settings"
)

// mcpVerdict is what the gate does with one client line: pass it to the
// SDK (code 0), answer it to the client, or, for a malformed answer to a
// request of the server's (toServer), answer the server in its place.
type mcpVerdict struct {
	id       json.RawMessage // the id to answer (nil: null)
	code     int
	msg      string
	toServer bool
}

// maxMCPDepth bounds the nesting of a message, well below the SDK's own
// limit (1,000, past which it ends the session).
const maxMCPDepth = 256

// mcpMembers are the members a JSON-RPC 2.0 message may have.
var mcpMembers = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// verdict decides a trimmed, non-empty line. A message without a method
// is a response only when its id is that of a request of the server's
// still unanswered; any other is answered to the client with a null id
// (its own id could be one of its requests in flight).
func (g *mcpGate) verdict(line []byte) mcpVerdict {
	if line[0] == '[' {
		return mcpVerdict{code: -32600, msg: "JSON-RPC batches are not supported: send one message per line"}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return mcpVerdict{code: -32700, msg: "parse error: " + err.Error()}
	}
	key := idKey(m["id"])
	_, method := m["method"]
	g.mu.Lock()
	response := !method && key != "" && g.serverPending[key]
	g.mu.Unlock()
	refuse := func(code int, msg string) mcpVerdict {
		v := mcpVerdict{code: code, msg: msg, toServer: response}
		if key != "" && (method || response) && !idTwice(line) {
			v.id = m["id"]
		}
		return v
	}
	if msg := g.shape(line, m, method, key, response); msg != "" {
		return refuse(-32600, msg)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case response:
		delete(g.serverPending, key)
	case method && m["id"] != nil && g.inFlight[key]:
		return refuse(-32600, "this id is in use by a request in flight; ids are never reused in a session")
	case method && m["id"] != nil:
		g.inFlight[key] = true
	}
	return mcpVerdict{}
}

// shape returns why a parsed message is not one the SDK reads as the
// client wrote it ("" when it is).
func (g *mcpGate) shape(line []byte, m map[string]json.RawMessage, method bool, key string, response bool) string {
	if d := depth(line); d > maxMCPDepth {
		return fmt.Sprintf("nested %d deep; at most %d", d, maxMCPDepth)
	}
	n, err := settings.ParseJSON("message", line)
	switch {
	case err != nil:
		// Valid to Go's decoder, but with a key twice (or not UTF-8).
		return "the message cannot be read one way only: " + err.Error()
	case n.Kind != settings.KindObject:
		return "a JSON-RPC message is an object"
	}
	if k := foldTwin(n); k != "" {
		return fmt.Sprintf("keys that differ only in case (%q): the message cannot be read one way only", k)
	}
	for _, k := range n.Keys {
		if !slices.Contains(mcpMembers, k) {
			return fmt.Sprintf("%q is not a member of a JSON-RPC 2.0 message", k)
		}
	}
	if v := n.Fields["jsonrpc"]; v == nil || v.Kind != settings.KindString || v.Str != "2.0" {
		return `"jsonrpc" must be "2.0"`
	}
	if m["id"] != nil && key == "" {
		return "an id is a string or an integer between -2^53 and 2^53, as sent back unchanged"
	}
	if method {
		if n.Fields["method"].Kind != settings.KindString || m["result"] != nil || m["error"] != nil {
			return "a request's method is a string, and a request has no result or error"
		}
		return ""
	}
	if !response {
		return "neither a request (no method) nor the answer to a request of the server's"
	}
	return responseShape(n)
}

// responseShape checks a response: exactly one of result and error, an
// error an object with an integer code and a string message.
func responseShape(n *settings.Node) string {
	r, e := n.Fields["result"], n.Fields["error"]
	if (r == nil) == (e == nil) {
		return "a response has a result or an error, not both"
	}
	if e == nil {
		return ""
	}
	if e.Kind != settings.KindObject {
		return "an error is an object"
	}
	c, msg := e.Fields["code"], e.Fields["message"]
	if c == nil || c.Kind != settings.KindNumber || msg == nil || msg.Kind != settings.KindString {
		return "an error has a number code and a string message"
	}
	if _, err := strconv.ParseInt(c.Number.String(), 10, 32); err != nil {
		return "an error's code is an integer"
	}
	return ""
}

// maxExactID bounds integer ids: the SDK reads them as floating-point
// numbers, exact up to 2^53 (2^53+1 came back as 2^53, and two requests
// then shared one id).
const maxExactID = 1 << 53

// idKey is the identity of a JSON-RPC id as the SDK reads it, "" for one
// it would not send back as the client wrote it: null, a number that is
// not an integer within ±2^53 (7.0, 1.5, 1e3 and 2^53+1 come back as other
// numbers), a string that is not UTF-8 or whose escapes hold no character
// (a lone surrogate comes back as U+FFFD).
func idKey(raw json.RawMessage) string {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if raw == nil || !utf8.Valid(raw) || d.Decode(&v) != nil {
		return ""
	}
	switch x := v.(type) {
	case string:
		if pipeline.LostInDecoding(raw, x) {
			return ""
		}
		return "s:" + x
	case json.Number:
		i, err := strconv.ParseInt(x.String(), 10, 64)
		if err != nil || i > maxExactID || i < -maxExactID {
			return ""
		}
		return "n:" + strconv.FormatInt(i, 10)
	}
	return ""
}

// idTwice reports whether a message names its id twice ("id" and
// "\u0069d"): Go's decoder keeps the last, so no answer could be paired
// with the id the client reads.
func idTwice(line []byte) bool {
	d := json.NewDecoder(bytes.NewReader(line))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	n := 0
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return true
		}
		if k == "id" {
			n++
		}
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return true
		}
	}
	return n > 1
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
