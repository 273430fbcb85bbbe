package hub

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// Attachment is an accepted subscribe: the client, registered and already
// receiving live events after the seam, and what must be written before
// them: the ack, then the snapshot or the replay.
type Attachment struct {
	Client   *Client
	Ack      protocol.SubscribeAck
	Snapshot []byte // the snapshot frame, or nil
	// Seam is the id of the last event covered by the snapshot or replay;
	// every queued live item is newer.
	Seam string
	// Replay holds the replayed events once Collect has run; the stream
	// edge uses StreamReplay instead, which never holds them all.
	Replay []*Item
	plan   *replayPlan
}

// Subscribe validates a subscribe for a session and attaches a client.
// On refusal it returns the subscribe_error to send, and nothing is
// attached.
func (h *Hub) Subscribe(ctx context.Context, sessionID string, sub *protocol.Subscribe) (*Attachment, *protocol.SubscribeError) {
	resolved, err := sub.Resolve()
	if err != nil {
		var fe *protocol.FilterError
		errors.As(err, &fe)
		return nil, h.refuse(protocol.CodeInvalidFilter, err.Error(), fe.Offending)
	}
	sess, err := h.store.Session(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, h.refuse(protocol.CodeSessionNotFound, "session "+sessionID+" does not exist", "")
	}
	if err != nil {
		return nil, h.internal(err)
	}
	since := ""
	if sub.Since != nil && !sub.Snapshot {
		since = *sub.Since
		u, err := event.ParseID(since)
		if err != nil {
			return nil, h.refuse(protocol.CodeInvalidCursor, "since is not an event id: "+err.Error(), "")
		}
		// Ids compare as strings, so only the canonical spelling is a
		// usable cursor (ULIDs also parse in lower case).
		if event.IDPrefix+u.String() != since {
			return nil, h.refuse(protocol.CodeInvalidCursor, "since is not an event id in canonical form", "")
		}
		at, _ := event.IDTime(since)
		if at.Before(h.cfg.Now().Add(-h.cfg.Retention)) {
			return nil, h.refuse(protocol.CodeCursorExpired, "the cursor is older than the trace store's retention; subscribe again with snapshot: true", "")
		}
	}
	em, err := h.bus.Emitter(ctx, sessionID)
	if err != nil {
		return nil, h.internal(err)
	}
	if since != "" && h.cfg.AwaitCursor != nil && since > em.LastDelivered() {
		h.cfg.AwaitCursor(ctx, sessionID, since)
	}
	filter := compile(resolved)
	// Without include_worker_sessions, a client still receives its
	// workers' approval events (approvals.go) if it asks for them.
	workerApprovals := !filter.workers && len(filter.plannerTypes()) > 0
	h.subscribing.Add(1)
	attached := false
	defer func() {
		if !attached {
			h.subscribing.Add(-1)
		}
	}()
	if filter.workers || workerApprovals {
		// Workers created before this process: learn the tree from the
		// store, so live fan-out and replay cover them, and join their
		// emitters to the tree's outbox, so the seam covers what they
		// stored after the planner's last event.
		desc, err := h.loadDescendants(ctx, sessionID)
		if err != nil {
			return nil, h.internal(err)
		}
		for _, d := range desc {
			if _, err := h.bus.Emitter(ctx, d); err != nil {
				return nil, h.internal(err)
			}
		}
	}

	c := newClient(h, h.nextName(), sessionID, filter, h.cfg.ClientQueue)
	// A cursor past the seam (a client that saw streaming events of an
	// earlier process, whose ids were never stored): the client already
	// holds the events up to it, so none may be queued again.
	c.after = since
	a := &Attachment{Client: c, Ack: protocol.SubscribeAck{Type: protocol.TypeSubscribeAck, ResolvedFilter: resolved,
		Since: sub.Since, Snapshot: sub.Snapshot}}
	var ringItems []*Item
	var currentTurn string
	var tree []string    // the session, and its workers if the client wants them
	var workers []string // its workers, whose approval events only the client wants
	var lost, heldFrom string
	ringKnows := false // a ring of the tree holds (or let go) the cursor
	var fl *inflight   // the session's model call in flight at the seam, for a snapshot
	// The seam: register and read the last delivered id with delivery held
	// (for the whole delegation tree: planner and workers share the lock).
	em.WithDelivered(func(last string) {
		a.Seam = last
		tree = []string{sessionID}
		if filter.workers {
			tree = append(tree, h.descendants(sessionID)...)
		} else if workerApprovals {
			workers = h.descendants(sessionID)
		}
		heldFrom = last + "\x00"
		for i, id := range tree {
			st := h.lockState(id, last+"\x00")
			if i == 0 {
				st.clients = append(st.clients[:len(st.clients):len(st.clients)], c)
				currentTurn = st.currentTurn
				if sub.Snapshot {
					fl = st.inflightAt(id, last)
				}
			}
			if since != "" {
				ringItems = append(ringItems, st.ring.after(since, last, &c.filter)...)
				ringKnows = ringKnows || st.ring.knows(since)
			}
			lost, heldFrom = max(lost, st.ring.lost(&c.filter)), min(heldFrom, st.heldFrom)
			st.mu.Unlock()
		}
	})
	// The client now holds the tree's root state: Sweep keeps the tree.
	attached = true
	h.subscribing.Add(-1)
	slices.SortFunc(ringItems, func(x, y *Item) int { return strings.Compare(x.ID, y.ID) })
	a.Ack.SeamEventID = a.Seam

	switch {
	case sub.Snapshot:
		snap, err := h.snapshot(ctx, sess, a.Seam, currentTurn, fl)
		if err != nil {
			h.detach(c)
			return nil, h.internal(err)
		}
		a.Snapshot = snap
	case since != "" && since < a.Seam:
		// A cursor at or after the point this process holds the tree
		// from, which it neither holds nor stored, is an earlier
		// process's streaming event (foreign.go).
		foreign := false
		if since >= heldFrom && !ringKnows {
			var err error
			if foreign, err = h.isForeign(ctx, sessionID, since, tree); err != nil {
				h.detach(c)
				return nil, h.internal(err)
			}
			if foreign {
				if serr := h.passForeign(em, since); serr != nil {
					h.detach(c)
					return nil, serr
				}
			}
		}
		plan, n, serr := h.planReplay(ctx, c, tree, workers, since, a.Seam, ringItems)
		if serr != nil {
			h.detach(c)
			return nil, serr
		}
		a.plan = plan
		a.Ack.ReplayEventCount = n
		gap, err := h.streamingGap(ctx, &c.filter, tree, since, a.Seam, lost, heldFrom)
		if err != nil {
			h.detach(c)
			return nil, h.internal(err)
		}
		// What streamed after a foreign cursor died with its process.
		a.Ack.StreamingGap = gap || foreign && c.filter.wantsStreaming()
	case since > a.Seam:
		// Every id this tree delivered is at or before the seam, so the
		// cursor is either from the future (made up, or another
		// server's) or a streaming event of an earlier process that was
		// never stored: possible only while a model call or a tool call
		// was open when that process stopped, and its clock ran ahead of
		// this one's (or it streamed in the millisecond this one started
		// in).
		open, err := h.openCall(ctx, tree, a.Seam)
		if err != nil {
			h.detach(c)
			return nil, h.internal(err)
		}
		if !open {
			h.detach(c)
			return nil, h.refuse(protocol.CodeInvalidCursor,
				"since is after the last event of the session ("+a.Seam+"); subscribe again with snapshot: true", "")
		}
		if serr := h.passForeign(em, since); serr != nil {
			h.detach(c)
			return nil, serr
		}
		// Whatever streamed after it then is gone (message.complete
		// included).
		a.Ack.StreamingGap = c.filter.wantsStreaming()
	}
	if h.m != nil {
		h.m.ReplayEvents.Observe(float64(a.Ack.ReplayEventCount))
	}
	h.meta(sessionID, event.BusSubscriberRegistered, c.Name)
	return a, nil
}

