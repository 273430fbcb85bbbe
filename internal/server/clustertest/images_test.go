package clustertest_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// noisyPNG is a PNG of w×h random pixels: it does not compress, so a
// 700×700 one is over 1 MB, more than a NATS message holds by default.
func noisyPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	if _, err := rand.Read(img.Pix); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	servertest.Must(t, png.Encode(&b, img))
	return b.Bytes()
}

func imageSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// getImageOn answers GET /sessions/{sid}/images/{sha} on node h.
func getImageOn(t *testing.T, h *servertest.Harness, sid, sha string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), servertest.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL+"/sessions/"+sid+"/images/"+sha, nil)
	servertest.Must(t, err)
	resp, err := http.DefaultClient.Do(req)
	servertest.Must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	servertest.Must(t, err)
	return resp.StatusCode, b
}

// TestImagesReachEveryNode: images of a session owned by node A, one
// sent with a turn and one a tool read (each over 1 MB, more than a
// NATS message holds by default), are served by node B too, for the
// session and for a fork of it made on A.
func TestImagesReachEveryNode(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	sent, read := noisyPNG(t, 700, 700), noisyPNG(t, 720, 700)
	if len(sent) <= 1<<20 || len(read) <= 1<<20 {
		t.Fatalf("images of %d and %d bytes: want more than 1 MB", len(sent), len(read))
	}
	servertest.Must(t, os.WriteFile(filepath.Join(a.Workspace, "shot.png"), read, 0o644))
	var acc protocol.TurnAccepted
	if st := a.Do(http.MethodPost, "/sessions/"+sid+"/turns", protocol.TurnRequest{Content: "look",
		Images: []protocol.ImageInput{{MediaType: "image/png", Data: sent}}}, &acc); st != http.StatusAccepted {
		t.Fatalf("turn with an image: %d", st)
	}
	a.WaitTurn(sid)
	a.Submit(sid, `/tool read_file {"path": "shot.png"}`)
	a.WaitTurn(sid)
	var fork protocol.ForkResult
	if st := a.Do(http.MethodPost, "/sessions/"+sid+"/fork", map[string]string{}, &fork); st != http.StatusCreated {
		t.Fatalf("fork: %d", st)
	}
	for _, s := range []string{sid, fork.ID} {
		for name, data := range map[string][]byte{"sent": sent, "read": read} {
			var st int
			var body []byte
			servertest.WaitFor(t, name+" image of "+s+" on node b", func() bool {
				st, body = getImageOn(t, b, s, imageSHA(data))
				return st == http.StatusOK
			})
			if !bytes.Equal(body, data) {
				t.Errorf("node b serves the %s image of %s with %d bytes, want %d", name, s, len(body), len(data))
			}
		}
	}
}

// TestQueuedTurnReachesEveryNode: a turn queued on node A, with an
// image, while A runs a turn, is in node B's store (its projection),
// and its image served by B; once it ran, it waits no more on B.
func TestQueuedTurnReachesEveryNode(t *testing.T) {
	url := startNATS(t)
	a, b := node(t, url, "node-a"), node(t, url, "node-b")
	sid := a.CreateSession()
	a.Submit(sid, `/tool shell {"command": "while [ ! -f go ]; do sleep 0.05; done; echo released"}`)
	pic := noisyPNG(t, 64, 64)
	var acc protocol.TurnAccepted
	servertest.WaitFor(t, "the queued turn accepted", func() bool {
		// 409 until the first turn runs; then the second is queued.
		return a.Do(http.MethodPost, "/sessions/"+sid+"/turns", protocol.TurnRequest{Content: "/echo next", Queue: true,
			Images: []protocol.ImageInput{{MediaType: "image/png", Data: pic}}}, &acc) == http.StatusAccepted && acc.Queued
	})
	queue := func() []store.QueuedTurn {
		q, err := b.Server.Store.OpenQueuedTurns(t.Context())
		servertest.Must(t, err)
		return q
	}
	servertest.WaitFor(t, "the queue on node b", func() bool {
		q := queue()
		return len(q) == 1 && q[0].TurnID == acc.TurnID && q[0].SessionID == sid && len(q[0].Message.Images()) == 1
	})
	if st, body := getImageOn(t, b, sid, imageSHA(pic)); st != http.StatusOK || !bytes.Equal(body, pic) {
		t.Errorf("node b serves the queued turn's image: %d, %d bytes", st, len(body))
	}
	servertest.Must(t, os.WriteFile(filepath.Join(a.Workspace, "go"), nil, 0o644))
	servertest.WaitFor(t, "the queue emptied on node b", func() bool { return len(queue()) == 0 })
	a.WaitTurn(sid)
}
