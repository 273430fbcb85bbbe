package server

import (
	"context"
	"net/http"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/stream"
)

// Cluster mode's wiring (cfg.NATS set): the node's runtime is
// internal/clusternode, its HTTP front internal/api's ClusterFront.
// These are the hooks the other parts get, each the single-node
// answer when the server runs alone.

// emits reports whether this server may emit into a session: in
// cluster mode only the owner of the session's tree does.
func (s *Server) emits(sessionID string) bool {
	return s.cluster == nil || s.cluster.Emits(sessionID)
}

// deleter is the session manager's Config.Deleter: in cluster mode a
// deletion reaches every node through the log (nil alone).
func (s *Server) deleter() session.Deleter {
	if s.cluster == nil {
		return nil
	}
	return s.cluster.Store()
}

// hubEmits is the hub's Config.Emits (clusternode.Node.HubEmits).
func (s *Server) hubEmits(sessionID string) bool {
	return s.cluster == nil || s.cluster.HubEmits(sessionID)
}

// forwardMeta is the hub's Config.Forward: in cluster mode, the tree's
// owner emits the meta-events of this node's clients.
func (s *Server) forwardMeta(sessionID string, typ event.Type, payload map[string]any) {
	if s.cluster != nil {
		s.cluster.ForwardMeta(sessionID, typ, payload)
	}
}

// nodeName is the hub's Config.Node: the node's name in cluster mode,
// so that subscription names are unique among the nodes.
func (s *Server) nodeName() string {
	if s.cluster == nil {
		return ""
	}
	return s.cluster.Name()
}

// awaitCursor is the hub's Config.AwaitCursor: in cluster mode a
// cursor taken on another node may be ahead of this one for a moment.
func (s *Server) awaitCursor(ctx context.Context, sessionID, since string) {
	if s.cluster != nil {
		s.cluster.AwaitCursor(ctx, sessionID, since)
	}
}

// recover closes the turns a crash left open. In cluster mode an open
// turn may belong to a tree another node runs: the node ends only the
// turns of the trees it takes over.
func (s *Server) recover(ctx context.Context, mgr *session.Manager) error {
	if s.cluster != nil {
		return s.cluster.Recover(ctx)
	}
	return mgr.Recover(ctx)
}

// clusterNote is the ready line's cluster part ("" single-node).
func (s *Server) clusterNote() string {
	if s.cluster == nil {
		return ""
	}
	return s.cluster.ReadyNote()
}

// streamCanceller returns what the stream's cancel frames call: in
// cluster mode a cancel of a tree owned elsewhere goes to its owner.
func (s *Server) streamCanceller(mgr *session.Manager) stream.Canceller {
	if s.cluster == nil {
		return mgr
	}
	return s.cluster.Canceller(mgr)
}

// clusterStatus answers GET /cluster.
func (s *Server) clusterStatus() http.HandlerFunc {
	if s.cluster == nil {
		return api.ClusterStatus(nil)
	}
	return api.ClusterStatus(s.cluster)
}

// clusterFront puts the cluster's routing in front of the API in
// cluster mode.
func (s *Server) clusterFront(next http.Handler) http.Handler {
	if s.cluster == nil {
		return next
	}
	return api.ClusterFront(next, s.cluster)
}
