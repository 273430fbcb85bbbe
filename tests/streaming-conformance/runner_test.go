// Package conformance is the streaming conformance suite of spec §11.3:
// recorded server traces (cases/*/frames.jsonl) and the materialized
// state a client must reach from them (cases/*/expected.json). This
// runner drives the Go client's reducer with each trace; a client in
// another language runs the same cases (see README.md).
package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

var update = flag.Bool("update", false, "rewrite expected.json from the reducer (review the diff!)")

// replay folds a trace into a fresh view.
func replay(t *testing.T, path string) *client.View {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v := client.NewView(nil)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		switch head.Type {
		case protocol.TypeSnapshot:
			var s protocol.Snapshot
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatalf("%s:%d: %v", path, line, err)
			}
			v.ApplySnapshot(&s)
		case protocol.TypeEvent:
			var e struct {
				Event protocol.EventEnvelope `json:"event"`
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("%s:%d: %v", path, line, err)
			}
			v.Apply(&e.Event)
		default:
			// subscribe_ack, subscribe_error, ping, pong, error and the
			// suite's own "_connection" markers change no state.
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestConformance(t *testing.T) {
	dirs, err := filepath.Glob("cases/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			v := replay(t, filepath.Join(dir, "frames.jsonl"))
			got, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join(dir, "expected.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(got, want) {
				t.Fatalf("materialized state differs from %s\n got: %s", path, got)
			}
		})
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}
