//go:build unix

package stream_test

// BenchmarkReplay10k: a reconnecting client replays 10,000 stored
// catalog events, against the floor (floor_test.go) writing the same
// frames, byte for byte, from memory over the same library.
//
// What it measures is what a black-box measurement of a running server
// sees:
//
//   - the history is made by real turns of builtin:demo with tools
//     (list_dir, read_file of a 3 KiB file, short echoes), so the events
//     are of a dozen types and sizes (from about 300 bytes to 4 KiB),
//     not 10,000 copies of one small row;
//   - the client subscribes with every catalog type in its filter (what
//     preset:full asks of the store), so the exact count and the read
//     go through the same filters a real client's do;
//   - the client runs in a child process (this test binary re-executed),
//     so this process is the server alone and its CPU time (getrusage,
//     every thread) around a replay is the server's CPU for it: attach,
//     subscribe, count, read, frame and write. The figure is reported
//     per replayed event (cpu_us/event), for metis and for the floor;
//   - the time (ms) runs in the client, from the attach request (floor:
//     the dial) to the last replayed frame read.
//
// Each iteration replays benchReps times per system, the two systems
// alternating, and reports medians. The store's pages are warm (a
// warm-up replay first); the SQLite page cache of whichever read
// connection serves a replay may not be.
//
// $METIS_STREAM_BENCH_REPLAYPROF names a file for a CPU profile of the
// measured replays (both systems), without the making of the history.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/store"
)

const benchEnvReplayChild = "METIS_STREAM_BENCH_REPLAY_CHILD"

// replayCmd is one replay the child performs; replayResult its answer.
type replayCmd struct {
	Kind  string   `json:"kind"` // "metis" or "floor"
	URL   string   `json:"url"`  // metis: the HTTP base; floor: the ws:// URL
	SID   string   `json:"sid,omitempty"`
	Since string   `json:"since,omitempty"`
	Types []string `json:"types,omitempty"`
	N     int      `json:"n"`
	Keep  bool     `json:"keep,omitempty"` // return the frames
}

type replayResult struct {
	NS     int64    `json:"ns"`
	Bytes  int64    `json:"bytes"`
	Frames [][]byte `json:"frames,omitempty"`
	Err    string   `json:"err,omitempty"`
}

func init() {
	if os.Getenv(benchEnvReplayChild) != "" {
		os.Exit(benchReplayChild())
	}
}

// benchReplayChild performs the replays its stdin asks for, one JSON
// command a line, and answers each with one JSON line.
func benchReplayChild() int {
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
	ctx := context.Background()
	start := time.Now()
	if cmd.Kind == "sse" {
		return childReplaySSE(ctx, hc, cmd, start)
	}
	var ws *websocket.Conn
	var err error
	if cmd.Kind == "metis" {
		var ack struct {
			Count int `json:"replay_event_count"`
		}
		var raw []byte
		ws, raw, err = benchConnectRaw(ctx, hc, cmd.URL, cmd.SID, cmd.Types, cmd.Since)
		if err == nil {
			if err = json.Unmarshal(raw, &ack); err == nil && ack.Count != cmd.N {
				err = fmt.Errorf("replay_event_count %d, want %d", ack.Count, cmd.N)
			}
		}
	} else {
		ws, _, err = websocket.Dial(ctx, cmd.URL, nil)
	}
	if err != nil {
		if ws != nil {
			ws.CloseNow()
		}
		return replayResult{Err: err.Error()}
	}
	defer ws.CloseNow()
	frames, n, err := readEventsCounted(ws, cmd.N, cmd.Keep)
	d := time.Since(start)
	if err != nil {
		return replayResult{Err: err.Error()}
	}
	return replayResult{NS: int64(d), Bytes: n, Frames: frames}
}

var benchEventPrefix = []byte(`{"type":"event"`)

