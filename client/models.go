package client

import (
	"context"
	"net/http"

	"github.com/metis-agent/metis/protocol"
)

// ModelList is the answer of GET /models.
type ModelList = protocol.ModelList

// Models asks the server which models sessions can use (GET /models):
// its default, the models of its usable providers, and the providers
// it cannot use with the reason.
func (c *Client) Models(ctx context.Context) (ModelList, error) {
	var l ModelList
	err := c.do(ctx, http.MethodGet, "/models", nil, &l)
	return l, err
}
