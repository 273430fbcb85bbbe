//go:build unix

package benchtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/metis-agent/metis/internal/benchtest/cpu"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The replay client is a Child that performs replays: for each command
// line (a ReplayCmd in JSON) it reconnects, reads the replayed events
// and answers with one line (a ReplayResult in JSON). A package whose
// benchmarks use it runs ServeReplays from its init or TestMain when
// IsReplayClient.

const replayClientEnv = "METIS_BENCH_REPLAY_CLIENT"

// Kinds of replay (ReplayCmd.Kind).
const (
	// ReplayMetis attaches to a metis session (GET /sessions/{id}),
	// subscribes over WebSocket with the types and since, checks the
	// ack's replay_event_count and reads N event frames.
	ReplayMetis = "metis"
	// ReplayFloor dials a bare WebSocket URL that writes frames on
	// connect (the stream benchmarks' floor) and reads N event frames.
	ReplayFloor = "floor"
	// ReplaySSE reconnects to a metis session's SSE stream (GET
	// /sessions/{id}/events with the types and since in the query) and
	// reads N event records.
	ReplaySSE = "sse"
)

// ReplayCmd is one replay the replay client performs.
type ReplayCmd struct {
	Kind  string   `json:"kind"` // ReplayMetis, ReplayFloor or ReplaySSE
	URL   string   `json:"url"`  // metis: the HTTP base; floor: the ws:// URL
	SID   string   `json:"sid,omitempty"`
	Since string   `json:"since,omitempty"`
	Types []string `json:"types,omitempty"`
	N     int      `json:"n"`              // events to read
	Keep  bool     `json:"keep,omitempty"` // answer with the frames (WebSocket kinds)
	// Retry retries the attach while the server answers 404 (a cluster
	// node that just started shows the session once its projection
	// applied it); the time runs from the first attempt.
	Retry bool `json:"retry,omitempty"`
}

// ReplayResult is the replay client's answer to a ReplayCmd.
type ReplayResult struct {
	NS     int64    `json:"ns"`    // from the attach request (floor: the dial) to the last event read
	Bytes  int64    `json:"bytes"` // the event frames' (SSE: records') total size
	Frames [][]byte `json:"frames,omitempty"`
	Err    string   `json:"err,omitempty"`
}

// replayTimeout bounds one replay in the client.
const replayTimeout = 5 * time.Minute

// IsReplayClient reports whether this process is a replay client that
// StartReplayClient started.
func IsReplayClient() bool { return os.Getenv(replayClientEnv) != "" }

// ServeReplays is the replay client: it performs the replays its
// standard input asks for, one ReplayCmd a line, answering each with
// one ReplayResult line, until its input ends. It returns the process's
// exit code.
func ServeReplays() int {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	out := json.NewEncoder(os.Stdout)
	hc := &http.Client{Transport: &http.Transport{}}
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var cmd ReplayCmd
			var res ReplayResult
			if uerr := json.Unmarshal(line, &cmd); uerr != nil {
				res.Err = "bad command: " + uerr.Error()
			} else {
				res = replay(hc, cmd)
			}
			if eerr := out.Encode(res); eerr != nil {
				return 1
			}
		}
		if err != nil {
			return 0
		}
	}
}

func replay(hc *http.Client, cmd ReplayCmd) ReplayResult {
	ctx, cancel := context.WithTimeout(context.Background(), replayTimeout)
	defer cancel()
	start := time.Now()
	var ws *websocket.Conn
	var err error
	switch cmd.Kind {
	case ReplaySSE:
		return replaySSE(ctx, hc, cmd, start)
	case ReplayFloor:
		ws, _, err = websocket.Dial(ctx, cmd.URL, nil)
	case ReplayMetis:
		ws, err = subscribeReplay(ctx, hc, cmd)
	default:
		return ReplayResult{Err: fmt.Sprintf("no replay kind %q", cmd.Kind)}
	}
	if err != nil {
		return ReplayResult{Err: err.Error()}
	}
	defer ws.CloseNow()
	frames, n, err := ReadEvents(ctx, ws, cmd.N, cmd.Keep)
	d := time.Since(start)
	if err != nil {
		return ReplayResult{Err: err.Error()}
	}
	return ReplayResult{NS: int64(d), Bytes: n, Frames: frames}
}

// subscribeReplay attaches and subscribes (retrying while the session
// is not found, if asked) and checks the ack's replay_event_count.
func subscribeReplay(ctx context.Context, hc *http.Client, cmd ReplayCmd) (*websocket.Conn, error) {
	var ws *websocket.Conn
	var ack []byte
	var err error
	for {
		ws, ack, err = Dial(ctx, hc, cmd.URL, cmd.SID, cmd.Types, cmd.Since)
		if err == nil || !cmd.Retry || !errors.Is(err, ErrNotFound) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	var a struct {
		Count int `json:"replay_event_count"`
	}
	if err := json.Unmarshal(ack, &a); err != nil || a.Count != cmd.N {
		ws.CloseNow()
		return nil, fmt.Errorf("subscribe_ack %s: replay_event_count %d, want %d (%v)", ack, a.Count, cmd.N, err)
	}
	return ws, nil
}

var sseEventPrefix = []byte(`data: {"type":"event"`)

// replaySSE reads cmd.N event records of the session's SSE stream.
func replaySSE(ctx context.Context, hc *http.Client, cmd ReplayCmd, start time.Time) ReplayResult {
	u := cmd.URL + "/sessions/" + cmd.SID + "/events?types=" + strings.Join(cmd.Types, ",") + "&since=" + cmd.Since
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return ReplayResult{Err: err.Error()}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return ReplayResult{Err: err.Error()}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ReplayResult{Err: "GET " + u + ": " + resp.Status}
	}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var total int64
	for got := 0; got < cmd.N; {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A record longer than the buffer: an event's data line.
			for err == bufio.ErrBufferFull {
				total += int64(len(line))
				line, err = r.ReadSlice('\n')
			}
			got++
			total += int64(len(line))
			continue
		}
		if err != nil {
			return ReplayResult{Err: fmt.Sprintf("after %d events: %v", got, err)}
		}
		if bytes.HasPrefix(line, sseEventPrefix) {
			got++
			total += int64(len(line))
		}
	}
	return ReplayResult{NS: int64(time.Since(start)), Bytes: total}
}

// ReplayClient is the parent's handle on a replay client process.
type ReplayClient struct {
	c *Child
}

// StartReplayClient starts a replay client; it ends when tb's test or
// benchmark ends.
func StartReplayClient(tb testing.TB) *ReplayClient {
	tb.Helper()
	c, err := StartChild(replayClientEnv + "=1")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("replay client: %v", err)
		}
	})
	return &ReplayClient{c: c}
}

// Do runs one replay in the client and returns its result and the CPU
// time this process spent meanwhile: with the client in its own
// process, the server's CPU for the replay.
func (c *ReplayClient) Do(cmd ReplayCmd) (ReplayResult, time.Duration, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return ReplayResult{}, 0, err
	}
	cpu0 := cpu.Time()
	if err := c.c.Send(b); err != nil {
		return ReplayResult{}, 0, err
	}
	line, err := c.c.ReadLine()
	if err != nil {
		return ReplayResult{}, 0, fmt.Errorf("replay client: %w", err)
	}
	cpu := cpu.Time() - cpu0
	var res ReplayResult
	if err := json.Unmarshal(line, &res); err != nil {
		return res, 0, fmt.Errorf("replay client's answer: %w", err)
	}
	if res.Err != "" {
		return res, 0, fmt.Errorf("replay client: %s", res.Err)
	}
	return res, cpu, nil
}