// benchConnectRaw attaches to a metis session, subscribes with the given
// types and since (if not empty), and returns the raw subscribe_ack.
func benchConnectRaw(ctx context.Context, hc *http.Client, base, sid string, types []string, since string) (*websocket.Conn, []byte, error) {
	u, err := benchAttach(ctx, hc, base, sid)
	if err != nil {
		return nil, nil, err
	}
	ws, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		return nil, nil, err
	}
	sub := map[string]any{"type": "subscribe", "filter": map[string]any{"event_types": types}, "snapshot": false, "since": nil}
	if since != "" {
		sub["since"] = since
	}
	b, _ := json.Marshal(sub)
	if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
		ws.CloseNow()
		return nil, nil, err
	}
	_, data, err := ws.Read(ctx)
	if err != nil {
		ws.CloseNow()
		return nil, nil, err
	}
	if !bytes.Contains(data, []byte(`"subscribe_ack"`)) {
		ws.CloseNow()
		return nil, nil, fmt.Errorf("want subscribe_ack, got %s", data)
	}
	return ws, data, nil
}

// readEventsCounted reads n event frames and counts their bytes.
func readEventsCounted(ws *websocket.Conn, n int, keep bool) ([][]byte, int64, error) {
	var frames [][]byte
	var total int64
	buf := make([]byte, 4096)
	for got := 0; got < n; {
		_, rd, err := ws.Reader(context.Background())
		if err != nil {
			return nil, 0, fmt.Errorf("after %d events: %w", got, err)
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
				return nil, 0, err
			}
		}
		if !bytes.HasPrefix(buf[:m], benchEventPrefix) {
			continue
		}
		got++
		total += int64(m)
		if keep {
			frames = append(frames, append([]byte(nil), buf[:m]...))
		}
	}
	return frames, total, nil
}

// replayChild is the parent's handle on a client process.
type replayChild struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startReplayChild(tb testing.TB) *replayChild {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchEnvReplayChild+"=1")
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
	c := &replayChild{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	c.out.Buffer(make([]byte, 1<<16), 256<<20)
	tb.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			tb.Errorf("replay child: %v", err)
		}
	})
	return c
}

// do runs one replay in the child and returns its result and the CPU
// time this process (the server) spent meanwhile.
func (c *replayChild) do(cmd replayCmd) (replayResult, time.Duration, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return replayResult{}, 0, err
	}
	cpu0 := cpuTime()
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		return replayResult{}, 0, err
	}
	if !c.out.Scan() {
		return replayResult{}, 0, fmt.Errorf("replay child ended: %v", c.out.Err())
	}
	cpu := cpuTime() - cpu0
	var res replayResult
	if err := json.Unmarshal(c.out.Bytes(), &res); err != nil {
		return res, 0, err
	}
	if res.Err != "" {
		return res, 0, fmt.Errorf("replay child: %s", res.Err)
	}
	return res, cpu, nil
}

// catalogTypes is every catalog type: the store-facing half of
// preset:full.
func catalogTypes() []string {
	var out []string
	for _, i := range event.All() {
		if i.Family == event.Catalog {
			out = append(out, string(i.Type))
		}
	}
	return out
}

