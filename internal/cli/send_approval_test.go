package cli_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/servertest"
)

// fakeTerminal is a terminal whose user types the given lines.
type fakeTerminal struct{ io.Reader }

func (fakeTerminal) Terminal() bool { return true }

func defaultMode(c *config.Config) { c.DefaultMode = permission.ModeDefault }

// TestSendAsksOnTheTerminal: y allows the call; n denies it with the
// reason typed, and send exits 3 (a call was refused); --approve-all and
// --deny-all answer without asking; without a terminal or a flag the
// request is denied at once, with a message, rather than waited on.
func TestSendAsksOnTheTerminal(t *testing.T) {
	h := servertest.Start(t, "", defaultMode)
	sid := h.CreateSession()
	write := func(name string) string {
		return `/tool write_file {"path": "` + name + `", "content": "x"}`
	}
	written := func(name string) bool {
		_, err := os.Stat(filepath.Join(h.Workspace, name))
		return err == nil
	}
	for _, tc := range []struct {
		name   string
		flags  []string
		stdin  io.Reader
		file   string
		code   int
		wrote  bool
		stderr string
	}{
		{"y allows", nil, fakeTerminal{strings.NewReader("y\n")}, "y.txt", 0, true, "y = allow once"},
		{"a allows for the session", nil, fakeTerminal{strings.NewReader("a\n")}, "a.txt", 0, true, "write_file(a.txt)"},
		{"n denies with a reason", nil, fakeTerminal{strings.NewReader("maybe\nn\nnot now\n")}, "n.txt", 3, false, "not now"},
		{"--approve-all", []string{"--approve-all"}, nil, "all.txt", 0, true, "allowed (--approve-all)"},
		{"--deny-all", []string{"--deny-all"}, fakeTerminal{strings.NewReader("y\n")}, "none.txt", 3, false, "denied (--deny-all)"},
		{"no terminal", nil, strings.NewReader("y\n"), "pipe.txt", 3, false, "no terminal to ask on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"--server", h.URL}, tc.flags...)
			args = append(args, sid, write(tc.file))
			code := cli.Send(context.Background(), args, cli.Env{Stdout: &out, Stderr: &errOut, Stdin: tc.stdin})
			if code != tc.code || written(tc.file) != tc.wrote || !strings.Contains(errOut.String(), tc.stderr) {
				t.Fatalf("exit %d (want %d), wrote %v (want %v); stderr:\n%s", code, tc.code, written(tc.file), tc.wrote, errOut.String())
			}
		})
	}
	if code := cli.Send(context.Background(), []string{"--server", h.URL, "--approve-all", "--deny-all", sid, "x"},
		cli.Env{Stdout: io.Discard, Stderr: io.Discard}); code != 2 {
		t.Fatalf("both flags: exit %d", code)
	}
}
