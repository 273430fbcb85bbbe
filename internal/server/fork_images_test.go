package server_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// TestForkServesTheImagesItCopied: a fork's copies of its source's
// messages refer to the source's images, those of a user message and
// those of a tool result (read_file of a PNG); GET
// /sessions/{fork}/images/{sha256} serves each of them, as it does for
// the source.
func TestForkServesTheImagesItCopied(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	sent, read := pngOf(t, 3, 2), pngOf(t, 6, 4)
	servertest.Must(t, os.WriteFile(filepath.Join(h.Workspace, "shot.png"), read, 0o644))
	st, _, e := postTurn(t, h, sid, protocol.TurnRequest{Content: "what is this?", Images: []protocol.ImageInput{{MediaType: "image/png", Data: sent}}})
	if st != http.StatusAccepted {
		t.Fatalf("%d %+v", st, e)
	}
	h.WaitTurn(sid)
	runTurn(h, sid, `/tool read_file {"path": "shot.png"}`)

	var fork protocol.ForkResult
	if st := h.Do("POST", "/sessions/"+sid+"/fork", map[string]string{}, &fork); st != http.StatusCreated {
		t.Fatalf("fork: %d", st)
	}
	for name, data := range map[string][]byte{"the user's image": sent, "read_file's image": read} {
		for _, s := range []string{sid, fork.ID} {
			resp, body := getImage(t, h, s, shaOf(data))
			if resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
				t.Errorf("%s of session %s (fork %v): %d, %d bytes", name, s, s == fork.ID, resp.StatusCode, len(body))
			}
		}
	}
}
