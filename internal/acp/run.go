package acp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/token"
)

// DefaultServer is where metis acp looks for a server by default.
const DefaultServer = "http://127.0.0.1:8421"

// defaultServer is DefaultServer; tests point it elsewhere.
var defaultServer = DefaultServer

// probeTimeout bounds the first GET /sessions.
const probeTimeout = 2 * time.Second

// Options are what the command's caller provides.
type Options struct {
	// StartServer starts a metis server in this process on addr,
	// configured as `metis serve` would be with args, and returns a
	// function that stops it. Nil: never start one.
	StartServer func(ctx context.Context, addr string, args []string) (stop func(), err error)
}

// Run runs `metis acp [--server URL] [--token-file F] [--model M] [--home DIR]
// [--demo-delay D] [--log-file F] [--log-level L] [--editor-fs=false]`: an ACP agent on stdin
// and stdout over the metis server at --server, started in-process when
// the default address does not answer. Only protocol messages go to
// stdout; logs go to stderr or --log-file. It returns the exit code: 0
// when the editor closes stdin (or ctx ends).
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, opts Options) int {
	// An editor that closes its end of stdout before the agent exits
	// must not kill it with SIGPIPE on a last write: the write fails,
	// and the agent ends as the closed stdin tells it to (exit 0).
	signal.Ignore(syscall.SIGPIPE)
	fs := flag.NewFlagSet("metis acp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	serverURL := fs.String("server", "", "metis server URL: http(s)://host:port or unix:///path/metis.sock (default $METIS_SERVER, else the socket <home>/metis.sock when a server answers on it, else "+DefaultServer+")")
	model := fs.String("model", "", "model of the sessions it creates (default the server's)")
	home := fs.String("home", "", "state directory of an in-process server (default $METIS_HOME, else ~/.metis)")
	demoDelay := fs.Duration("demo-delay", 0, "pause between builtin:demo deltas of an in-process server (default the server's)")
	tokenFile := fs.String("token-file", "", "file holding the server's bearer token (default $"+token.EnvVar+", else <home>/token, sent only to the server running on that home, over https or its unix socket; never over plain http beyond loopback)")
	logFile := fs.String("log-file", "", "write logs to this file instead of stderr")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	editorTerminal := fs.Bool("editor-terminal", true, "show each shell call's live output in a terminal of the editor when it offers terminals; the command runs on the server, in its sandbox: the terminal runs only `metis tool-output`, a read-only view of the call's output")
	editorFS := fs.Bool("editor-fs", true, "let the session's file tools read the editor's buffers and write through it when the editor offers fs/read_text_file and fs/write_text_file (the server checks every path first and uses the disk when the editor does not answer)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: metis acp [--server URL] [--token-file F] [--model M] [--home DIR] [--demo-delay D] [--log-file F] [--log-level L] [--editor-fs=false] [--editor-terminal=false]")
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(stderr, "metis acp: log-level:", err)
		return 2
	}
	logOut := stderr
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintln(stderr, "metis acp:", err)
			return 1
		}
		defer f.Close()
		logOut = f
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))

	base := strings.TrimRight(client.Locate(ctx, client.LocateOptions{Server: *serverURL, Home: *home, Fallback: defaultServer}), "/")
	c := client.New(base)
	c.Logger = log
	tok, err := token.ForClient(base, *tokenFile, *home)
	if err != nil {
		fmt.Fprintln(stderr, "metis acp:", err)
		return 1
	}
	c.Token = tok
	if err := probe(ctx, c); err != nil {
		if base != defaultServer || opts.StartServer == nil {
			fmt.Fprintf(stderr, "metis acp: no server at %s: %v\n", base, err)
			return 1
		}
		var serveArgs []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "home":
				serveArgs = append(serveArgs, "--home", *home)
			case "demo-delay":
				serveArgs = append(serveArgs, "--demo-delay", demoDelay.String())
			}
		})
		stop, err := opts.StartServer(ctx, hostPort(base), serveArgs)
		if err != nil {
			fmt.Fprintf(stderr, "metis acp: no server at %s, and starting one failed: %v\n", base, err)
			return 1
		}
		defer stop()
		log.Info("started an in-process server", "addr", hostPort(base))
	}
	var mirror *Mirror
	if *editorTerminal {
		if mirror, err = mirrorOf(base, *tokenFile, *home); err != nil {
			log.Warn("shell calls are not mirrored in the editor's terminals", "err", err)
		}
	}
	serve(ctx, c, *model, *editorFS, mirror, stdin, stdout, log)
	return 0
}

