package tsgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/metis-agent/metis/protocol"
)

var update = flag.Bool("update", false, "rewrite "+OutputPath+" from the generator")

const root = "../.."

// TestGeneratedFileIsCurrent fails when the committed protocol.gen.ts is
// not what the generator writes from the Go catalog now.
func TestGeneratedFileIsCurrent(t *testing.T) {
	got, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, OutputPath)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go generate ./web/tsgen/`)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: the Go catalog, protocol or message types changed. Run `go generate ./web/tsgen/` and commit the result.\n%s",
			OutputPath, firstDiff(string(want), string(got)))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  committed: %s\n  generated: %s", i+1, x, y)
		}
	}
	return ""
}

// TestGenerateCoversCatalog: every catalog type, its family and both
// presets are in the output, and every protocol frame type constant.
func TestGenerateCoversCatalog(t *testing.T) {
	out, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, i := range protocol.EventCatalog() {
		want := `  "` + string(i.Type) + `": "` + i.Family.String() + `",`
		if !strings.Contains(s, want) {
			t.Errorf("missing %q", want)
		}
		if !strings.Contains(s, "export interface "+payloadName(i.Type)+" {") {
			t.Errorf("no payload interface for %s", i.Type)
		}
	}
	full, _ := protocol.Preset(protocol.PresetFull)
	if len(full) != len(protocol.EventCatalog()) {
		t.Fatalf("preset:full has %d types, the catalog %d", len(full), len(protocol.EventCatalog()))
	}
	for _, c := range []string{`export const TypeSnapshot = "snapshot";`, `export const CodeCursorExpired = "cursor_expired";`,
		`export const ClosePolicyViolation = 1008;`, `export const MaxClientFrame = 1048576;`,
		`export const ReasonClientTooSlow = { code: "client_too_slow",`} {
		if !strings.Contains(s, c) {
			t.Errorf("missing constant %q", c)
		}
	}
}

// TestPayloadNames pins the interface naming.
func TestPayloadNames(t *testing.T) {
	for in, want := range map[protocol.EventType]string{
		protocol.EventToolUseInputDelta: "ToolUseInputDeltaPayload",
		protocol.EventLLMCallCompleted:  "LlmCallCompletedPayload",
		protocol.EventBusHandlerWarning: "BusHandlerWarningPayload",
	} {
		if got := payloadName(in); got != want {
			t.Errorf("payloadName(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestPayloadsCoverRecordedTraces reads every payload the server wrote
// into the recorded conformance traces (the hand-written ones are
// skipped): each field of a known event type must be
// declared in payloadFields, and each declared required field must be
// present, so the TypeScript payload types follow what the server
// really sends.
func TestPayloadsCoverRecordedTraces(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "tests/streaming-conformance/cases/*/frames.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces: %v", err)
	}
	seen := map[protocol.EventType]int{}
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for line := 0; sc.Scan(); line++ {
			if line == 0 && bytes.Contains(sc.Bytes(), []byte(`"hand_written"`)) {
				break // a hand-written trace, malformed payloads on purpose: not what the server sends
			}
			var fr struct {
				Type  string `json:"type"`
				Event struct {
					Type    protocol.EventType         `json:"type"`
					Payload map[string]json.RawMessage `json:"payload"`
				} `json:"event"`
			}
			if json.Unmarshal(sc.Bytes(), &fr) != nil || fr.Type != "event" || !protocol.KnownEvent(fr.Event.Type) {
				continue
			}
			seen[fr.Event.Type]++
			decl := payloadFields[fr.Event.Type]
			var names []string
			for _, d := range decl {
				names = append(names, strings.TrimSuffix(d.name, "?"))
				if !strings.HasSuffix(d.name, "?") {
					if _, ok := fr.Event.Payload[d.name]; !ok {
						t.Errorf("%s: %s payload lacks required field %q (mark it optional?)", filepath.Base(filepath.Dir(path)), fr.Event.Type, d.name)
					}
				}
			}
			for k := range fr.Event.Payload {
				if !slices.Contains(names, k) && !open[fr.Event.Type] {
					t.Errorf("%s: %s payload has field %q, not declared in payloadFields", filepath.Base(filepath.Dir(path)), fr.Event.Type, k)
				}
			}
		}
		f.Close()
	}
	if len(seen) < 10 {
		t.Fatalf("only %d event types seen in the traces", len(seen))
	}
}
