//go:build linux

package tool_test

import (
	"context"
	"testing"

	"github.com/metis-agent/metis/internal/sandbox"
	"github.com/metis-agent/metis/internal/tool"
)

// BenchmarkShellCall is the whole of a shell call of `true`: the
// temporary directory, the supervisor, the exec stage, the shell, the
// report, the cleanup; with the sandbox (rules built and Landlock
// entered in the stage) and with it off (the stage only drops
// capabilities). The difference is the sandbox's start latency.
func BenchmarkShellCall(b *testing.B) {
	for _, c := range []struct {
		name string
		off  bool
	}{{"sandbox", false}, {"off", true}} {
		b.Run(c.name, func(b *testing.B) {
			if !c.off && !sandbox.Probe(true).Available {
				b.Skip("no Landlock here")
			}
			ws := b.TempDir()
			root := newEnv(b, ws)
			sh := tool.Shell{Sandbox: sandbox.Settings{Off: c.off}}
			in := shellIn("true", 0)
			b.ResetTimer()
			for b.Loop() {
				if _, err := sh.Run(context.Background(), root, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