// mirrorOf is how an editor's terminal starts `metis tool-output` on
// the server at base: this binary, with the flags that find the same
// server and token. A token from $METIS_TOKEN is passed in the
// terminal's environment (never on its command line).
func mirrorOf(base, tokenFile, home string) (*Mirror, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	m := &Mirror{Command: exe, Args: []string{"--server", base}}
	if tokenFile != "" {
		if tokenFile, err = filepath.Abs(tokenFile); err != nil {
			return nil, err
		}
		m.Args = append(m.Args, "--token-file", tokenFile)
	} else if v, ok := os.LookupEnv(token.EnvVar); ok {
		m.Env = append(m.Env, sdk.EnvVariable{Name: token.EnvVar, Value: v})
	}
	if home != "" {
		if home, err = filepath.Abs(home); err != nil {
			return nil, err
		}
		m.Args = append(m.Args, "--home", home)
	}
	return m, nil
}

// Serve runs the ACP agent over c on in and out until in ends or ctx is
// done, and returns once every request it was handling has returned.
// Turns still running on the server are left running.
func Serve(ctx context.Context, c *client.Client, model string, in io.Reader, out io.Writer, log *slog.Logger) {
	serve(ctx, c, model, true, nil, in, out, log)
}

// serve is Serve with --editor-fs and the mirror of --editor-terminal
// (nil: no terminals).
func serve(ctx context.Context, c *client.Client, model string, editorFS bool, mirror *Mirror, in io.Reader, out io.Writer, log *slog.Logger) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	a := newAgent(actx, c, model, editorFS, log)
	a.terms.mirror = mirror
	w := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	conn := sdk.NewAgentSideConnection(a, w, pr)
	conn.SetLogger(log)
	a.conn = conn
	guardDone := make(chan error, 1)
	go func() { guardDone <- guard(in, pw, w) }()

	select {
	case <-conn.Done():
		log.Info("the editor closed the connection")
	case <-ctx.Done():
		log.Info("stopping", "cause", context.Cause(ctx))
		_ = pw.CloseWithError(ctx.Err()) // the SDK's reader ends
		if cl, ok := in.(io.Closer); ok {
			_ = cl.Close() // the guard's reader ends, where the reader allows it
		}
	}
	cancel()
	a.wait()
	a.waitEditors()   // editorfs.go: ended with actx
	a.terms.wg.Wait() // terminal.go: releases, bounded
	a.clearMCP()      // mcp.go
	_ = pr.Close()
	select {
	case err := <-guardDone:
		if err != nil && !errors.Is(err, io.ErrClosedPipe) {
			log.Debug("input", "err", err)
		}
	case <-ctx.Done():
		// A read of the process's stdin that Close cannot interrupt: the
		// process is exiting anyway.
	}
}

// wait returns once no handler of the agent runs any more, and keeps new
// ones from starting.
func (a *Agent) wait() {
	a.mu.Lock()
	a.stopping = true
	a.mu.Unlock()
	a.inflight.Wait()
}

// enter registers a long handler (prompt, load); false once stopping.
func (a *Agent) enter() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return false
	}
	a.inflight.Add(1)
	return true
}

var errStopping = sdk.NewInternalError(map[string]any{"error": "the agent is stopping"})

// probe checks that a metis server answers GET /sessions.
func probe(ctx context.Context, c *client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err := c.Sessions(ctx)
	return err
}

// hostPort is the host:port of a base URL.
func hostPort(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "127.0.0.1:8421"
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return net.JoinHostPort(u.Host, "80")
	}
	return u.Host
}
