package acp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// TestNewSessionRefusesSystemDirectories (issue 20, item 8): an editor's
// cwd that resolves to a system directory (`…/../../../etc`, a symbolic
// link to /) is refused with invalid params naming the server's
// workspace_forbidden, and no session is created; the user's home
// directory is refused with workspace_home.
func TestNewSessionRefusesSystemDirectories(t *testing.T) {
	leakCheck(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	h := servertest.Start(t, "")
	link := filepath.Join(t.TempDir(), "root")
	servertest.Must(t, os.Symlink("/", link))
	s := serveAgent(t, h.URL)
	s.initialize(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for cwd, code := range map[string]string{
		h.Workspace + "/../../../../../../../../../etc": protocol.CodeWorkspaceForbidden,
		link: protocol.CodeWorkspaceForbidden,
		"/":  protocol.CodeWorkspaceForbidden,
		home: protocol.CodeWorkspaceHome,
	} {
		_, err := s.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
		var re *sdk.RequestError
		if !errors.As(err, &re) || re.Code != -32602 {
			t.Errorf("cwd %q: %v, want invalid params", cwd, err)
			continue
		}
		data, _ := re.Data.(map[string]any)
		if data["metis_code"] != code || !strings.Contains(re.Message, "create a session") {
			t.Errorf("cwd %q: %+v, want metis_code %s", cwd, re, code)
		}
	}
	list, err := s.conn.ListSessions(ctx, sdk.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 0 {
		t.Fatalf("sessions after the refusals: %+v, %v", list, err)
	}
}
