package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/metis-agent/metis/internal/agent"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// DefaultApprovalTimeout is how long a request waits for an answer
// before it is denied with reason timeout (--approval-timeout).
const DefaultApprovalTimeout = 5 * time.Minute

// approvalCommitWait bounds how long an answer waits for its
// approval.resolved to be committed before it is answered anyway.
const approvalCommitWait = 10 * time.Second

// approval is an approval request of a turn, from Open until its
// approval.resolved is committed (Close). Its resolution (res) is
// decided once, under the manager's lock, the one its cancels take: the
// first of a user's answer, the timeout, a session rule another answer
// added, a mode change and a cancel wins.
type approval struct {
	id        string
	t         *activeTurn
	sessionID string
	req       agent.Approval
	requested time.Time
	expires   time.Time
	out       chan<- agent.Answer
	res       *protocol.ApprovalResolution // nil while open
	timer     *time.Timer
	closed    chan struct{} // closed by Close: approval.resolved is committed
}

// ResolvedError is the error of an answer to a request already decided:
// Res is the resolution that won. It wraps ErrApprovalResolved.
type ResolvedError struct{ Res protocol.ApprovalResolution }

func (e *ResolvedError) Error() string {
	return fmt.Sprintf("%s: approval %s was decided already (%s, %s)", ErrApprovalResolved, e.Res.ApprovalID, e.Res.Decision, e.Res.Reason)
}

// Unwrap makes errors.Is(err, ErrApprovalResolved) hold.
func (e *ResolvedError) Unwrap() error { return ErrApprovalResolved }

// turnPerms implements agent.Permissions for one turn.
type turnPerms struct {
	m *Manager
	t *activeTurn
}

var _ agent.Permissions = turnPerms{}

// Mode implements agent.Permissions.
func (p turnPerms) Mode() permission.Mode {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	return p.t.mode
}

// Check implements agent.Permissions.
func (p turnPerms) Check(c *permission.Call) permission.Verdict {
	p.m.mu.Lock()
	mode, rules := p.t.mode, p.m.rules[p.t.root]
	p.m.mu.Unlock()
	return p.m.cfg.Policy.Decide(mode, rules, c)
}

// RulesSession implements agent.Permissions.
func (p turnPerms) RulesSession() string { return p.t.root }

// Open implements agent.Permissions.
func (p turnPerms) Open(req agent.Approval, out chan<- agent.Answer) (string, time.Time, error) {
	m := p.m
	now := time.Now()
	a := &approval{id: event.NewID("apr_"), t: p.t, sessionID: p.t.sessionID, req: req, requested: now,
		expires: now.Add(m.approvalTimeout()), out: out, closed: make(chan struct{})}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.approvals[a.id] = a
	p.t.approvals = append(p.t.approvals, a)
	a.timer = time.AfterFunc(m.approvalTimeout(), func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.settleLocked(a, protocol.ApprovalResolution{Decision: protocol.DecisionDeny, Reason: protocol.ApprovalReasonTimeout})
	})
	return a.id, a.expires, nil
}

// Settle implements agent.Permissions.
func (p turnPerms) Settle(id string, res protocol.ApprovalResolution) protocol.ApprovalResolution {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	a := p.m.approvals[id]
	if a == nil {
		return res
	}
	return p.m.settleLocked(a, res)
}

// Close implements agent.Permissions.
func (p turnPerms) Close(id string) {
	m := p.m
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.approvals[id]
	if a == nil {
		return
	}
	delete(m.approvals, id)
	a.t.approvals = slices.DeleteFunc(a.t.approvals, func(b *approval) bool { return b == a })
	a.timer.Stop()
	close(a.closed)
}

func (m *Manager) approvalTimeout() time.Duration {
	if m.cfg.ApprovalTimeout > 0 {
		return m.cfg.ApprovalTimeout
	}
	return DefaultApprovalTimeout
}