func (h *Hub) refuse(code, msg, offending string) *protocol.SubscribeError {
	if h.m != nil {
		h.m.SubscribeErrs.WithLabelValues(code).Inc()
	}
	return &protocol.SubscribeError{Type: protocol.TypeSubscribeError, Code: code, Message: msg, Offending: offending}
}

func (h *Hub) internal(err error) *protocol.SubscribeError {
	h.log.Error("subscribe failed", "err", err)
	return h.refuse(protocol.CodeInternal, "the server could not read the session; try again", "")
}

// streamingGap reports whether streaming events the filter asks for,
// after since, may be missing from the replay: let go from a ring (lost
// is the newest such id), or emitted before this process held the
// session (a restart, a swept ring) while a model call or a tool call
// was running (a model streams deltas, a shell command its output): one
// ran in the unheld range after the cursor, or one was open at the
// cursor itself (the client holds events of a call whose later ones
// died with an earlier process's ring; the call may have no stored end
// before what this process holds). A filter with no streaming type
// never has a gap.
func (h *Hub) streamingGap(ctx context.Context, f *filter, sessions []string, since, seam, lost, heldFrom string) (bool, error) {
	if !f.wantsStreaming() {
		return false, nil
	}
	if since < lost {
		return true, nil
	}
	if since >= heldFrom {
		return false, nil
	}
	// Streaming events only occur inside model calls and tool calls; look
	// for one in the unheld range.
	upTo := min(heldFrom, seam)
	n, err := h.store.CountEvents(ctx, store.EventQuery{SessionIDs: sessions, AfterID: since, UpToID: upTo,
		Types: gapTypes})
	if err != nil || n > 0 {
		return n > 0, err
	}
	last, err := h.lastEventOf(ctx, sessions, since, modelCallTypes)
	if err != nil || last.Type == event.LLMCallStarted {
		return last.Type == event.LLMCallStarted, err
	}
	last, err = h.lastEventOf(ctx, sessions, since, toolCallTypes)
	return last.Type == event.ToolCalled, err
}

