package client

import (
	"encoding/json"

	"github.com/metis-agent/metis/protocol"
)

// applySessionEdit folds session.updated (a rename, an archive) of the
// view's own session into View.Session, so the summary a client shows
// the title from stays current between snapshots: "title" is replaced,
// "archived" set (true) or removed (false, as the summary omits it). A
// worker's edit, a view without a summary and a payload that does not
// decode leave it as it is.
func (v *View) applySessionEdit(ev *protocol.EventEnvelope) error {
	var p protocol.SessionEdit
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return err
	}
	if p.Title == nil && p.Archived == nil {
		return nil
	}
	if id := v.sessionID(); id == "" || id != ev.SessionID {
		return nil
	}
	var sum map[string]json.RawMessage
	if err := json.Unmarshal(v.Session, &sum); err != nil || sum == nil {
		return err
	}
	if p.Title != nil {
		sum["title"], _ = json.Marshal(*p.Title)
	}
	if p.Archived != nil {
		if *p.Archived {
			sum["archived"] = json.RawMessage("true")
		} else {
			delete(sum, "archived")
		}
	}
	b, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	v.Session = b
	return nil
}
