package api_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// create posts a session for workspace and returns the status and the
// error body (if any).
func create(t *testing.T, h *servertest.Harness, body map[string]any) (int, protocol.HTTPError, string) {
	t.Helper()
	var e protocol.HTTPError
	var s struct {
		WorkspacePath string `json:"workspace_path"`
	}
	st := h.Do("POST", "/sessions", body, &e)
	if st == http.StatusCreated {
		var list struct {
			Sessions []struct {
				WorkspacePath string `json:"workspace_path"`
			} `json:"sessions"`
		}
		h.Do("GET", "/sessions?limit=1", nil, &list)
		s.WorkspacePath = list.Sessions[0].WorkspacePath
	}
	return st, e, s.WorkspacePath
}

// TestCreateSessionRefusesRootAndSystemDirectories (issue 20, item 8):
// POST /sessions with the filesystem root, a system directory, a path
// inside /proc, /sys or /dev, or a path or symbolic link that resolves
// to one, is 400 workspace_forbidden, and creates nothing.
func TestCreateSessionRefusesRootAndSystemDirectories(t *testing.T) {
	h := servertest.Start(t, "")
	dir := t.TempDir()
	linkToRoot := filepath.Join(dir, "root-link")
	servertest.Must(t, os.Symlink("/", linkToRoot))
	linkToEtc := filepath.Join(dir, "etc-link")
	servertest.Must(t, os.Symlink("/etc", linkToEtc))
	before := sessionCount(t, h)
	for _, ws := range []string{"/", "/etc", "/usr", "/var", "/proc/self", "/sys/kernel", "/dev",
		h.Workspace + "/../../../../../../../../etc", linkToRoot, linkToEtc, linkToRoot + "/usr/lib"} {
		if _, err := os.Stat(ws); err != nil {
			continue
		}
		for _, allowHome := range []bool{false, true} {
			st, e, _ := create(t, h, map[string]any{"workspace_path": ws, "allow_home": allowHome})
			if st != http.StatusBadRequest || e.Error.Code != api.CodeWorkspaceForbidden || e.Error.Message == "" {
				t.Errorf("workspace %q (allow_home %v): %d %+v, want 400 %s", ws, allowHome, st, e, api.CodeWorkspaceForbidden)
			}
		}
	}
	if n := sessionCount(t, h); n != before {
		t.Fatalf("%d sessions created by refused requests", n-before)
	}
}

// TestCreateSessionHomeNeedsAllowHome: the user's home directory itself
// is 400 workspace_home unless the request says "allow_home": true; a
// project inside it needs no confirmation. The workspace stored is the
// directory the path resolves to.
func TestCreateSessionHomeNeedsAllowHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	h := servertest.Start(t, "")
	project := filepath.Join(home, "project")
	servertest.Must(t, os.Mkdir(project, 0o755))
	st, e, _ := create(t, h, map[string]any{"workspace_path": home})
	if st != http.StatusBadRequest || e.Error.Code != api.CodeWorkspaceHome || !strings.Contains(e.Error.Message, "allow_home") {
		t.Fatalf("the home: %d %+v, want 400 %s naming allow_home", st, e, api.CodeWorkspaceHome)
	}
	if st, e, got := create(t, h, map[string]any{"workspace_path": home + "/", "allow_home": true}); st != http.StatusCreated || got != home {
		t.Fatalf("the home with allow_home: %d %+v, workspace %q", st, e, got)
	}
	link := filepath.Join(t.TempDir(), "proj-link")
	servertest.Must(t, os.Symlink(project, link))
	if st, e, got := create(t, h, map[string]any{"workspace_path": link}); st != http.StatusCreated || got != project {
		t.Fatalf("a link to a project in the home: %d %+v, workspace %q, want %q", st, e, got, project)
	}
}