// settleLocked decides a request with res unless it is decided already,
// hands the resolution to its turn's dispatcher, and returns the one
// that won. An allow with scope session adds its rules to the tree's
// top session and releases the other requests of the tree they now
// cover. m.mu must be held.
func (m *Manager) settleLocked(a *approval, res protocol.ApprovalResolution) protocol.ApprovalResolution {
	if a.res != nil {
		return *a.res
	}
	res.ApprovalID, res.ToolUseID, res.SessionID = a.id, a.req.ToolUseID, a.sessionID
	a.res = &res
	a.timer.Stop()
	select {
	case a.out <- agent.Answer{ID: a.id, Res: res}:
	default: // cannot happen: the dispatcher makes room for every request
		m.log.Error("approval resolution dropped", "approval", a.id)
	}
	if res.Decision == protocol.DecisionAllow && res.Reason == protocol.ApprovalReasonUser && res.ReleasedBy == "" &&
		len(res.SessionRules) > 0 {
		rules, err := permission.ParseAllowRules(res.SessionRules)
		if err != nil {
			m.log.Warn("session rule not added", "approval", a.id, "err", err)
		}
		m.addRulesLocked(a.t.root, rules)
		m.rejudgeLocked(a.t.root, func(b *approval) (protocol.ApprovalResolution, bool) {
			if m.cfg.Policy.Decide(b.t.mode, m.rules[b.t.root], b.req.Call).Action != permission.Allow {
				return protocol.ApprovalResolution{}, false
			}
			return protocol.ApprovalResolution{Decision: protocol.DecisionAllow, Reason: protocol.ApprovalReasonUser,
				ReleasedBy: a.id}, true
		})
	}
	return res
}

// addRulesLocked adds session rules to a tree's top session (in memory;
// the dispatcher stores them with approval.resolved).
func (m *Manager) addRulesLocked(root string, rules []permission.Rule) {
	cur := m.rules[root]
	for _, r := range rules {
		if !slices.ContainsFunc(cur, func(c permission.Rule) bool { return c.Text == r.Text }) {
			// Appending never changes the elements a reader of an older
			// slice holds.
			cur = append(cur, r)
		}
	}
	m.rules[root] = cur
}

// rejudgeLocked settles, with the resolution decide gives, every open
// request of the tree whose top session is root for which it gives one.
func (m *Manager) rejudgeLocked(root string, decide func(*approval) (protocol.ApprovalResolution, bool)) {
	// In request order, so the ids of the events follow it.
	var open []*approval
	for _, b := range m.approvals {
		if b.res == nil && b.t.root == root && b.req.Call != nil {
			open = append(open, b)
		}
	}
	slices.SortFunc(open, func(x, y *approval) int { return x.requested.Compare(y.requested) })
	for _, b := range open {
		if res, ok := decide(b); ok {
			m.settleLocked(b, res)
		}
	}
}

// cancelApprovalsLocked denies a turn's open requests with reason
// cancelled. Call it after the turn's context is cancelled, so that its
// dispatcher, receiving the resolution, sees the cancel. m.mu must be
// held.
func (m *Manager) cancelApprovalsLocked(t *activeTurn) {
	for _, a := range t.approvals {
		m.settleLocked(a, protocol.ApprovalResolution{Decision: protocol.DecisionDeny, Reason: protocol.ApprovalReasonCancelled})
	}
}

