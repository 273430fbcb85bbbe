package stream

import (
	"context"
	"errors"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/protocol"
)

// read decodes client frames until the connection ends. It never writes:
// replies go to the writer through ctrl, and a refused frame gets an
// error frame while the connection stays open (spec §9: bad input never
// crashes anything). A frame over the read limit makes the library close
// the connection with 1009.
func (c *conn) read(ctx context.Context) {
	defer close(c.done)
	for {
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			c.reply(protocol.CodeInvalidFrame, "binary frames are not accepted; send JSON text frames")
			continue
		}
		f, err := protocol.DecodeClientFrame(data)
		if err != nil {
			var de *protocol.DecodeError
			errors.As(err, &de)
			c.reply(de.Code, de.Message)
			continue
		}
		switch f.Type {
		case protocol.TypeSubscribe:
			c.subMu.Lock()
			refusal := ""
			if c.attached {
				refusal = alreadySubscribed
			} else {
				select {
				case c.subs <- f.Subscribe:
				default:
					refusal = "a subscribe is already being processed"
				}
			}
			c.subMu.Unlock()
			if refusal != "" {
				c.reply(protocol.CodeAlreadySubscribe, refusal)
			}
		case protocol.TypeCancel:
			c.cancelTurn(ctx, f.Cancel)
		case protocol.TypePing:
			c.send(protocol.Marshal(protocol.Heartbeat{Type: protocol.TypePong, Nonce: f.Ping.Nonce}))
		case protocol.TypePong:
			c.hb.pong()
		}
	}
}

// cancelTurn cancels through the same path as the HTTP endpoint. The
// outcome reaches every client as events; only failures are answered.
func (c *conn) cancelTurn(ctx context.Context, f *protocol.Cancel) {
	_, err := c.s.cancel.Cancel(ctx, c.sid, f.TurnID, f.Reason)
	switch {
	case err == nil:
	case errors.Is(err, session.ErrTurnNotFound), errors.Is(err, session.ErrNotFound):
		c.reply(protocol.CodeCancelFailed, err.Error())
	default:
		c.s.log.Error("cancel from stream", "session", c.sid, "turn", f.TurnID, "err", err)
		c.reply(protocol.CodeCancelFailed, "the cancel could not be applied")
	}
}

const alreadySubscribed = "this connection is already subscribed; open another to change the filter"

func (c *conn) reply(code, msg string) { c.send(errorFrame(code, msg)) }

func errorFrame(code, msg string) []byte {
	return protocol.Marshal(protocol.Error{Type: protocol.TypeError, Code: code, Message: msg})
}

// send queues a reply for the writer without blocking; a client flooding
// the server past the reply queue loses replies.
func (c *conn) send(frame []byte) {
	select {
	case c.ctrl <- frame:
	default:
	}
}
