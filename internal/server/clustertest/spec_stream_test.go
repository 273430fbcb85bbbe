package clustertest_test

// Spec §11.1 items 1 and 6 over three nodes: every node's clients get
// the owner's stream, byte for byte.

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// TestCluster11_1_1_HappyPathStream: a turn submitted to node 2 runs on
// the owner (node 0); a client of each node gets its events in
// canonical order, exactly the ones the owner delivered; the text and
// thinking deltas rebuild each message.complete's final_content; and
// the node's messages endpoint, read as soon as its client has
// turn.completed, already holds those messages (a client never sees
// older state than an event it received), byte for byte the same on
// every node.
func TestCluster11_1_1_HappyPathStream(t *testing.T) {
	tri := startTrio(t)
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		sid := tri.session()
		var clients []streamtest.Conn
		for _, h := range tri.nodes {
			c, ack, _ := subscribe(t, tr, h, sid, "preset:chat", nil, false)
			if ack.Snapshot || ack.Since != nil || ack.ReplayEventCount != 0 || ack.StreamingGap {
				t.Fatalf("%s: ack %+v", h.Config.Node, ack)
			}
			clients = append(clients, c)
		}
		turn := tri.nodes[2].Submit(sid, "what is in my workspace?")
		var pages [][]byte
		for i, c := range clients {
			h := tri.nodes[i]
			evs, _ := readUntil(t, c, event.TurnCompleted, turn)
			what := h.Config.Node + "'s client"
			if got := streamtest.Collapse(streamtest.Types(evs)); !slices.Equal(got, streamtest.DemoTurnChat) {
				t.Fatalf("%s: event order\n got %v\nwant %v", what, got, streamtest.DemoTurnChat)
			}
			tri.sameAsOwner(what, sid, "", evs, streamtest.PresetTypes(event.PresetChat))
			final := rebuild(t, what, evs)

			page := rawGET(t, h, "/sessions/"+sid+"/messages?limit=500")
			var msgs struct {
				Messages []message.Message `json:"messages"`
			}
			if err := json.Unmarshal(page, &msgs); err != nil {
				t.Fatal(err)
			}
			persisted := map[string]message.Message{}
			for _, m := range msgs.Messages {
				persisted[m.ID] = m
			}
			for id, content := range final {
				m, ok := persisted[id]
				got, _ := json.Marshal(m.Content)
				if !ok || m.Status != message.StatusComplete || !streamtest.JSONEqual(got, content) {
					t.Fatalf("%s: message %s on its node: %s (%s), final_content %s", what, id, got, m.Status, content)
				}
			}
			pages = append(pages, page)
		}
		for i := 1; i < len(pages); i++ {
			if !bytes.Equal(pages[i], pages[0]) {
				t.Fatalf("messages on %s differ from the owner's:\n%s\n%s", tri.nodes[i].Config.Node, pages[i], pages[0])
			}
		}
	})
}

