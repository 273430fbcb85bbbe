package protocol

import (
	"encoding/json"
	"time"
)

// Driving a conversation (docs/conversation.md): follow-ups sent while
// a turn runs (queued after it, or steered into it) and images.

// BlockImage is the content block of an image in a user message (or in
// a tool result's images): {"type": "image", "media_type", "sha256",
// "size", "width", "height"}. Its bytes are never in a message or an
// event: GET /sessions/{id}/images/{sha256} serves them.
const BlockImage = "image"

// Catalog events of follow-ups.
const (
	// EventTurnQueued: a turn was accepted into the session's queue
	// (POST /sessions/{id}/turns with "queue": true while another turn
	// runs, or a steered message whose turn ended before it could
	// enter). It carries the user message the turn will start with.
	EventTurnQueued EventType = "turn.queued"
	// EventTurnSteered: a message sent with "steer": true entered the
	// running turn at a model-call boundary; the model's next call sees
	// it. It carries the user message, stored with it.
	EventTurnSteered EventType = "turn.steered"
)

// TurnRequest is the body of POST /sessions/{id}/turns.
type TurnRequest struct {
	// Content is the user's text (required, at most 1 MiB).
	Content string `json:"content"`
	// Images are attached to the user message, in order (at most
	// max-images, each at most max-image-bytes).
	Images []ImageInput `json:"images,omitempty"`
	// Queue: while another turn runs, queue this one after it (202
	// with queued true) instead of refusing it with 409.
	Queue bool `json:"queue,omitempty"`
	// Steer: deliver the message into the running turn at its next
	// model-call boundary. Not with Queue.
	Steer bool `json:"steer,omitempty"`
	// ExpectedTurnID, with Steer: refuse (409 turn_mismatch) unless this
	// is the turn running.
	ExpectedTurnID string `json:"expected_turn_id,omitempty"`
}

// ImageInput is one image of a TurnRequest: its media type (image/png,
// image/jpeg, image/gif or image/webp; it must name the format the bytes
// are in) and its bytes, base64 (standard alphabet, padded) in JSON.
type ImageInput struct {
	MediaType string `json:"media_type"`
	Data      []byte `json:"data"`
}

// TurnAccepted is the answer (202) of POST /sessions/{id}/turns.
type TurnAccepted struct {
	// TurnID is the turn the message belongs to: the turn started or
	// queued, or, when Steered, the running turn it was sent into.
	TurnID string `json:"turn_id"`
	// Queued: the turn waits in the session's queue (Position is its
	// place, 1 = next).
	Queued   bool `json:"queued"`
	Position int  `json:"position,omitempty"`
	// Steered: the message waits for the running turn's next model
	// call (turn.steered), or, if that turn ends first, becomes a queued
	// turn of its own (turn.queued with the same message_id).
	Steered bool `json:"steered,omitempty"`
	// MessageID is the user message's id, the same in every event
	// that carries it.
	MessageID string `json:"message_id"`
}

// TurnQueuedPayload is the payload of EventTurnQueued.
type TurnQueuedPayload struct {
	// UserMessage is the message the turn will start with (canonical,
	// status complete); turn.started carries it again, same id.
	UserMessage json.RawMessage `json:"user_message"`
	// Position is the turn's place in the queue when it was accepted,
	// 1 for the next to run.
	Position int `json:"position"`
	// Source is QueueSourceQueue or QueueSourceSteer.
	Source string `json:"source"`
	// Model is the model the turn was asked to run on ("/model"),
	// omitted for the session's.
	Model string `json:"model,omitempty"`
}

// Sources of a queued turn.
const (
	// QueueSourceQueue: sent with "queue": true.
	QueueSourceQueue = "queue"
	// QueueSourceSteer: sent with "steer": true into a turn that ended
	// before its next model call.
	QueueSourceSteer = "steer"
)

// TurnSteeredPayload is the payload of EventTurnSteered.
type TurnSteeredPayload struct {
	// UserMessage is the steered message (canonical; its turn_id is the
	// running turn's).
	UserMessage json.RawMessage `json:"user_message"`
	// AfterMessageID is the message it follows in the conversation
	// (the tool results of the round before, usually).
	AfterMessageID string `json:"after_message_id,omitempty"`
	// CallIndex is the index, within the turn, of the model call that
	// first sees it.
	CallIndex int `json:"call_index"`
}

// QueuedTurn is one entry of a session summary's queued_turns.
type QueuedTurn struct {
	TurnID    string `json:"turn_id"`
	MessageID string `json:"message_id"`
	// Preview is the message's text, white space collapsed and cut at
	// 80 characters (as a title).
	Preview string `json:"preview"`
	// Images is how many images the message holds (omitted when none).
	Images   int       `json:"images,omitempty"`
	Source   string    `json:"source"`
	QueuedAt time.Time `json:"queued_at"`
}

// TurnPhaseQueued is turn.cancelled's phase for a turn cancelled while
// it waited in the queue: no other event of it was emitted.
const TurnPhaseQueued = "queued"

// CancelReasonStartFailed is turn.cancelled's reason (phase queued) for
// a queued turn that could not start (its workspace could not be
// opened, say).
const CancelReasonStartFailed = "start_failed"

// CancelDequeued answers a cancel of a queued turn: it was taken out of
// the queue and ended with turn.cancelled (phase queued) before the
// answer.
const CancelDequeued CancelResult = "dequeued"

// Error codes of follow-ups and images.
const (
	// CodeQueueFull (409): the session's queue holds max-queued-turns.
	CodeQueueFull = "queue_full"
	// CodeTurnCancelling (409): a steer into a turn that is being
	// cancelled; send it with "queue": true to run it after.
	CodeTurnCancelling = "turn_cancelling"
	// CodeTurnMismatch (409): a steer's expected_turn_id is not the
	// turn running.
	CodeTurnMismatch = "turn_mismatch"
	// CodeInvalidImage (400): an image was refused (its type, size,
	// dimensions, or it does not decode); nothing was stored.
	CodeInvalidImage = "invalid_image"
	// CodeImageNotFound (404): no image with that SHA-256 in that
	// session.
	CodeImageNotFound = "image_not_found"
)