// The events that open and close the ranges streaming events occur in.
var (
	modelCallTypes = []event.Type{event.LLMCallStarted, event.LLMCallCompleted, event.LLMCallFailed}
	toolCallTypes  = []event.Type{event.ToolCalled, event.ToolCompleted, event.ToolFailed}
	// gapTypes are both: a streaming gap is an unheld range holding one.
	gapTypes = append(modelCallTypes[:len(modelCallTypes):len(modelCallTypes)], toolCallTypes...)
)

// openCall reports whether the tree's stored history, up to seam, ends
// inside a model call or a tool call of an earlier process (the two
// stream: a model its deltas, a shell command its output): its last
// llm.call_* event is a start, or the llm.call_failed that crash
// recovery (or a cluster failover) stores, actor session, for a call a
// process left open; or the same of its tool.* events.
func (h *Hub) openCall(ctx context.Context, sessions []string, seam string) (bool, error) {
	for _, c := range []struct {
		types        []event.Type
		start, ended event.Type
	}{
		{modelCallTypes, event.LLMCallStarted, event.LLMCallFailed},
		{toolCallTypes, event.ToolCalled, event.ToolFailed},
	} {
		last, err := h.lastEventOf(ctx, sessions, seam, c.types)
		if err != nil {
			return false, err
		}
		if last.Type == c.start || last.Type == c.ended && last.Actor == event.ActorSession {
			return true, nil
		}
	}
	return false, nil
}

// lastEventOf returns the tree's last stored event of one of types at
// or before event id at (a zero row when there is none).
func (h *Hub) lastEventOf(ctx context.Context, sessions []string, at string, types []event.Type) (store.EventRow, error) {
	var last store.EventRow
	err := h.store.ScanEvents(ctx, store.EventQuery{SessionIDs: sessions, UpToID: at, Types: types},
		func(r store.EventRow) error {
			last = r
			return nil
		})
	return last, err
}

// snapshot builds the snapshot frame as of seam (spec §3.4). fl, if not
// nil, is the session's model call in flight at the seam: its message
// follows the stored ones (see inflight.go).
func (h *Hub) snapshot(ctx context.Context, sess store.Session, seam, currentTurn string, fl *inflight) ([]byte, error) {
	n := h.cfg.SnapshotMessages
	if n == 0 {
		n = 1 // read one to tell whether there are any (has_more_messages)
	}
	msgs, more, err := h.store.MessagesAsOf(ctx, sess.ID, seam, n)
	if err != nil {
		return nil, err
	}
	if h.cfg.SnapshotMessages == 0 {
		msgs, more = nil, len(msgs) > 0
	}
	if h.cfg.Counters != nil {
		desc, err := h.loadDescendants(ctx, sess.ID)
		if err != nil {
			return nil, err
		}
		if sess.TurnCount, sess.CostUSD, err = h.cfg.Counters(ctx, sess.ID, desc, seam); err != nil {
			return nil, err
		}
	}
	// The row was read before the seam: take title and last activity as
	// of the seam, like the messages.
	at, err := h.store.SummaryAsOf(ctx, sess.ID, seam)
	if err != nil {
		return nil, err
	}
	sess.Title, sess.LastActivityAt, sess.Queued = at.Title, at.LastActivityAt, at.Queued
	// The mode and the session rules as read after the seam: a change
	// committed after it is delivered live and sets the same again.
	sess.Mode, sess.SessionRules = at.Mode, at.SessionRules
	if sess.ParentSessionID != "" {
		top, err := h.store.TreeRoot(ctx, sess.ID)
		if err != nil {
			return nil, err
		}
		sess.SessionRules = top.SessionRules
	}
	if h.cfg.PolicyVersion != nil {
		sess.RoutingPolicyVersion = h.cfg.PolicyVersion()
	}
	sum := sess.Summary(currentTurn, false)
	if h.cfg.Background != nil {
		sum.BackgroundCommands = h.cfg.Background(sess.ID)
	}
	desc, err := h.loadDescendants(ctx, sess.ID)
	if err != nil {
		return nil, err
	}
	if sum.PendingApprovals, err = h.pendingAsOf(ctx, append([]string{sess.ID}, desc...), seam); err != nil {
		return nil, err
	}
	summary, err := json.Marshal(sum)
	if err != nil {
		return nil, err
	}
	if fl != nil {
		if m := fl.message(); m != nil && !slices.ContainsFunc(msgs, func(s message.Message) bool { return s.ID == m.ID }) {
			msgs = append(msgs, *m)
		}
	}
	raw := make([]json.RawMessage, 0, len(msgs))
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		raw = append(raw, b)
	}
	workers, err := h.workersAsOf(ctx, sess.ID, seam)
	if err != nil {
		return nil, err
	}
	running, err := h.runningToolsAsOf(ctx, sess.ID, seam, currentTurn, msgs)
	if err != nil {
		return nil, err
	}
	return protocol.Marshal(protocol.Snapshot{Type: protocol.TypeSnapshot, Session: summary, Messages: raw,
		HasMoreMessages: more, SnapshotAtEventID: seam, Workers: workers, RunningTools: running}), nil
}
