package client

import (
	"context"
	"errors"
	"net/http"

	"github.com/metis-agent/metis/protocol"
)

// ClusterStatus is the answer of GET /cluster: a cluster's nodes,
// leases and projection lag, as the node asked sees them.
type ClusterStatus = protocol.ClusterStatus

// ClusterStatus asks the server for the state of its cluster. A server
// that runs single-node answers with an error IsNotClustered reports.
func (c *Client) ClusterStatus(ctx context.Context) (ClusterStatus, error) {
	var st ClusterStatus
	err := c.do(ctx, http.MethodGet, "/cluster", nil, &st)
	return st, err
}

// IsNotClustered reports whether err is a single-node server's answer
// to ClusterStatus.
func IsNotClustered(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == protocol.CodeNotClustered
}
