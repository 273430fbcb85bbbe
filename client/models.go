package client

import (
	"context"
	"net/http"

	"github.com/metis-agent/metis/protocol"
)

// Models returns GET /models: the server's default model, the models
// sessions can use, and the providers it cannot use, with the reason.
func (c *Client) Models(ctx context.Context) (protocol.ModelList, error) {
	var out protocol.ModelList
	err := c.do(ctx, http.MethodGet, "/models", nil, &out)
	return out, err
}
