package stream

import (
	"strconv"
	"sync/atomic"
)

// heartbeat implements spec §3.8 on the writer's ticker: a tick after an
// interval without writes sends a ping; a tick that finds PingMisses pings
// unanswered closes the connection. Any pong answers every ping sent so
// far. Pings do not count as activity.
type heartbeat struct {
	misses      int
	wrote       bool         // writer goroutine only
	outstanding atomic.Int32 // pings sent since the last pong
	seq         int
}

type hbAction int

const (
	hbNone hbAction = iota
	hbPing
	hbDead
)

func (h *heartbeat) active() { h.wrote = true }

func (h *heartbeat) tick() hbAction {
	if h.wrote {
		h.wrote = false
		return hbNone
	}
	if int(h.outstanding.Load()) >= h.misses {
		return hbDead
	}
	h.outstanding.Add(1)
	return hbPing
}

func (h *heartbeat) nonce() string {
	h.seq++
	return "srv-" + strconv.Itoa(h.seq)
}

// pong runs on the reader goroutine.
func (h *heartbeat) pong() { h.outstanding.Store(0) }
