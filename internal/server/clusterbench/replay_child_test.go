package clusterbench_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The replay benchmark's client runs in a child process (this test
// binary re-executed with replayChildEnv set; TestMain dispatches it),
// so that the benchmark's process holds the servers alone and its CPU
// time around a replay is theirs.

const replayChildEnv = "METIS_CLUSTERBENCH_REPLAY_CHILD"

// replayCmd is one replay the child performs; replayResult its answer.
type replayCmd struct {
	URL   string   `json:"url"` // the node's HTTP base
	SID   string   `json:"sid"`
	Since string   `json:"since"`
	Types []string `json:"types"`
	N     int      `json:"n"`
	// Retry asks the child to retry the attach while the node answers
	// 404: a node that just started shows the session once its
	// projection applied it.
	Retry bool `json:"retry,omitempty"`
}

type replayResult struct {
	NS    int64  `json:"ns"` // from the first attach request to the last replayed frame read
	Bytes int64  `json:"bytes"`
	Err   string `json:"err,omitempty"`
}

// replayChild performs the replays its stdin asks for, one JSON command
// a line, and answers each with one JSON line.
func replayChild() int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<16), 1<<20)
	out := json.NewEncoder(os.Stdout)
	hc := &http.Client{Transport: &http.Transport{}}
	for in.Scan() {
		var cmd replayCmd
		var res replayResult
		if err := json.Unmarshal(in.Bytes(), &cmd); err != nil {
			res.Err = err.Error()
		} else {
			res = childReplay(hc, cmd)
		}
		if err := out.Encode(res); err != nil {
			return 1
		}
	}
	return 0
}

func childReplay(hc *http.Client, cmd replayCmd) replayResult {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n := &node{name: "replayed node", url: cmd.URL, hc: hc}
	start := time.Now()
	var ws *websocket.Conn
	var ack []byte
	var err error
	for {
		ws, ack, err = dial(ctx, n, cmd.SID, cmd.Types, cmd.Since)
		if err == nil || !cmd.Retry || !errors.Is(err, errNotFound) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != nil {
		return replayResult{Err: err.Error()}
	}
	defer ws.CloseNow()
	var a struct {
		Count int `json:"replay_event_count"`
	}
	if err := json.Unmarshal(ack, &a); err != nil || a.Count != cmd.N {
		return replayResult{Err: fmt.Sprintf("subscribe_ack %s: replay_event_count %d, want %d (%v)", ack, a.Count, cmd.N, err)}
	}
	total, err := readEvents(ctx, ws, cmd.N)
	if err != nil {
		return replayResult{Err: err.Error()}
	}
	return replayResult{NS: int64(time.Since(start)), Bytes: total}
}

var eventPrefix = []byte(`{"type":"event"`)

// readEvents reads n event frames and counts their bytes.
func readEvents(ctx context.Context, ws *websocket.Conn, n int) (int64, error) {
	var total int64
	buf := make([]byte, 4096)
	for got := 0; got < n; {
		_, rd, err := ws.Reader(ctx)
		if err != nil {
			return 0, fmt.Errorf("after %d events: %w", got, err)
		}
		m := 0
		for {
			if m == len(buf) {
				buf = append(buf, make([]byte, len(buf))...)
			}
			k, err := rd.Read(buf[m:])
			m += k
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, err
			}
		}
		if bytes.HasPrefix(buf[:m], eventPrefix) {
			got++
			total += int64(m)
		}
	}
	return total, nil
}

// replayClient is the benchmark's handle on a client process.
type replayClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startReplayClient(tb testing.TB) *replayClient {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), replayChildEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c := &replayClient{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	c.out.Buffer(make([]byte, 1<<16), 1<<20)
	tb.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			tb.Errorf("replay client: %v", err)
		}
	})
	return c
}

// do runs one replay in the client process.
func (c *replayClient) do(cmd replayCmd) (replayResult, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return replayResult{}, err
	}
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		return replayResult{}, err
	}
	if !c.out.Scan() {
		return replayResult{}, fmt.Errorf("replay client ended: %v", c.out.Err())
	}
	var res replayResult
	if err := json.Unmarshal(c.out.Bytes(), &res); err != nil {
		return res, err
	}
	if res.Err != "" {
		return res, fmt.Errorf("replay client: %s", res.Err)
	}
	return res, nil
}
