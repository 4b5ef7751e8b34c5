//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// runRelay is the reference a proxy is held to on this host: a relay with
// no sandbox and no checks that copies each loopback connection to target
// and back with plain reads and writes. It prints its address, then serves
// until killed.
func runRelay(target string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go relayOne(c, target)
	}
}

func relayOne(c net.Conn, target string) {
	defer c.Close()
	u, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer u.Close()
	go func() {
		io.CopyBuffer(onlyWriter{u}, onlyReader{c}, make([]byte, 256<<10))
		u.(*net.TCPConn).CloseWrite()
	}()
	io.CopyBuffer(onlyWriter{c}, onlyReader{u}, make([]byte, 256<<10))
}

// onlyReader and onlyWriter hide splice paths: on this loopback plain
// copies measured faster, and they are what sbx's proxy does.
type onlyReader struct{ io.Reader }
type onlyWriter struct{ io.Writer }

// startRelay runs this program as a relay to target in its own process and
// returns its address and a function that stops it.
func startRelay(target string) (string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self, "-relay", target)
	// It ends with this program, however that ends (exitOn skips defers).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("relay to %s: %v", target, err)
	}
	return strings.TrimSpace(line), stop, nil
}
