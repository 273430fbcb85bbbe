package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/protocol"
)

// Driving a conversation (docs/conversation.md): images, stored once by
// content outside the event rows, and the turns waiting in a session's
// queue.

// schemaV8 adds images, the sessions that hold each (an image is served
// only to the sessions that sent or read it), and queued turns. A queued
// turn's row is kept after it starts or is cancelled (ended_event_id is
// then the id of the turn.started or turn.cancelled that ended its wait),
// so a snapshot can show the queue as of any event.
const schemaV8 = `
CREATE TABLE IF NOT EXISTS images (
	sha256     TEXT    PRIMARY KEY,
	media_type TEXT    NOT NULL,
	size       INTEGER NOT NULL,
	width      INTEGER NOT NULL,
	height     INTEGER NOT NULL,
	data       BLOB    NOT NULL,
	created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS session_images (
	session_id TEXT NOT NULL,
	sha256     TEXT NOT NULL,
	PRIMARY KEY (session_id, sha256)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS session_images_sha ON session_images(sha256);
CREATE TABLE IF NOT EXISTS queued_turns (
	turn_id         TEXT    PRIMARY KEY,
	session_id      TEXT    NOT NULL,
	message         TEXT    NOT NULL,
	model           TEXT    NOT NULL DEFAULT '',
	source          TEXT    NOT NULL DEFAULT '',
	queued_at       INTEGER NOT NULL,
	queued_event_id TEXT    NOT NULL DEFAULT '',
	ended_event_id  TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS queued_turns_session ON queued_turns(session_id, queued_event_id);
CREATE INDEX IF NOT EXISTS queued_turns_open ON queued_turns(queued_event_id) WHERE ended_event_id = '';
`

// Image is a stored image: its bytes and what they are.
type Image struct {
	SHA256    string
	MediaType string
	Size      int64
	Width     int
	Height    int
	Data      []byte
}

// PutImages stores images for a session: each image's bytes once,
// whatever sessions hold it, and the session's right to it. It is
// committed with the event whose message first refers to the images.
type PutImages struct {
	SessionID string
	Images    []Image
}

// QueuedTurn is a turn waiting in a session's queue (or, once
// EndedEventID is set, one that waited).
type QueuedTurn struct {
	TurnID    string
	SessionID string
	// Message is the user message the turn starts with (its images are
	// references; their bytes are stored with the turn.queued event).
	Message message.Message
	// Model is the model the turn was asked to run on ("": the
	// session's).
	Model    string
	Source   string // protocol.QueueSourceQueue or QueueSourceSteer
	QueuedAt time.Time
	// QueuedEventID is the turn.queued event's id (set by the bus),
	// EndedEventID that of the turn.started or turn.cancelled that ended
	// the wait ("" while it waits).
	QueuedEventID, EndedEventID string
}

// QueueTurn records a queued turn; the bus stamps it with its
// turn.queued event's id.
type QueueTurn struct{ Turn QueuedTurn }

// EndQueuedTurn ends a queued turn's wait; the bus stamps it with the
// id of the turn.started or turn.cancelled it is committed with.
type EndQueuedTurn struct {
	TurnID  string
	EventID string
}

// LinkImages gives a session the right to images already stored (a
// fork's copies of its source's messages refer to them), without their
// bytes. An image no longer stored is skipped: the session's message
// then refers to an image it cannot serve, as any message does once
// its image is gone.
type LinkImages struct {
	SessionID string
	SHA256s   []string
}

func (PutImages) isOp()     {}
func (LinkImages) isOp()    {}
func (QueueTurn) isOp()     {}
func (EndQueuedTurn) isOp() {}

// StampEvent implements EventStamper.
func (q QueueTurn) StampEvent(id string) Op { q.Turn.QueuedEventID = id; return q }

// StampEvent implements EventStamper.
func (e EndQueuedTurn) StampEvent(id string) Op { e.EventID = id; return e }

func (o PutImages) apply(t *txn) error {
	if o.SessionID == "" {
		return errors.New("store: put images: no session id")
	}
	for _, im := range o.Images {
		if im.SHA256 == "" || len(im.Data) == 0 {
			return fmt.Errorf("store: put images: image %q has no hash or no bytes", im.SHA256)
		}
		if _, err := t.tx.Exec(`INSERT INTO images (sha256, media_type, size, width, height, data, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING`,
			im.SHA256, im.MediaType, im.Size, im.Width, im.Height, im.Data, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("store: put image %s: %w", im.SHA256, err)
		}
		if _, err := t.tx.Exec(`INSERT INTO session_images (session_id, sha256) VALUES (?, ?)
ON CONFLICT DO NOTHING`, o.SessionID, im.SHA256); err != nil {
			return fmt.Errorf("store: put image %s: %w", im.SHA256, err)
		}
	}
	return nil
}

func (o LinkImages) apply(t *txn) error {
	if o.SessionID == "" {
		return errors.New("store: link images: no session id")
	}
	for _, sha := range o.SHA256s {
		if _, err := t.tx.Exec(`INSERT INTO session_images (session_id, sha256)
SELECT ?, sha256 FROM images WHERE sha256 = ? ON CONFLICT DO NOTHING`, o.SessionID, sha); err != nil {
			return fmt.Errorf("store: link image %s: %w", sha, err)
		}
	}
	return nil
}

