// Package cli implements the client commands of the metis binary
// (contract §1): sessions, send and tail. Each finds the server with
// --server URL (default $METIS_SERVER, else http://127.0.0.1:8421).
//
// cli is an edge: it imports the public client and protocol packages.
package cli

import (
	"flag"
	"io"
	"os"
)

// DefaultServer is the server URL when neither --server nor
// $METIS_SERVER is given.
const DefaultServer = "http://127.0.0.1:8421"

// ServerURL returns the --server default: $METIS_SERVER or DefaultServer.
func ServerURL() string {
	if s := os.Getenv("METIS_SERVER"); s != "" {
		return s
	}
	return DefaultServer
}

// Env is where a command reads and writes.
type Env struct {
	Stdout, Stderr io.Writer
}

func newFlags(name string, env Env) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("metis "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	server := fs.String("server", ServerURL(), "metis server URL ($METIS_SERVER)")
	return fs, server
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
