package proxy

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// SOCKS5 reply codes (RFC 1928).
const (
	socksSucceeded          = 0x00
	socksGeneralFailure     = 0x01
	socksNotAllowed         = 0x02 // "connection not allowed by ruleset"
	socksHostUnreachable    = 0x04
	socksCommandUnsupported = 0x07
	socksAddrUnsupported    = 0x08
)

// SOCKSRequest is a parsed SOCKS5 CONNECT request.
type SOCKSRequest struct {
	Cmd  byte
	Host string // a name, or an address in text form
	Port int
}

// ReadSOCKSGreeting reads the client's method list and reports whether
// method m is among them (0: no authentication, 2: user/password).
func ReadSOCKSGreeting(r io.Reader) (bool, error) { return readGreeting(r, 0) }

func readGreeting(r io.Reader, want byte) (bool, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return false, err
	}
	if hdr[0] != 5 {
		return false, fmt.Errorf("socks: version %d", hdr[0])
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return false, err
	}
	for _, m := range methods {
		if m == want {
			return true, nil
		}
	}
	return false, nil
}

// socksUserPass reads an RFC 1929 user/password sub-negotiation and
// checks the password against the token.
func socksUserPass(c io.ReadWriter, token string) bool {
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil || hdr[0] != 1 {
		return false
	}
	user := make([]byte, hdr[1])
	if _, err := io.ReadFull(c, user); err != nil {
		return false
	}
	var plen [1]byte
	if _, err := io.ReadFull(c, plen[:]); err != nil {
		return false
	}
	pass := make([]byte, plen[0])
	if _, err := io.ReadFull(c, pass); err != nil {
		return false
	}
	if subtle.ConstantTimeCompare(pass, []byte(token)) != 1 {
		c.Write([]byte{1, 1})
		return false
	}
	_, err := c.Write([]byte{1, 0})
	return err == nil
}

// ReadSOCKSRequest reads a request. Errors of type *SOCKSError carry the
// reply code to send.
func ReadSOCKSRequest(r io.Reader) (*SOCKSRequest, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	if hdr[0] != 5 || hdr[2] != 0 {
		return nil, &SOCKSError{socksGeneralFailure, "malformed request"}
	}
	req := &SOCKSRequest{Cmd: hdr[1]}
	switch hdr[3] {
	case 1:
		var a [4]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return nil, err
		}
		req.Host = netip.AddrFrom4(a).String()
	case 4:
		var a [16]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return nil, err
		}
		req.Host = netip.AddrFrom16(a).Unmap().String()
	case 3:
		var n [1]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return nil, err
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(r, name); err != nil {
			return nil, err
		}
		if n[0] == 0 {
			return nil, &SOCKSError{socksGeneralFailure, "empty host name"}
		}
		req.Host = string(name)
	default:
		return nil, &SOCKSError{socksAddrUnsupported, "address type not supported"}
	}
	var p [2]byte
	if _, err := io.ReadFull(r, p[:]); err != nil {
		return nil, err
	}
	req.Port = int(binary.BigEndian.Uint16(p[:]))
	if req.Cmd != 1 {
		return req, &SOCKSError{socksCommandUnsupported, "only CONNECT is supported (no BIND or UDP ASSOCIATE)"}
	}
	return req, nil
}

// SOCKSError is a request refused with a SOCKS reply code.
type SOCKSError struct {
	Code byte
	Msg  string
}

func (e *SOCKSError) Error() string { return "socks: " + e.Msg }

func socksReply(w io.Writer, code byte, bound net.Addr) error {
	reply := []byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0}
	if ta, ok := bound.(*net.TCPAddr); ok && code == socksSucceeded {
		if ip4 := ta.IP.To4(); ip4 != nil {
			copy(reply[4:8], ip4)
		} else if ip16 := ta.IP.To16(); ip16 != nil {
			reply = append([]byte{5, code, 0, 4}, ip16...)
			reply = append(reply, 0, 0)
		}
		binary.BigEndian.PutUint16(reply[len(reply)-2:], uint16(ta.Port))
	}
	_, err := w.Write(reply)
	return err
}

// serveSOCKS serves one SOCKS5 connection whose first byte was peeked.
// A request to a host a credential is bound to is not tunnelled: the
// connection and reader it returns are served as a CONNECT there (see
// boundSOCKS); nil when it is done with c.
func (s *Server) serveSOCKS(c net.Conn, br *bufio.Reader) (net.Conn, *bufio.Reader) {
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	method := byte(0)
	if s.Token != "" {
		method = 2 // user/password: the token
	}
	offered, err := readGreeting(br, method)
	if err != nil {
		return nil, nil
	}
	if !offered {
		c.Write([]byte{5, 0xff})
		return nil, nil
	}
	if _, err := c.Write([]byte{5, method}); err != nil {
		return nil, nil
	}
	if method == 2 && !socksUserPass(struct {
		io.Reader
		io.Writer
	}{br, c}, s.Token) {
		return nil, nil
	}
	req, err := ReadSOCKSRequest(br)
	if err != nil {
		var se *SOCKSError
		if errors.As(err, &se) {
			socksReply(c, se.Code, nil)
			if req != nil {
				s.deny("socks5", req.Host, req.Port, &denial{reason: se.Msg})
			}
		}
		return nil, nil
	}
	c.SetReadDeadline(time.Time{})
	ctx := context.Background()
	t, d := s.authorize(ctx, req.Host, req.Port)
	if d != nil {
		s.deny("socks5", req.Host, req.Port, d)
		socksReply(c, socksNotAllowed, nil)
		return nil, nil
	}
	if s.terminates(t.host, t.port) {
		head, ok := connectHead(req.Host, req.Port, s.Token)
		if !ok {
			socksReply(c, socksGeneralFailure, nil)
			return nil, nil
		}
		if socksReply(c, socksSucceeded, nil) != nil {
			return nil, nil
		}
		return handOverSOCKS(c, br, head)
	}
	up, err := s.dial(ctx, t)
	rule, src := ruleInfo(t.rule)
	ev := Event{Proto: "socks5", Host: t.host.String(), Port: t.port, Decision: "allow", Rule: rule, Source: src}
	if err != nil {
		ev.Error = err.Error()
		s.audit(ev)
		socksReply(c, socksHostUnreachable, nil)
		return nil, nil
	}
	ev.Addr = up.RemoteAddr().String()
	if err := socksReply(c, socksSucceeded, up.LocalAddr()); err != nil {
		up.Close()
		return nil, nil
	}
	// Bytes the client sent with its request are still in br.
	uc := s.upstream(up, t, ev)
	relay(c, br, uc)
	uc.Close()
	return nil, nil
}

// relay copies both ways until both directions are done, half-closing as
// each ends, and returns the bytes sent up (client to server) and down.
func relay(client net.Conn, clientR io.Reader, up net.Conn) (int64, int64) {
	upc := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(up, clientR)
		if hc, ok := up.(interface{ CloseWrite() error }); ok {
			hc.CloseWrite()
		} else {
			up.Close()
		}
		upc <- n
	}()
	down, _ := io.Copy(client, up)
	if hc, ok := client.(interface{ CloseWrite() error }); ok {
		hc.CloseWrite()
	}
	// The client may keep its side open; once the server is done, stop
	// waiting after a grace period.
	select {
	case n := <-upc:
		return n, down
	case <-time.After(5 * time.Second):
		client.Close()
		return <-upc, down
	}
}
