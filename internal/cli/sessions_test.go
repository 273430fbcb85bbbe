package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/internal/servertest"
)

// TestSessionsWalksPages: `metis sessions` lists every session, newest
// first, however small the pages it fetches; --json prints them all as
// one array.
func TestSessionsWalksPages(t *testing.T) {
	h := servertest.Start(t, "")
	var ids []string
	for range 5 {
		ids = append(ids, h.CreateSession())
	}
	ctx := context.Background()
	var out, errOut bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errOut}
	if code := cli.Sessions(ctx, []string{"--server", h.URL, "--page", "2"}, env); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("output:\n%s", out.String())
	}
	for i, id := range ids {
		if got := strings.Fields(lines[len(ids)-i])[0]; got != id {
			t.Fatalf("row %d is %s, want %s (newest first):\n%s", len(ids)-i, got, id, out.String())
		}
	}

	out.Reset()
	if code := cli.Sessions(ctx, []string{"--server", h.URL, "--json"}, env); code != 0 {
		t.Fatalf("--json exit %d: %s", code, errOut.String())
	}
	var ss []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out.Bytes(), &ss); err != nil || len(ss) != 5 || ss[0].ID != ids[4] {
		t.Fatalf("--json: %v %s", err, out.String())
	}
	if code := cli.Sessions(ctx, []string{"--server", h.URL, "--page", "-1"}, env); code != 2 {
		t.Fatalf("--page -1: exit %d", code)
	}
}

// TestSessionsTitleColumn: the table's last column is the session title,
// "-" before the first turn and cut at 40 runes with "…".
func TestSessionsTitleColumn(t *testing.T) {
	h := servertest.Start(t, "")
	untitled := h.CreateSession()
	titled := h.CreateSession()
	h.Submit(titled, "/echo "+strings.Repeat("word ", 20))
	h.WaitTurn(titled)
	var out, errOut bytes.Buffer
	if code := cli.Sessions(context.Background(), []string{"--server", h.URL}, cli.Env{Stdout: &out, Stderr: &errOut}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasSuffix(strings.TrimSpace(lines[0]), "TITLE") {
		t.Fatalf("output:\n%s", out.String())
	}
	// The server's title leaves the /echo out (store.PromptTitle); the
	// table cuts what is left at 40 runes.
	want := map[string]string{untitled: " -", titled: " " + strings.TrimSpace(strings.Repeat("word ", 8)) + "…"}
	for _, l := range lines[1:] {
		id := strings.Fields(l)[0]
		if !strings.HasSuffix(l, want[id]) {
			t.Fatalf("row of %s does not end with %q:\n%s", id, want[id], out.String())
		}
	}
}
