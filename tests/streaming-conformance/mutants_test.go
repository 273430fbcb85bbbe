package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

var mutantsDir = flag.String("mutants", "", "write mutated traces and the Go reducer's state for each into this directory (for the TypeScript client's differential test)")

// TestMutants folds randomly damaged copies of every case into the Go
// reducer. It checks that nothing panics and the view stays encodable;
// with -mutants DIR it also writes each mutant (frames.jsonl) and the
// Go View's state (expected.json), so another client's reducer can be
// held to exactly the same answers on malformed input
// (scripts/test.d/20-web-client.sh does that for the TypeScript one).
func TestMutants(t *testing.T) {
	dirs, err := filepath.Glob("cases/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	perCase := 10 // under the race detector in the Go suite
	if *mutantsDir != "" {
		perCase = 40
	}
	for _, dir := range dirs {
		base := readFrames(t, filepath.Join(dir, "frames.jsonl"))
		for k := range perCase {
			r := rand.New(rand.NewPCG(uint64(k), 0x6d65746973))
			frames := mutate(r, base)
			var buf bytes.Buffer
			for _, f := range frames {
				b, err := json.Marshal(f)
				if err != nil {
					t.Fatal(err)
				}
				buf.Write(b)
				buf.WriteByte('\n')
			}
			name := fmt.Sprintf("%s-%02d", filepath.Base(dir), k)
			out := t.TempDir()
			if *mutantsDir != "" {
				out = filepath.Join(*mutantsDir, name)
				if err := os.MkdirAll(out, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(out, "frames.jsonl")
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			v := replay(t, path)
			got, err := json.MarshalIndent(v, "", " ")
			if err != nil {
				t.Fatalf("%s: the view does not encode: %v", name, err)
			}
			if *mutantsDir != "" {
				if err := os.WriteFile(filepath.Join(out, "expected.json"), got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func readFrames(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// junk is what a mutation puts in a field: every JSON kind, and the
// numbers at the reducer's edges.
var junk = []any{nil, json.Number("0"), json.Number("-1"), json.Number("1.5"), json.Number("4095"), json.Number("4096"),
	json.Number("1e300"), "", "x", "evt_", true, false, []any{}, []any{nil}, map[string]any{},
	map[string]any{"type": "text", "text": json.Number("5")}, []any{map[string]any{"type": "text", "text": "junk"}}}

var otherTypes = []string{"text.delta", "message.complete", "tool.called", "turn.cancelled", "delegate.failed",
	"llm.call_failed", "message.start", "tool.use_end", "from.the_future"}

// mutate returns a damaged deep copy of frames.
func mutate(r *rand.Rand, frames []map[string]any) []map[string]any {
	var out []map[string]any
	for _, f := range frames {
		c := deepCopy(f).(map[string]any)
		switch c["type"] {
		case "event":
			if r.IntN(4) != 0 {
				out = append(out, c)
				continue
			}
			ev := c["event"].(map[string]any)
			switch r.IntN(9) {
			case 0: // duplicate the frame
				out = append(out, c, deepCopy(c).(map[string]any))
				continue
			case 1: // another type, maybe unknown
				ev["type"] = otherTypes[r.IntN(len(otherTypes))]
			case 2: // no payload, or one that is not an object
				if r.IntN(2) == 0 {
					delete(ev, "payload")
				} else {
					ev["payload"] = junk[r.IntN(len(junk))]
				}
			case 3:
				ev["turn_id"] = nil
			case 4: // out of order: swapped with the previous event
				if n := len(out); n > 0 && out[n-1]["type"] == "event" {
					out[n-1], c = c, out[n-1]
				}
			default: // a field, maybe nested, replaced or removed
				damage(r, ev, "payload")
			}
		case "snapshot":
			if msgs, ok := c["messages"].([]any); ok && len(msgs) > 0 && r.IntN(2) == 0 {
				damage(r, map[string]any{"m": msgs[r.IntN(len(msgs))]}, "m")
			}
		}
		out = append(out, c)
	}
	return out
}

// damage walks from parent[key] down into a random object or list and
// replaces or deletes one member there.
func damage(r *rand.Rand, parent map[string]any, key string) {
	for depth := 0; ; depth++ {
		switch v := parent[key].(type) {
		case map[string]any:
			if len(v) == 0 {
				parent[key] = junk[r.IntN(len(junk))]
				return
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			k := keys[r.IntN(len(keys))]
			if _, nested := v[k].(map[string]any); !nested || depth > 3 || r.IntN(3) == 0 {
				if _, list := v[k].([]any); !list || r.IntN(2) == 0 {
					if r.IntN(4) == 0 {
						delete(v, k)
					} else {
						v[k] = junk[r.IntN(len(junk))]
					}
					return
				}
			}
			parent, key = v, k
		case []any:
			if len(v) == 0 {
				parent[key] = junk[r.IntN(len(junk))]
				return
			}
			i := r.IntN(len(v))
			if _, obj := v[i].(map[string]any); obj && r.IntN(4) != 0 {
				// Recurse into the element itself.
				wrapper := map[string]any{"e": v[i]}
				damage(r, wrapper, "e")
				v[i] = wrapper["e"]
				return
			}
			v[i] = junk[r.IntN(len(junk))]
			return
		default:
			parent[key] = junk[r.IntN(len(junk))]
			return
		}
	}
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}
