package acp

import (
	"context"
	"encoding/json"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// The stored messages hold what the model saw: a tool's whole result,
// not the summary and diff its tool.completed carried; nothing of the
// workers a delegate call ran; no trace of why a turn ended. So
// session/load first reads those catalog events of the session and its
// workers from the trace store (a subscription from before the
// session's first event, filtered to historyTypes, replayed up to the
// seam and then closed), folds them exactly as a live turn would, and
// the replay of the messages then shows each call as it was shown live:
// its summary, diff, locations and error class, a delegate call's
// worker log, and a marker after each cancelled turn. When the events
// cannot be read (past the trace store's retention, a refused
// subscription), the replay falls back to the messages alone.

// historyTypes are the catalog events session/load reads.
var historyTypes = []string{
	string(protocol.EventToolCalled), string(protocol.EventToolCompleted), string(protocol.EventToolFailed),
	string(protocol.EventDelegateStarted), string(protocol.EventDelegateCompleted), string(protocol.EventDelegateFailed),
	string(protocol.EventLLMCallFailed), string(protocol.EventTurnCancelled),
}

// historyTimeout bounds the read of the session's events.
const historyTimeout = 30 * time.Second

// outcome is a tool call's terminal event.
type outcome struct {
	typ protocol.EventType
	p   toolPayload
}

// history is what the catalog events add to the stored messages.
type history struct {
	outcomes  map[string]outcome // tool use id → tool.completed or tool.failed
	progress  map[string]*progress
	workers   map[string]string
	cancelled map[string]string // turn id → the cancel's reason
}

// readHistory reads the session's history events (see above). A
// failure leaves an empty history and is logged.
func (a *Agent) readHistory(ctx context.Context, s client.Session) history {
	q := newTurn(a, s.ID, s.WorkspacePath, "")
	q.quiet = true
	h := history{outcomes: q.outcomes, progress: q.progress, workers: q.workers, cancelled: map[string]string{}}
	ctx, cancel := context.WithTimeout(ctx, historyTimeout)
	defer cancel()
	u, err := ulid.New(ulid.Timestamp(s.CreatedAt.Add(-time.Millisecond)), nil)
	if err != nil {
		return h
	}
	done := false
	err = a.c.Follow(ctx, s.ID, client.FollowOptions{
		Since:  "evt_" + u.String(),
		Filter: protocol.Filter{EventTypes: historyTypes, IncludeWorkerSessions: true},
		OnUpdate: func(up client.Update) {
			switch up.Kind {
			case client.EventApplied:
				q.collect(ctx, up.Event, h.cancelled)
			case client.Subscribed:
				done = true // the replay is over
				cancel()
			case client.Resynced:
				cancel() // no replay: a snapshot holds no events
			}
		},
	})
	if !done {
		a.log.Warn("session/load: the session's events could not be read; tool summaries and worker logs are left out", "session", s.ID, "err", err)
	}
	return h
}

// collect folds one history event.
func (t *turn) collect(ctx context.Context, ev *protocol.EventEnvelope, cancelled map[string]string) {
	if ev.SessionID != t.sid {
		t.workerEvent(ctx, ev)
		return
	}
	switch typ := protocol.EventType(ev.Type); typ {
	case protocol.EventToolCalled, protocol.EventToolCompleted, protocol.EventToolFailed:
		var p toolPayload
		if json.Unmarshal(ev.Payload, &p) != nil || p.ToolUseID == "" {
			return
		}
		if pr := t.progress[p.ToolUseID]; pr != nil && typ == protocol.EventToolCompleted && pr.answer == "" {
			// The worker's last answer came live from its
			// message.complete, which is not stored; it is the
			// delegate's result.
			pr.answer = p.Result
		}
		t.toolEvent(ctx, typ, p)
	case protocol.EventDelegateStarted, protocol.EventDelegateCompleted, protocol.EventDelegateFailed:
		t.delegateEvent(ctx, ev)
	case protocol.EventTurnCancelled:
		var p turnEndPayload
		_ = json.Unmarshal(ev.Payload, &p)
		if ev.TurnID != nil {
			cancelled[*ev.TurnID] = p.Reason
		}
	}
}

// useHistory gives a replaying turn what the history holds.
func (t *turn) useHistory(h history) {
	t.hist = h.outcomes
	t.cancelledTurns = h.cancelled
	for id, pr := range h.progress {
		t.progress[id] = pr
	}
	for w, call := range h.workers {
		t.workers[w] = call
	}
}
