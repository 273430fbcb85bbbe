package hub

import (
	"context"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/protocol"
)

// snapshotWorkers is how many of a session's latest delegations a
// snapshot describes.
const snapshotWorkers = 100

// workersAsOf folds the session's delegate.* events up to the seam into
// the state of each worker it delegated to, oldest first, keeping the
// latest snapshotWorkers.
func (h *Hub) workersAsOf(ctx context.Context, sessionID, seam string) ([]protocol.SnapshotWorker, error) {
	if seam == "" {
		return nil, nil // nothing delivered yet ("" would read to the end)
	}
	evs, err := h.store.Delegations(ctx, sessionID, seam)
	if err != nil {
		return nil, err
	}
	var out []protocol.SnapshotWorker
	at := map[string]int{} // worker session id → index in out
	for _, ev := range evs {
		var p struct {
			WorkerSessionID string  `json:"worker_session_id"`
			Task            string  `json:"task"`
			Model           string  `json:"model"`
			Summary         string  `json:"summary"`
			FailureMode     string  `json:"failure_mode"`
			CostUSD         float64 `json:"cost_usd"`
		}
		if ev.DecodePayload(&p) != nil || p.WorkerSessionID == "" {
			continue
		}
		i, ok := at[p.WorkerSessionID]
		if !ok {
			i = len(out)
			at[p.WorkerSessionID] = i
			out = append(out, protocol.SnapshotWorker{SessionID: p.WorkerSessionID, Status: "running"})
		}
		w := &out[i]
		switch ev.Type {
		case event.DelegateStarted:
			w.Task, w.Model = p.Task, p.Model
		case event.DelegateCompleted:
			w.Status, w.Summary, w.CostUSD = "completed", p.Summary, p.CostUSD
		case event.DelegateFailed:
			w.Status, w.FailureMode, w.CostUSD = "failed", p.FailureMode, p.CostUSD
		}
	}
	if len(out) > snapshotWorkers {
		out = out[len(out)-snapshotWorkers:]
	}
	return out, nil
}
