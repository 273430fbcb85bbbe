package tui

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/token"
	"github.com/metis-agent/metis/protocol"
)

// probeTimeout bounds the first GET /sessions.
const probeTimeout = 2 * time.Second

// Options are what the command's caller provides.
type Options struct {
	// StartServer starts a metis server in this process on addr,
	// configured as `metis serve` would be with args. Nil: never start
	// one.
	StartServer func(ctx context.Context, addr string, args []string) (Started, error)
}

// Started is a server StartServer started.
type Started struct {
	URL       string // its base URL
	TokenFile string // the file of the token it requires, "" for none
	Stop      func() // shuts it down
}

// Run runs `metis` / `metis chat [--server URL] [--session ID | --continue]
// [--home DIR] [--demo-delay D] [--token-file F] [--allow-home]`: find the
// server (starting one in-process when the default address does not
// answer), create a session in the current directory, resume --session,
// or with --continue the current directory's most recently active one,
// and run the chat screen until the user quits. /new and the session
// picker end the screen with another session to open: Run opens it and
// starts the screen again. It returns the exit code.
func Run(ctx context.Context, args []string, env cli.Env, opts Options) int {
	fs := flag.NewFlagSet("metis chat", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	serverURL := fs.String("server", "", cli.ServerUsage)
	sessionID := fs.String("session", "", "resume this session instead of creating one in the current directory")
	cont := fs.Bool("continue", false, "resume the most recently active session of the current directory (a new one if it has none)")
	fs.BoolVar(cont, "c", false, "short for --continue")
	home := fs.String("home", "", "state directory of an in-process server (default $METIS_HOME, else ~/.metis)")
	demoDelay := fs.Duration("demo-delay", 0, "pause between builtin:demo deltas of an in-process server (default the server's)")
	tokenFile := cli.TokenFlag(fs)
	allowHome := fs.Bool("allow-home", false, "use the current directory as the workspace even when it is your home directory")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.Stderr, "usage: metis [chat] [--server URL] [--session ID | --continue] [--home DIR] [--demo-delay D] [--token-file F] [--allow-home]")
		return 2
	}
	if *cont && *sessionID != "" {
		fmt.Fprintln(env.Stderr, "metis: --session and --continue contradict each other")
		return 2
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

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	base := strings.TrimRight(client.Locate(ctx, client.LocateOptions{Server: *serverURL, Home: *home}), "/")
	c, err := cli.NewClient(base, *tokenFile, *home)
	if err != nil {
		fmt.Fprintln(env.Stderr, "metis:", err)
		return 1
	}
	c.Logger = discardLogger()

	var note string
	if err := probe(ctx, c); err != nil {
		if client.IsUnauthorized(err) {
			fmt.Fprintf(env.Stderr, "metis: the server at %s needs its token: %v (give it with --token-file or $METIS_TOKEN)\n", base, err)
			return 1
		}
		if base != cli.DefaultServer || opts.StartServer == nil {
			fmt.Fprintf(env.Stderr, "metis: no server at %s: %v\n", base, err)
			return 1
		}
		srv, err := opts.StartServer(ctx, hostPort(base), serveArgs)
		if err != nil {
			fmt.Fprintf(env.Stderr, "metis: no server at %s, and starting one failed: %v\n", base, err)
			return 1
		}
		defer srv.Stop()
		if tf := srv.TokenFile; tf != "" { // its config.yaml asks for the token
			if c.Token, err = token.Read(tf); err != nil {
				fmt.Fprintln(env.Stderr, "metis:", err)
				return 1
			}
		}
		note = "in-process server on " + strings.TrimPrefix(srv.URL, "http://") + " (stops when you quit)"
		base = strings.TrimRight(srv.URL, "/")
	}

	id := *sessionID
	if *cont {
		if id, err = lastSession(ctx, c); err != nil {
			fmt.Fprintln(env.Stderr, "metis:", cli.ErrText(err))
			return 1
		}
	}
	sess, err := openSession(ctx, c, id, *allowHome)
	if err != nil {
		fmt.Fprintln(env.Stderr, "metis:", cli.ErrText(err))
		return 1
	}
	var carry handoff
	for {
		carry, err = runScreen(ctx, c, sess, withDashboard(note, base, sess.ID), carry, env)
		if err != nil {
			fmt.Fprintln(env.Stderr, "metis:", err)
			return 1
		}
		if carry.next == "" {
			break
		}
		if sess, err = openSession(ctx, c, carry.next, false); err != nil {
			fmt.Fprintln(env.Stderr, "metis:", cli.ErrText(err))
			return 1
		}
	}
	fmt.Fprintf(env.Stdout, "session %s — resume with: metis --session %s (or metis --continue in %s)\n", sess.ID, sess.ID, sess.WorkspacePath)
	return 0
}

