package stream

import (
	"context"
	"errors"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/feed"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/protocol"
)

// read hands raw client frames to the run goroutine until the
// connection ends. A frame over the read limit makes the library close
// the connection with 1009.
func (c *conn) read(ctx context.Context) {
	defer close(c.done)
	for {
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
			return
		}
		select {
		case c.in <- feed.Inbound{Binary: typ != websocket.MessageText, Data: data}:
		case <-ctx.Done():
			return
		}
	}
}

// handle decodes and answers one client frame on the run goroutine. A
// refused frame gets an error frame and the connection stays open (spec
// §9: bad input never crashes anything). It returns the subscribe to
// process, if the frame was one and the connection is not subscribed
// yet, and false if a reply could not be written.
func (c *conn) handle(ctx context.Context, f feed.Inbound) (*protocol.Subscribe, bool) {
	if f.Binary {
		return nil, c.reply(protocol.CodeInvalidFrame, "binary frames are not accepted; send JSON text frames")
	}
	fr, err := protocol.DecodeClientFrame(f.Data)
	if err != nil {
		var de *protocol.DecodeError
		errors.As(err, &de)
		return nil, c.reply(de.Code, de.Message)
	}
	switch fr.Type {
	case protocol.TypeSubscribe:
		if c.subscribed {
			return nil, c.reply(protocol.CodeAlreadySubscribe, alreadySubscribed)
		}
		return fr.Subscribe, true
	case protocol.TypeCancel:
		return nil, c.cancelTurn(ctx, fr.Cancel)
	case protocol.TypePing:
		return nil, c.f.Send("", protocol.Marshal(protocol.Heartbeat{Type: protocol.TypePong, Nonce: fr.Ping.Nonce}))
	case protocol.TypePong:
		c.f.Pong()
	}
	return nil, true
}

// cancelTurn cancels through the same path as the HTTP endpoint. The
// outcome reaches every client as events; only failures are answered.
func (c *conn) cancelTurn(ctx context.Context, f *protocol.Cancel) bool {
	_, err := c.s.cancel.Cancel(ctx, c.sid, f.TurnID, f.Reason)
	switch {
	case err == nil:
		return true
	case errors.Is(err, session.ErrTurnNotFound), errors.Is(err, session.ErrNotFound):
		return c.reply(protocol.CodeCancelFailed, err.Error())
	default:
		c.s.log.Error("cancel from stream", "session", c.sid, "turn", f.TurnID, "err", err)
		return c.reply(protocol.CodeCancelFailed, "the cancel could not be applied")
	}
}

const alreadySubscribed = "this connection is already subscribed; open another to change the filter"

// reply writes an error frame.
func (c *conn) reply(code, msg string) bool {
	return c.f.Send("", protocol.Marshal(protocol.Error{Type: protocol.TypeError, Code: code, Message: msg}))
}
