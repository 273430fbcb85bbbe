// Package routing owns the choice of model for each turn (docs/routing.md).
// A Router returns a Decision: the model, the reason it was chosen (the
// rule that fired) and the version of the policy that chose it; the agent
// loop announces it as route.decided.
//
// Engine is the policy-file router: <home>/routing.yaml, watched and
// hot-reloaded, with a separate rule set for workers. Static routes every
// turn to its session's model.
//
// routing imports safefile (to read routing.yaml) and yaml.
package routing

import (
	"strings"
	"time"
	"unicode"
)

// Input is what a routing decision may look at.
type Input struct {
	SessionID    string
	SessionModel string // the session's active model
	Workspace    string
	UserText     string
	Worker       bool   // the session is a delegated worker
	Override     string // a model named by a /model command, if any
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

// ReasonSlashCommand is the reason of a turn routed by "/model".
const ReasonSlashCommand = "slash_command"

// ParseCommand recognises a leading "/model PROVIDER:MODEL" in a user
// message and returns the model and the rest of the message.
func ParseCommand(text string) (model, rest string, ok bool) {
	t := strings.TrimLeft(text, " \t")
	after, found := strings.CutPrefix(t, "/model")
	if !found || (after != "" && after[0] != ' ' && after[0] != '\t' && after[0] != '\n') {
		return "", text, false
	}
	after = strings.TrimLeft(after, " \t")
	// The id ends at the first white space of any kind (the "\r" of a
	// CRLF line end too), as strings.TrimSpace sees white space.
	id, rest := after, ""
	if i := strings.IndexFunc(after, unicode.IsSpace); i >= 0 {
		id, rest = after[:i], after[i:]
	}
	if !validModelID(id) {
		return "", text, false
	}
	return id, strings.TrimSpace(rest), true
}

// Static routes every turn to the session's model (or the override).
type Static struct{ version string }

// NewStatic returns the static router; its policy version is the time it
// was created.
func NewStatic() *Static { return &Static{version: versionAt(time.Now())} }

// Decide implements Router.
func (s *Static) Decide(in Input) Decision {
	if in.Override != "" {
		return Decision{Model: in.Override, Reason: ReasonSlashCommand, PolicyVersion: s.version}
	}
	return Decision{Model: in.SessionModel, Reason: "session_model", PolicyVersion: s.version}
}

// Version implements Router.
func (s *Static) Version() string { return s.version }

func versionAt(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