// rebuild checks that a client's deltas rebuild every message: per
// message and content block, the text and thinking deltas concatenate
// to message.complete's block and the tool input fragments to the tool
// use's input. It returns each message's final_content.
func rebuild(t *testing.T, what string, evs []*protocol.EventEnvelope) map[string]json.RawMessage {
	t.Helper()
	type block struct {
		msg string
		idx int
	}
	type delta struct {
		MessageID   string `json:"message_id"`
		Index       int    `json:"content_block_index"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
	}
	built := map[block]*strings.Builder{}
	final := map[string]json.RawMessage{}
	for _, e := range evs {
		switch event.Type(e.Type) {
		case event.TextDelta, event.ThinkingDelta, event.ToolUseInputDelta:
			var d delta
			if err := json.Unmarshal(e.Payload, &d); err != nil {
				t.Fatalf("%s: %s %s: %v", what, e.Type, e.Payload, err)
			}
			k := block{d.MessageID, d.Index}
			if built[k] == nil {
				built[k] = &strings.Builder{}
			}
			built[k].WriteString(d.Text + d.PartialJSON)
		case event.MessageComplete:
			var mc struct {
				MessageID    string          `json:"message_id"`
				FinalContent json.RawMessage `json:"final_content"`
			}
			if err := json.Unmarshal(e.Payload, &mc); err != nil {
				t.Fatalf("%s: message.complete %s: %v", what, e.Payload, err)
			}
			var blocks []message.Block
			if err := json.Unmarshal(mc.FinalContent, &blocks); err != nil {
				t.Fatal(err)
			}
			for i, b := range blocks {
				var got, want string
				if sb := built[block{mc.MessageID, i}]; sb != nil {
					got = sb.String()
				}
				switch b.Type {
				case message.BlockText:
					want = b.Text
				case message.BlockThinking:
					want = b.Thinking
				case message.BlockToolUse:
					if !streamtest.JSONEqual([]byte(got), b.Input) {
						t.Fatalf("%s: message %s block %d: input fragments %q, final input %s", what, mc.MessageID, i, got, b.Input)
					}
					continue
				}
				if got != want {
					t.Fatalf("%s: message %s block %d: deltas give %q, final_content %q", what, mc.MessageID, i, got, want)
				}
			}
			final[mc.MessageID] = mc.FinalContent
		}
	}
	if len(final) == 0 {
		t.Fatalf("%s: no message.complete", what)
	}
	return final
}

// TestCluster11_1_6_IdenticalStreamsFromEveryNode: two preset:chat
// clients and one preset:full client on each of the three nodes; a turn
// submitted to node 1 reaches all nine. Every chat client gets the same
// frames, byte for byte, as the owner's, which are exactly the events
// the owner delivered; the full clients get byte-identical frames from
// the turn's start on, the meta-events of the owner's clients
// included, and filtered to the chat types they are the chat stream.
func TestCluster11_1_6_IdenticalStreamsFromEveryNode(t *testing.T) {
	tri := startTrio(t)
	streamtest.EachTransport(t, func(t *testing.T, tr streamtest.Transport) {
		sid := tri.session()
		type client struct {
			c    streamtest.Conn
			node string
			full bool
		}
		var clients []client
		for _, h := range tri.nodes {
			for _, preset := range []string{"preset:chat", "preset:chat", "preset:full"} {
				c, _, _ := subscribe(t, tr, h, sid, preset, nil, false)
				clients = append(clients, client{c, h.Config.Node, preset == "preset:full"})
			}
		}
		turn := tri.nodes[1].Submit(sid, "what is in my workspace?")
		chat := streamtest.PresetTypes(event.PresetChat)
		var chatRaw, fullRaw [][]byte
		var chatIDs []string
		for _, cl := range clients {
			what := cl.node + "'s " + map[bool]string{false: "chat", true: "full"}[cl.full] + " client"
			evs, raw := readUntil(t, cl.c, event.TurnCompleted, turn)
			if !cl.full {
				if chatRaw == nil {
					chatRaw, chatIDs = raw, streamtest.IDs(evs)
					tri.sameAsOwner(what, sid, "", evs, chat)
				} else if !sameFrames(raw, chatRaw) {
					t.Fatalf("%s: %d frames differ from the owner's chat client's %d", what, len(raw), len(chatRaw))
				}
				continue
			}
			// The turn's part of the full stream: from turn.started on.
			start := slices.IndexFunc(evs, func(e *protocol.EventEnvelope) bool {
				return streamtest.UntilType(event.TurnStarted, turn)(e)
			})
			if start < 0 {
				t.Fatalf("%s: no turn.started", what)
			}
			var filtered []string
			for _, e := range evs[start:] {
				if chat[e.Type] {
					filtered = append(filtered, e.ID)
				}
			}
			if !slices.Equal(filtered, chatIDs) {
				t.Fatalf("%s: filtered to the chat types, %d events; the chat clients got %d", what, len(filtered), len(chatIDs))
			}
			if fullRaw == nil {
				fullRaw = raw[start:]
				tri.sameAsOwner(what, sid, evs[start].ID, evs[start+1:], nil)
			} else if !sameFrames(raw[start:], fullRaw) {
				t.Fatalf("%s: %d frames from turn.started differ from the owner's full client's %d", what, len(raw)-start, len(fullRaw))
			}
		}
	})
}

// sameFrames reports whether two lists of frames are byte-identical.
func sameFrames(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, bytes.Equal)
}