// benchHistory makes a session's history of real builtin:demo turns
// until it holds at least n catalog events.
func benchHistory(tb testing.TB, m *benchMetis, n int) string {
	tb.Helper()
	ctx := context.Background()
	ws := filepath.Join(tb.TempDir(), "workspace")
	if err := os.MkdirAll(filepath.Join(ws, "src"), 0o755); err != nil {
		tb.Fatal(err)
	}
	for i := range 12 {
		if err := os.WriteFile(filepath.Join(ws, "src", fmt.Sprintf("module_%02d.go", i)), []byte("package src\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	var notes strings.Builder
	for i := 0; notes.Len() < 3000; i++ {
		fmt.Fprintf(&notes, "Line %d of the notes: the quick brown fox jumps over the lazy dog.\n", i)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.md"), []byte(notes.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	sum, err := m.srv.Sessions.Create(ctx, session.CreateRequest{WorkspacePath: ws, Model: "builtin:demo"})
	if err != nil {
		tb.Fatal(err)
	}
	sid := sum.ID
	prompts := []string{
		"what is in the workspace?",
		`/tool read_file {"path": "notes.md"}`,
		"/echo done, thanks",
		"and what is in src?",
		`/tool list_dir {"path": "src"}`,
	}
	q := store.EventQuery{SessionIDs: []string{sid}}
	for i := 0; ; i++ {
		if i%20 == 0 {
			have, err := m.srv.Store.CountEvents(ctx, q)
			if err != nil {
				tb.Fatal(err)
			}
			if have >= n {
				break
			}
		}
		if _, err := m.srv.Sessions.Submit(ctx, sid, prompts[i%len(prompts)]); err != nil {
			tb.Fatal(err)
		}
		if err := m.srv.Sessions.Wait(ctx, sid); err != nil {
			tb.Fatal(err)
		}
	}
	return sid
}

// benchCursor finds the cursor after which exactly n events of a
// session are stored, reading only what was appended since its last
// call (each subscribe appends two bus events), so that finding it
// costs the server next to nothing between measured replays.
type benchCursor struct {
	m   *benchMetis
	sid string
	ids []string
}

func (c *benchCursor) since(n int) (string, error) {
	q := store.EventQuery{SessionIDs: []string{c.sid}}
	if len(c.ids) > 0 {
		q.AfterID = c.ids[len(c.ids)-1]
	}
	err := c.m.srv.Store.ScanEvents(context.Background(), q, func(r store.EventRow) error {
		c.ids = append(c.ids, r.ID)
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(c.ids) <= n {
		return "", fmt.Errorf("%d events stored, want more than %d", len(c.ids), n)
	}
	return c.ids[len(c.ids)-n-1], nil
}

func BenchmarkReplay10k(b *testing.B) {
	m := startBenchMetis(b, 0)
	ctx := context.Background()
	sid := benchHistory(b, m, benchReplay+200)
	em, err := m.srv.Bus.Emitter(ctx, sid)
	if err != nil {
		b.Fatal(err)
	}
	child := startReplayChild(b)
	cur := &benchCursor{m: m, sid: sid}
	types := catalogTypes()
	// Each subscribe adds bus.subscriber_registered and _unregistered
	// to the session: the cursor is taken anew before every replay so
	// that exactly benchReplay events follow it.
	metisOnce := func(keep bool) (replayResult, time.Duration, error) {
		if err := em.Barrier(ctx); err != nil {
			return replayResult{}, 0, err
		}
		since, err := cur.since(benchReplay)
		if err != nil {
			return replayResult{}, 0, err
		}
		runtime.GC()
		res, cpu, err := child.do(replayCmd{Kind: "metis", URL: m.url, SID: sid, Since: since, Types: types, N: benchReplay, Keep: keep})
		if err != nil {
			return res, 0, err
		}
		// Let the server detach before the next reconnect.
		if err := waitFor(func() bool { return m.srv.Hub.Clients(sid) == 0 }); err != nil {
			return res, 0, err
		}
		return res, cpu, nil
	}
	// Warm up (store pages, first-use allocations) and keep the frames
	// for the floor.
	warm, _, err := metisOnce(true)
	if err != nil {
		b.Fatal(err)
	}
	f := startFloor(warm.Frames)
	defer f.Close()
	floorOnce := func() (replayResult, time.Duration, error) {
		runtime.GC()
		res, cpu, err := child.do(replayCmd{Kind: "floor", URL: f.URL(), N: len(warm.Frames)})
		if err != nil {
			return res, 0, err
		}
		if err := waitFor(func() bool { return f.Clients() == 0 }); err != nil {
			return res, 0, err
		}
		return res, cpu, nil
	}
	if _, _, err := floorOnce(); err != nil {
		b.Fatal(err)
	}
	b.Logf("replay: %d events, %d bytes of frames (%d per event on average)", len(warm.Frames), warm.Bytes, warm.Bytes/int64(len(warm.Frames)))

	if path := os.Getenv("METIS_STREAM_BENCH_REPLAYPROF"); path != "" {
		// A CPU profile of the measured replays only (not of making the
		// history): this process is the server alone.
		pf, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			b.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			pf.Close()
		}()
	}
	var ms, cpu, ratio, cpuRatio [2][]float64 // [metis, floor]
	runs := map[string]func() (replayResult, time.Duration, error){"metis": func() (replayResult, time.Duration, error) { return metisOnce(false) }, "floor": floorOnce}
	for b.Loop() {
		for range benchReps {
			var got [2]replayResult
			var used [2]time.Duration
			for _, name := range benchSystems() {
				k := 0
				if name == "floor" {
					k = 1
				}
				res, c, err := runs[name]()
				if err != nil {
					b.Fatalf("%s: %v", name, err)
				}
				got[k], used[k] = res, c
				ms[k] = append(ms[k], float64(res.NS)/1e6)
				cpu[k] = append(cpu[k], float64(c)/1e3/benchReplay)
			}
			ratio[0] = append(ratio[0], float64(got[0].NS)/float64(got[1].NS))
			cpuRatio[0] = append(cpuRatio[0], float64(used[0])/float64(used[1]))
		}
	}
	b.ReportMetric(median(ms[0]), "metis_ms")
	b.ReportMetric(median(ms[1]), "floor_ms")
	b.ReportMetric(median(ratio[0]), "ratio")
	b.ReportMetric(median(cpu[0]), "metis_cpu_us/event")
	b.ReportMetric(median(cpu[1]), "floor_cpu_us/event")
	b.ReportMetric(median(cpuRatio[0]), "cpu_ratio")
}

// childReplaySSE is childReplay over SSE: GET /sessions/{id}/events
// with the types and since in the query, then cmd.N event records read.
func childReplaySSE(ctx context.Context, hc *http.Client, cmd replayCmd, start time.Time) replayResult {
	u := cmd.URL + "/sessions/" + cmd.SID + "/events?types=" + strings.Join(cmd.Types, ",") + "&since=" + cmd.Since
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return replayResult{Err: err.Error()}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return replayResult{Err: err.Error()}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return replayResult{Err: resp.Status}
	}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var total int64
	for got := 0; got < cmd.N; {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull {
				total += int64(len(line))
				line, err = r.ReadSlice('\n')
			}
			got++
			total += int64(len(line))
			continue
		}
		if err != nil {
			return replayResult{Err: fmt.Sprintf("after %d events: %v", got, err)}
		}
		if bytes.HasPrefix(line, sseEventPrefix) {
			got++
			total += int64(len(line))
		}
	}
	return replayResult{NS: int64(time.Since(start)), Bytes: total}
}

// BenchmarkReplay10kSSE is BenchmarkReplay10k's metis half over SSE:
// the same history, filter and cursor, replayed to a client in a child
// process that reconnects with GET /sessions/{id}/events?since=...;
// this process's CPU per replayed event, and the time in the client
// from the request to the last event read.
func BenchmarkReplay10kSSE(b *testing.B) {
	m := startBenchMetis(b, 0)
	ctx := context.Background()
	sid := benchHistory(b, m, benchReplay+200)
	em, err := m.srv.Bus.Emitter(ctx, sid)
	if err != nil {
		b.Fatal(err)
	}
	child := startReplayChild(b)
	cur := &benchCursor{m: m, sid: sid}
	types := catalogTypes()
	once := func() (replayResult, time.Duration, error) {
		if err := em.Barrier(ctx); err != nil {
			return replayResult{}, 0, err
		}
		since, err := cur.since(benchReplay)
		if err != nil {
			return replayResult{}, 0, err
		}
		runtime.GC()
		res, cpu, err := child.do(replayCmd{Kind: "sse", URL: m.url, SID: sid, Since: since, Types: types, N: benchReplay})
		if err != nil {
			return res, 0, err
		}
		if err := waitFor(func() bool { return m.srv.Hub.Clients(sid) == 0 }); err != nil {
			return res, 0, err
		}
		return res, cpu, nil
	}
	if _, _, err := once(); err != nil { // warm up
		b.Fatal(err)
	}
	var ms, cpu []float64
	for b.Loop() {
		for range benchReps {
			res, c, err := once()
			if err != nil {
				b.Fatal(err)
			}
			ms = append(ms, float64(res.NS)/1e6)
			cpu = append(cpu, float64(c)/1e3/benchReplay)
		}
	}
	b.ReportMetric(median(ms), "sse_ms")
	b.ReportMetric(median(cpu), "sse_cpu_us/event")
}
