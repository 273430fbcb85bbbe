package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/metis-agent/metis/protocol"
)

// Follow-ups and images (docs/conversation.md): a message sent while a
// turn runs is queued after it or steered into it; a message may carry
// images.

// TurnRequest is the body of POST /sessions/{id}/turns.
type TurnRequest = protocol.TurnRequest

// TurnAccepted is its answer: the turn started, queued or steered into.
type TurnAccepted = protocol.TurnAccepted

// ImageInput is one image of a TurnRequest.
type ImageInput = protocol.ImageInput

// SubmitTurn sends a user message with everything POST
// /sessions/{id}/turns takes: images, queue, steer. A busy session
// answers an *APIError with code turn_in_flight unless Queue or Steer is
// set; a full queue queue_full; a steer into a turn being cancelled
// turn_cancelling; a refused image invalid_image.
func (c *Client) SubmitTurn(ctx context.Context, sessionID string, req TurnRequest) (TurnAccepted, error) {
	var out TurnAccepted
	err := c.do(ctx, http.MethodPost, "/sessions/"+url.PathEscape(sessionID)+"/turns", req, &out)
	return out, err
}

// Queue sends a message that starts a turn now if the session is idle,
// or waits in its queue behind the running turn (Queued, Position).
func (c *Client) Queue(ctx context.Context, sessionID, content string, images ...ImageInput) (TurnAccepted, error) {
	return c.SubmitTurn(ctx, sessionID, TurnRequest{Content: content, Images: images, Queue: true})
}

// Steer sends a message into the running turn, which takes it at its
// next model call (turn.steered); if that turn ends first the message
// becomes the next queued turn, and with no turn running it starts one.
// expectedTurnID, if set, must be the running turn (else turn_mismatch).
func (c *Client) Steer(ctx context.Context, sessionID, content, expectedTurnID string, images ...ImageInput) (TurnAccepted, error) {
	return c.SubmitTurn(ctx, sessionID, TurnRequest{Content: content, Images: images, Steer: true, ExpectedTurnID: expectedTurnID})
}

// CancelTurn cancels a turn, running or queued, and returns what the
// cancel did: cancelling, already_cancelling, already_ended, or, for a
// turn that waited in the queue, dequeued (it never starts).
func (c *Client) CancelTurn(ctx context.Context, sessionID, turnID, reason string) (protocol.CancelResult, error) {
	var out struct {
		Status protocol.CancelResult `json:"status"`
	}
	err := c.do(ctx, http.MethodPost, "/sessions/"+url.PathEscape(sessionID)+"/turns/"+url.PathEscape(turnID)+"/cancel",
		map[string]string{"reason": reason}, &out)
	return out.Status, err
}

// MaxImageBytes is the most bytes Image reads of an image.
const MaxImageBytes = 64 << 20

// Image fetches an image a session holds by its SHA-256 (an image
// block's sha256) and returns its bytes and media type.
func (c *Client) Image(ctx context.Context, sessionID, sha256 string) ([]byte, string, error) {
	path := "/sessions/" + url.PathEscape(sessionID) + "/images/" + url.PathEscape(sha256)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return nil, "", err
	}
	c.authorize(req.Header)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("metis: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, "", apiErrorOf(resp.StatusCode, raw)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxImageBytes))
	if err != nil {
		return nil, "", fmt.Errorf("metis: GET %s: %w", path, err)
	}
	return b, resp.Header.Get("Content-Type"), nil
}

// ImageFile reads an image file to send (the TUI's /image PATH): its
// media type is told from its content, never from its name; a file that
// is no PNG, JPEG, GIF or WebP is refused here (the server checks it
// again, fully).
func ImageFile(path string) (ImageInput, error) {
	f, err := os.Open(path)
	if err != nil {
		return ImageInput{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxImageBytes))
	if err != nil {
		return ImageInput{}, err
	}
	mt := http.DetectContentType(b)
	switch mt {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return ImageInput{MediaType: mt, Data: b}, nil
	}
	return ImageInput{}, fmt.Errorf("%s is not a PNG, JPEG, GIF or WebP image (it looks like %s)", path, mt)
}
