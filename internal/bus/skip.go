package bus

// Skipper is a LiveSink told when the delivery point of a tree moves
// past events it was never handed: CatchUp and Resume (cluster mode:
// what the store or the log holds up to there is served from the
// store), and an emitter made from the store for a session whose
// stored events are newer than what its tree delivered (a worker joining
// its planner's outbox after a restart). A sink that keeps what it was
// delivered of a session, such as the hub's replay window, no longer
// holds every event of the tree's sessions up to the delivery point and
// must forget it. Skipped gets every session of the tree this bus has
// an emitter for; it is called with the tree's outbox held and must not
// block.
type Skipper interface {
	Skipped(sessionIDs []string)
}

// moveLastOut moves the tree's delivery point to at least id, without
// delivering anything, and tells the Skippers if it moved. o.outMu is
// held; also names a session joining the tree that is not among its
// emitters yet.
func (b *Bus) moveLastOut(o *outbox, id, also string) {
	if id <= o.lastOut {
		return
	}
	o.lastOut = id
	p := b.live.Load()
	if p == nil {
		return
	}
	var members []string
	for _, s := range *p {
		sk, ok := s.(Skipper)
		if !ok {
			continue
		}
		if members == nil {
			members = b.members(o, also)
		}
		sk.Skipped(members)
	}
}

// members lists the sessions of o's tree this bus has an emitter for,
// and also if it is not "".
func (b *Bus) members(o *outbox, also string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, 4)
	if also != "" {
		out = append(out, also)
	}
	for id, e := range b.emitters {
		if e.o == o && id != also {
			out = append(out, id)
		}
	}
	return out
}
