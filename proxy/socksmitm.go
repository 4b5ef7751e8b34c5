package proxy

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
)

// boundSOCKS is a SOCKS5 stream to a host a credential is bound to,
// handed to the HTTP side as if the client had asked for a CONNECT there:
// goproxy terminates its TLS (or reads its plain HTTP), so the
// placeholder is swapped in and every response searched, as for the
// proxy's CONNECT. A tunnel would give the sandbox the host's answers,
// real values included, untouched.
type boundSOCKS struct {
	net.Conn
	head []byte // the CONNECT response so far, until it is whole
	done bool   // the response was swallowed
}

// connectHead is the CONNECT request that stands for a SOCKS5 request to
// host:port; false when host could break the request line.
func connectHead(host string, port int, token string) (string, bool) {
	if host == "" || strings.ContainsAny(host, " \t\r\n") {
		return "", false
	}
	hp := net.JoinHostPort(host, strconv.Itoa(port))
	h := "CONNECT " + hp + " HTTP/1.1\r\nHost: " + hp + "\r\n"
	if token != "" {
		h += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("sbx:"+token)) + "\r\n"
	}
	return h + "\r\n", true
}

// handOverSOCKS returns the connection and reader that the HTTP side
// serves: the CONNECT request, then what the client sends.
func handOverSOCKS(c net.Conn, br *bufio.Reader, head string) (net.Conn, *bufio.Reader) {
	r := bufio.NewReaderSize(io.MultiReader(strings.NewReader(head), br), 16<<10)
	return &boundSOCKS{Conn: c}, r
}

// errConnectRefused ends a handed-over SOCKS5 stream whose CONNECT was
// not answered 200 (the client was told it succeeded: it is closed).
var errConnectRefused = errors.New("sbx proxy: the CONNECT standing for a SOCKS5 request was refused")

// Write swallows the answer to the CONNECT (the client had its SOCKS5
// reply), and passes the rest on.
func (b *boundSOCKS) Write(p []byte) (int, error) {
	if b.done {
		return b.Conn.Write(p)
	}
	b.head = append(b.head, p...)
	end := bytes.Index(b.head, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b.head) > 4096 {
			b.Conn.Close()
			return 0, errConnectRefused
		}
		return len(p), nil
	}
	status := b.head[:end]
	if !bytes.HasPrefix(status, []byte("HTTP/1.0 200 ")) && !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		b.Conn.Close()
		return 0, errConnectRefused
	}
	rest := b.head[end+4:]
	b.done, b.head = true, nil
	if len(rest) > 0 {
		if _, err := b.Conn.Write(rest); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// CloseWrite and CloseRead pass half-closes on (see frontConn).
func (b *boundSOCKS) CloseWrite() error {
	if hc, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return hc.CloseWrite()
	}
	return b.Conn.Close()
}

// CloseRead: see CloseWrite.
func (b *boundSOCKS) CloseRead() error {
	if hc, ok := b.Conn.(interface{ CloseRead() error }); ok {
		return hc.CloseRead()
	}
	return nil
}

// SetLinger passes frontConn's reset on.
func (b *boundSOCKS) SetLinger(sec int) error {
	if l, ok := b.Conn.(interface{ SetLinger(int) error }); ok {
		return l.SetLinger(sec)
	}
	return nil
}
