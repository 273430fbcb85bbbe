package client

import (
	"context"
	"errors"
	"net/http"
)

// CreateOptions are the optional fields of POST /sessions.
type CreateOptions struct {
	// Model is the session's model ("" for the server's default).
	Model string
	// AllowHome confirms a workspace that is the user's home directory
	// (or a directory holding it), which the server refuses otherwise
	// with protocol.CodeWorkspaceHome.
	AllowHome bool
}

// CreateSessionWith creates a session on an absolute workspace directory
// with options. The server refuses the filesystem root and system
// directories (protocol.CodeWorkspaceForbidden) and, unless confirmed,
// the home directory; see IsCode.
func (c *Client) CreateSessionWith(ctx context.Context, workspace string, o CreateOptions) (Session, error) {
	body := map[string]any{"workspace_path": workspace, "model": o.Model}
	if o.AllowHome {
		body["allow_home"] = true
	}
	var s Session
	err := c.do(ctx, http.MethodPost, "/sessions", body, &s)
	return s, err
}

// IsCode reports whether err is an error answer of the API with code
// (one of protocol's error codes).
func IsCode(err error, code string) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == code
}
