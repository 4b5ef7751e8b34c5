package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/sbx-sandbox/sbx/session"
)

// cmdMCP serves the Model Context Protocol on stdin and stdout (the stdio
// transport): a sandboxed bash tool and read_file, every call through one
// session and its gate. An ask that no hook answers goes to the client's
// user when the client supports elicitation, and is denied otherwise.
// SIGINT, SIGTERM or SIGHUP (its terminal gone) ends it, as it ends sbx
// serve: the warm sandbox is thrown away.
func cmdMCP(args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var t toolFlags
	if code, err := t.parse("mcp", args, stderr); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, nil
		}
		return code, err
	}
	t.nonInteractive = true
	t.separateStreams = true // the bash tool's structured content has both
	s, err := t.openServer(stderr)
	if err != nil {
		return exitSbxError, err
	}
	defer s.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	err = s.MCPServer(versionString()).Run(ctx, session.MCPStdio(stdin, stdout))
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return exitSbxError, err
	}
	return 0, nil
}
