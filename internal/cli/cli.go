// Package cli implements the client commands of the metis binary
// (contract §1): new, sessions, send and tail. Each finds the server with
// client.Locate: --server URL, else $METIS_SERVER, else the unix socket
// <home>/metis.sock when a server answers on it, else
// http://127.0.0.1:8421. It sends its bearer token when it has one
// (--token-file, $METIS_TOKEN, or <home>/token to the server running on
// that home only: see token.ForClient).
//
// cli is an edge: it imports the public client and protocol packages
// and the token leaf.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/token"
)

// DefaultServer is the server URL when neither --server nor
// $METIS_SERVER is given and no server answers on the home's socket.
const DefaultServer = client.DefaultServer

// ServerUsage is the usage of a client command's --server flag.
const ServerUsage = "metis server URL: http(s)://host:port or unix:///path/metis.sock (default $METIS_SERVER, else the socket <home>/metis.sock when a server answers on it, else " + DefaultServer + ")"

// Env is where a command reads and writes.
type Env struct {
	Stdout, Stderr io.Writer
	// Stdin is where metis send reads the answers to approval requests,
	// when it is a terminal (nil: none).
	Stdin io.Reader
}

// common holds the flags every client command has.
type common struct {
	server    *string
	tokenFile *string
}

func newFlags(name string, env Env) (*flag.FlagSet, *common) {
	fs := flag.NewFlagSet("metis "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	c := &common{server: fs.String("server", "", ServerUsage)}
	c.tokenFile = TokenFlag(fs)
	return fs, c
}

// TokenUsage is the usage of a client command's --token-file flag.
const TokenUsage = "file holding the server's bearer token (default $" + token.EnvVar + ", else <home>/token, sent only to the server running on that home, over https or its unix socket; never over plain http beyond loopback)"

// TokenFlag defines --token-file on fs.
func TokenFlag(fs *flag.FlagSet) *string {
	return fs.String("token-file", "", TokenUsage)
}

// NewClient returns a client of server carrying the token found for it
// (see token.ForClient; home "" is $METIS_HOME, else ~/.metis); the
// error names where a bad token came from, or why it is not sent.
func NewClient(server, tokenFile, home string) (*client.Client, error) {
	tok, err := token.ForClient(server, tokenFile, home)
	if err != nil {
		return nil, err
	}
	c := client.New(server)
	c.Token = tok
	return c, nil
}

// client returns the command's client of the server client.Locate
// chooses, or prints why not.
func (c *common) client(ctx context.Context, name string, env Env) (*client.Client, bool) {
	cl, err := NewClient(client.Locate(ctx, client.LocateOptions{Server: *c.server}), *c.tokenFile, "")
	if err != nil {
		fmt.Fprintf(env.Stderr, "metis %s: %v\n", name, err)
		return nil, false
	}
	return cl, true
}

// parseInterleaved parses flags that may come before or after the
// positional arguments ("metis tail SESSION --json").
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// explain adds a hint to a 401: where the token comes from.
func explain(err error) string {
	if client.IsUnauthorized(err) {
		return ErrText(err) + " (give the server's token with --token-file or $" + token.EnvVar + ")"
	}
	return ErrText(err)
}