// handoff is what one screen leaves the next: the session to open, the
// composer's draft and the status line's notice.
type handoff struct{ next, draft, flash string }

// runScreen runs the chat screen on one session until the user quits
// or asks for another session, which it returns with what the next
// screen starts with.
func runScreen(ctx context.Context, c *client.Client, sess client.Session, note string, from handoff, env cli.Env) (handoff, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := newFeed()
	m := newModel(ctx, c, f, options{sessionID: sess.ID, workspace: sess.WorkspacePath, note: note, title: sess.Title,
		draft: from.draft, flash: from.flash})
	followDone := make(chan struct{})
	go func() {
		defer close(followDone)
		err := c.Follow(ctx, sess.ID, client.FollowOptions{Filter: protocol.PresetFull, OnUpdate: f.push})
		if ctx.Err() == nil {
			f.ended(err)
		}
	}()

	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithOutput(env.Stdout))
	_, err := p.Run()
	cancel()
	<-followDone
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, tea.ErrInterrupted) {
		return handoff{}, err
	}
	return handoff{next: m.next, draft: m.nextDraft, flash: m.nextFlash}, nil
}

// lastSession is the id of the current directory's most recently active
// top-level session ("" when it has none: a new one is made).
func lastSession(ctx context.Context, c *client.Client) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(wd); err == nil {
		wd = real // the server keeps the resolved path
	}
	list, err := c.Sessions(ctx)
	if err != nil {
		return "", fmt.Errorf("list the sessions: %w", err)
	}
	if order := PickOrder(list, wd); len(order) > 0 && order[0].WorkspacePath == wd {
		return order[0].ID, nil
	}
	return "", nil
}

// probe checks that a metis server answers GET /sessions.
func probe(ctx context.Context, c *client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err := c.Sessions(ctx)
	return err
}

// openSession resumes id, or creates a session in the working directory
// (allowHome confirms it when it is the home directory). A directory the
// server refuses as a workspace is explained.
func openSession(ctx context.Context, c *client.Client, id string, allowHome bool) (client.Session, error) {
	if id != "" {
		a, err := c.Attach(ctx, id)
		if client.IsNotFound(err) {
			return client.Session{}, fmt.Errorf("session %s not found", id)
		}
		if err != nil {
			return client.Session{}, err
		}
		return a.Session, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return client.Session{}, err
	}
	s, err := c.CreateSessionWith(ctx, wd, client.CreateOptions{AllowHome: allowHome})
	switch {
	case client.IsCode(err, protocol.CodeWorkspaceHome):
		return client.Session{}, fmt.Errorf("%s is your home directory: a session here would let the agent's tools read and change every file in it.\n"+
			"Start metis in a project directory (cd ~/some-project && metis), or run `metis --allow-home` to use your home anyway", wd)
	case client.IsCode(err, protocol.CodeWorkspaceForbidden):
		return client.Session{}, fmt.Errorf("%s cannot be a workspace (%s).\nStart metis in a project directory", wd, apiMessage(err))
	case err != nil:
		return client.Session{}, fmt.Errorf("create a session in %s: %w", wd, err)
	}
	return s, nil
}

// apiMessage is the server's message of an API error.
func apiMessage(err error) string {
	var e *client.APIError
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
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

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// withDashboard adds the browser dashboard's URL for the session to the
// status line's standing note.
func withDashboard(note, base, sessionID string) string {
	if _, ok := client.ParseSocketURL(base); ok {
		return note // a browser cannot reach a unix socket
	}
	d := "dashboard " + base + "/#/s/" + sessionID
	if note == "" {
		return d
	}
	return note + " · " + d
}
