package client

import (
	"context"
	"errors"
	"net/http"
)

// CreateOptions are the fields of POST /sessions.
type CreateOptions struct {
	// Workspace is the absolute path of an existing directory (Create;
	// CreateSessionWith takes it as an argument).
	Workspace string
	// Model is the session's model ("" for the server's default).
	Model string
	// Mode is the session's permission mode ("" for the server's
	// --default-mode).
	Mode string
	// AllowHome confirms a workspace that is the user's home directory
	// (or a directory holding it), which the server refuses otherwise
	// with protocol.CodeWorkspaceHome.
	AllowHome bool
}

// Create creates a session on o.Workspace. The server refuses the
// filesystem root and system directories (protocol.CodeWorkspaceForbidden)
// and, unless o.AllowHome, the home directory; see IsCode.
func (c *Client) Create(ctx context.Context, o CreateOptions) (Session, error) {
	body := map[string]any{"workspace_path": o.Workspace}
	if o.Model != "" {
		body["model"] = o.Model
	}
	if o.Mode != "" {
		body["mode"] = o.Mode
	}
	if o.AllowHome {
		body["allow_home"] = true
	}
	var s Session
	err := c.do(ctx, http.MethodPost, "/sessions", body, &s)
	return s, err
}

// CreateSessionWith creates a session on an absolute workspace directory
// with options (o.Workspace is ignored).
func (c *Client) CreateSessionWith(ctx context.Context, workspace string, o CreateOptions) (Session, error) {
	o.Workspace = workspace
	return c.Create(ctx, o)
}

// IsCode reports whether err is an error answer of the API with code
// (one of protocol's error codes).
func IsCode(err error, code string) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == code
}