func (o QueueTurn) apply(t *txn) error {
	q := o.Turn
	if q.TurnID == "" || q.SessionID == "" {
		return errors.New("store: queue turn: missing turn or session id")
	}
	msg, err := json.Marshal(q.Message)
	if err != nil {
		return fmt.Errorf("store: queue turn %s: %w", q.TurnID, err)
	}
	if _, err := t.tx.Exec(`INSERT INTO queued_turns (turn_id, session_id, message, model, source, queued_at, queued_event_id)
VALUES (?, ?, ?, ?, ?, ?, ?)`, q.TurnID, q.SessionID, string(msg), q.Model, q.Source, nanos(q.QueuedAt), q.QueuedEventID); err != nil {
		if isUnique(err) {
			return fmt.Errorf("store: queue turn %s: %w", q.TurnID, ErrDuplicate)
		}
		return fmt.Errorf("store: queue turn %s: %w", q.TurnID, err)
	}
	return nil
}

func (o EndQueuedTurn) apply(t *txn) error {
	res, err := t.tx.Exec(`UPDATE queued_turns SET ended_event_id = ? WHERE turn_id = ? AND ended_event_id = ''`, o.EventID, o.TurnID)
	if err != nil {
		return fmt.Errorf("store: end queued turn %s: %w", o.TurnID, err)
	}
	return mustAffect(res, "end queued turn", o.TurnID)
}

// SessionImage returns an image a session holds, or an error wrapping
// ErrNotFound (also for an image only other sessions hold).
func (s *Store) SessionImage(ctx context.Context, sessionID, sha string) (Image, error) {
	if err := s.readable(); err != nil {
		return Image{}, err
	}
	var im Image
	err := s.rdb.QueryRowContext(ctx, `SELECT i.sha256, i.media_type, i.size, i.width, i.height, i.data
FROM session_images si JOIN images i ON i.sha256 = si.sha256 WHERE si.session_id = ? AND si.sha256 = ?`, sessionID, sha).
		Scan(&im.SHA256, &im.MediaType, &im.Size, &im.Width, &im.Height, &im.Data)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Image{}, fmt.Errorf("store: image %s of session %s: %w", sha, sessionID, err)
	}
	return im, nil
}

// ImageData returns an image's bytes by its SHA-256 (the agent loop
// reads the images of a conversation it sends), or an error wrapping
// ErrNotFound.
func (s *Store) ImageData(ctx context.Context, sha string) ([]byte, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	var data []byte
	err := s.rdb.QueryRowContext(ctx, `SELECT data FROM images WHERE sha256 = ?`, sha).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: image %s: %w", sha, err)
	}
	return data, nil
}

const queuedCols = `turn_id, session_id, message, model, source, queued_at, queued_event_id, ended_event_id`

// sqlQueuedAsOf selects a session's queue as of an event id (?2 and ?3).
const sqlQueuedAsOf = `SELECT ` + queuedCols + ` FROM queued_turns
WHERE session_id = ? AND queued_event_id <> '' AND queued_event_id <= ? AND (ended_event_id = '' OR ended_event_id > ?)
ORDER BY queued_event_id`

// OpenQueuedTurns returns every turn still waiting in a queue, in the
// order they were queued.
func (s *Store) OpenQueuedTurns(ctx context.Context) ([]QueuedTurn, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	return s.queryQueued(ctx, s.rdb, `SELECT `+queuedCols+` FROM queued_turns WHERE ended_event_id = '' ORDER BY queued_event_id`)
}

// QueuedTurnsAsOf returns the turns of a session's queue as a snapshot
// at event id asOf shows them: queued at or before it, and not started
// or cancelled at or before it; in the order they were queued.
func (s *Store) QueuedTurnsAsOf(ctx context.Context, sessionID, asOf string) ([]QueuedTurn, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	return s.queryQueued(ctx, s.rdb, sqlQueuedAsOf, sessionID, asOf, asOf)
}

func (s *Store) queryQueued(ctx context.Context, q querier, query string, args ...any) ([]QueuedTurn, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: queued turns: %w", err)
	}
	defer rows.Close()
	var out []QueuedTurn
	for rows.Next() {
		var (
			qt     QueuedTurn
			msg    string
			queued int64
		)
		if err := rows.Scan(&qt.TurnID, &qt.SessionID, &msg, &qt.Model, &qt.Source, &queued, &qt.QueuedEventID, &qt.EndedEventID); err != nil {
			return nil, fmt.Errorf("store: queued turns: %w", err)
		}
		if err := json.Unmarshal([]byte(msg), &qt.Message); err != nil {
			return nil, fmt.Errorf("store: queued turn %s: message: %w", qt.TurnID, err)
		}
		qt.QueuedAt = fromNanos(queued)
		out = append(out, qt)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: queued turns: %w", err)
	}
	return out, nil
}

// Wire returns the queued turn as a session summary lists it.
func (q QueuedTurn) Wire() protocol.QueuedTurn {
	return protocol.QueuedTurn{TurnID: q.TurnID, MessageID: q.Message.ID, Preview: Title(q.Message.PlainText()),
		Images: len(q.Message.Images()), Source: q.Source, QueuedAt: q.QueuedAt}
}

// WireQueue returns queued turns as a session summary lists them (nil
// for none).
func WireQueue(qs []QueuedTurn) []protocol.QueuedTurn {
	var out []protocol.QueuedTurn
	for _, q := range qs {
		out = append(out, q.Wire())
	}
	return out
}
