package sse_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/sse"
)

// BenchmarkFanout: deltas emitted into a session as fast as the emitter
// takes them reach each of 10 SSE clients (real store, bus, hub, feed
// and net/http over loopback). frames/s counts the frames all clients
// received together, from the first emit to the last frame read (the
// median of the iterations).
func BenchmarkFanout(b *testing.B) {
	const clients, deltas = 10, 2000
	e := newEnv(b, hub.Config{ClientQueue: 2 * deltas}, sse.Config{})
	var rates []float64
	for b.Loop() {
		ctx, cancel := context.WithCancel(e.ctx)
		var wg sync.WaitGroup
		ready := make(chan struct{}, clients)
		for range clients {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url("types=text.delta"), nil)
			resp, err := e.client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer resp.Body.Close()
				r := bufio.NewReader(resp.Body)
				for n := 0; n < deltas; {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					switch {
					case strings.HasPrefix(line, `data: {"type":"subscribe_ack"`):
						ready <- struct{}{}
					case strings.HasPrefix(line, `data: {"type":"event"`):
						n++
					}
				}
			}()
		}
		for range clients {
			<-ready
		}
		start := time.Now()
		for range deltas {
			if _, err := e.em.Emit(bus.Spec{Type: event.TextDelta, Actor: event.ActorModel, Payload: map[string]string{"text": "token "}}); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		rates = append(rates, float64(clients*deltas)/time.Since(start).Seconds())
		cancel()
	}
	if len(rates) > 0 {
		slices.Sort(rates)
		b.ReportMetric(rates[len(rates)/2], "frames/s")
	}
}
