package acp

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

// With no --server and no $METIS_SERVER, Run talks to the server that
// answers on <home>/metis.sock (--home here), HTTP calls and stream
// alike, and starts no server of its own.
func TestRunUsesTheSocket(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "", func(c *config.Config) { c.Socket = filepath.Join(c.Home, config.SocketName) })
	t.Setenv("METIS_SERVER", "")
	start := func(context.Context, string, []string) (func(), error) {
		t.Error("Run started a server although one answers on the socket")
		return func() {}, nil
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr servertest.SyncBuffer
	code := make(chan int, 1)
	go func() {
		defer outW.Close()
		code <- Run(context.Background(), []string{"--home", h.Home, "--log-level", "warn"}, inR, outW, &stderr, Options{StartServer: start})
	}()
	ed := newEditor()
	conn := sdk.NewClientSideConnection(ed, inW, outR)
	conn.SetLogger(discard())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: 1}); err != nil {
		t.Fatal(err)
	}
	ns, err := conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: h.Workspace, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("/echo over the socket")}})
	if err != nil || r.StopReason != sdk.StopReasonEndTurn || agentText(ed.all()) != "over the socket" {
		t.Fatalf("prompt: %+v, %v, text %q", r, err, agentText(ed.all()))
	}
	inW.Close()
	if c := <-code; c != 0 {
		t.Errorf("exit %d; stderr %s", c, stderr.String())
	}
}
