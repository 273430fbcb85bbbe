package acp

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image"
	"image/png"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/internal/servertest"
)

// TestPromptWithAnImage: initialize advertises promptCapabilities.image;
// a prompt with an image block reaches the model as an image (the demo
// model says what it received); an image the server refuses (a PNG
// sent as a JPEG) is an invalid-params error carrying the server's
// reason.
func TestPromptWithAnImage(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	s := serveAgent(t, h.URL)
	if r := s.initialize(t); !r.AgentCapabilities.PromptCapabilities.Image {
		t.Fatalf("capabilities %+v", r.AgentCapabilities.PromptCapabilities)
	}
	sid := s.newSession(t, h.Workspace)
	var b bytes.Buffer
	servertest.Must(t, png.Encode(&b, image.NewGray(image.Rect(0, 0, 9, 4))))
	data := base64.StdEncoding.EncodeToString(b.Bytes())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	r, err := s.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sdk.SessionId(sid),
		Prompt: []sdk.ContentBlock{sdk.TextBlock("what is this?"), sdk.ImageBlock(data, "image/png")}})
	if err != nil || r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", r, err)
	}
	if got := agentText(s.ed.all()); !strings.Contains(got, "I see 1 image (PNG 9×4)") {
		t.Errorf("agent text %q", got)
	}
	_, err = s.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sdk.SessionId(sid),
		Prompt: []sdk.ContentBlock{sdk.TextBlock("and this?"), sdk.ImageBlock(data, "image/jpeg")}})
	var re *sdk.RequestError
	if !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(re.Message, "media_type says image/jpeg but the data is PNG") {
		t.Errorf("a lying image: %v", err)
	}
}
