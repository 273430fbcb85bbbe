// Package routing owns the choice of model for each turn. A Router
// returns a Decision (model, the reason it was chosen, and the version of
// the policy that chose it), which the agent loop announces as
// route.decided.
//
// This first policy is static: every turn runs on its session's model.
// The policy-file engine replaces it behind the same interface.
//
// routing imports nothing from metis.
package routing

import "time"

// Input is what a routing decision may look at.
type Input struct {
	SessionID    string
	SessionModel string // the session's active model
	Workspace    string
	UserText     string
	Worker       bool // the session is a delegated worker
}

// Decision is the outcome of routing one turn.
type Decision struct {
	Model         string `json:"model"`
	Reason        string `json:"reason"`
	PolicyVersion string `json:"policy_version"`
}

// Router decides which model runs a turn.
type Router interface {
	Decide(in Input) Decision
	// Version is the current policy version.
	Version() string
}

// Static routes every turn to the session's model.
type Static struct{ version string }

// NewStatic returns the static router; its policy version is the time it
// was created, in RFC 3339.
func NewStatic() *Static { return &Static{version: time.Now().UTC().Format(time.RFC3339)} }

// Decide implements Router.
func (s *Static) Decide(in Input) Decision {
	return Decision{Model: in.SessionModel, Reason: "session_model", PolicyVersion: s.version}
}

// Version implements Router.
func (s *Static) Version() string { return s.version }