// Approve answers approval request approvalID of a session, or of one of
// its workers (a planner's clients answer its workers' requests), with
// a user's decision. The first answer wins: it is returned once its
// approval.resolved is committed. A later answer fails with a
// *ResolvedError carrying the resolution that won; an id the session
// (and its workers) never had with ErrApprovalNotFound; a decision,
// scope or reason that is not valid with ErrInvalid.
func (m *Manager) Approve(ctx context.Context, sessionID, approvalID string, ans protocol.ApprovalAnswer) (protocol.ApprovalResolution, error) {
	switch {
	case ans.Decision != protocol.DecisionAllow && ans.Decision != protocol.DecisionDeny:
		return protocol.ApprovalResolution{}, fmt.Errorf(`%w: decision must be "allow" or "deny"`, ErrInvalid)
	case ans.Scope == "":
		ans.Scope = protocol.ScopeOnce
	case ans.Scope != protocol.ScopeOnce && ans.Scope != protocol.ScopeSession:
		return protocol.ApprovalResolution{}, fmt.Errorf(`%w: scope must be "once" or "session"`, ErrInvalid)
	}
	if len(ans.Reason) > protocol.MaxApprovalReason {
		return protocol.ApprovalResolution{}, fmt.Errorf("%w: reason is longer than %d bytes", ErrInvalid, protocol.MaxApprovalReason)
	}
	if _, err := m.cfg.Store.Session(ctx, sessionID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return protocol.ApprovalResolution{}, fmt.Errorf("%w: %s", ErrNotFound, sessionID)
		}
		return protocol.ApprovalResolution{}, err
	}
	m.mu.Lock()
	a := m.approvals[approvalID]
	if a != nil && (a.sessionID == sessionID || slices.Contains(a.t.chain, sessionID)) {
		if a.res != nil {
			res := *a.res
			m.mu.Unlock()
			return res, &ResolvedError{Res: res}
		}
		res := protocol.ApprovalResolution{Decision: ans.Decision, Reason: protocol.ApprovalReasonUser, Scope: ans.Scope,
			Message: ans.Reason}
		if ans.Decision == protocol.DecisionAllow && ans.Scope == protocol.ScopeSession {
			res.SessionRules = a.req.SessionRules
		}
		res = m.settleLocked(a, res)
		closed := a.closed
		m.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, approvalCommitWait)
		defer cancel()
		select {
		case <-closed:
		case <-wctx.Done():
		}
		return res, nil
	}
	m.mu.Unlock()
	return m.storedApproval(ctx, sessionID, approvalID)
}

// storedApproval answers a request this manager does not hold: decided
// and closed (its resolution is in the call's row), or never this
// session's.
func (m *Manager) storedApproval(ctx context.Context, sessionID, approvalID string) (protocol.ApprovalResolution, error) {
	notFound := fmt.Errorf("%w: %s in session %s", ErrApprovalNotFound, approvalID, sessionID)
	c, err := m.cfg.Store.ToolCallByApproval(ctx, approvalID)
	if errors.Is(err, store.ErrNotFound) {
		return protocol.ApprovalResolution{}, notFound
	}
	if err != nil {
		return protocol.ApprovalResolution{}, err
	}
	if c.SessionID != sessionID {
		chain, err := m.chainOf(ctx, c.SessionID)
		if err != nil {
			return protocol.ApprovalResolution{}, err
		}
		if !slices.Contains(chain, sessionID) {
			return protocol.ApprovalResolution{}, notFound
		}
	}
	if c.Approval == nil {
		// Waiting, but not in this manager: another node runs the turn
		// (cluster mode), or a crash left it (recovery ends it at start).
		return protocol.ApprovalResolution{}, fmt.Errorf("%w: approval %s waits on a turn this server does not run", ErrApprovalElsewhere, approvalID)
	}
	res := protocol.ApprovalResolution{ApprovalID: approvalID, ToolUseID: c.ID, SessionID: c.SessionID, Decision: c.Approval.Decision,
		Reason: c.Approval.Reason, Scope: c.Approval.Scope, Message: c.Approval.Message, SessionRules: c.Approval.SessionRules,
		ReleasedBy: c.Approval.ReleasedBy}
	return res, &ResolvedError{Res: res}
}

// chainOf returns the planners above a session, nearest first.
func (m *Manager) chainOf(ctx context.Context, sessionID string) ([]string, error) {
	var chain []string
	id := sessionID
	for range maxDelegationDepth {
		s, err := m.cfg.Store.Session(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("planners of %s: %w", sessionID, err)
		}
		if s.ParentSessionID == "" {
			return chain, nil
		}
		chain = append(chain, s.ParentSessionID)
		id = s.ParentSessionID
	}
	return nil, fmt.Errorf("planners of %s: delegation chain deeper than %d", sessionID, maxDelegationDepth)
}
