//go:build unix

package tool_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

// TestShellStreamsLiveOutputBeforeItReturns: a foreground command's
// output reaches Env.Output, stdout and stderr in the order printed,
// all of it before Run returns, and the result (exit code included) is
// what it is without live output.
func TestShellStreamsLiveOutputBeforeItReturns(t *testing.T) {
	env := newEnv(t, t.TempDir())
	var mu sync.Mutex
	var got []tool.OutputChunk
	returned := false
	env.Output = func(c tool.OutputChunk) {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			t.Errorf("a delta after Run returned: %+v", c)
		}
		got = append(got, c)
	}
	res, err := tool.Shell{}.Run(context.Background(), env, shellIn(`printf 'one\n'; sleep 0.1; printf 'two\n' >&2; sleep 0.1; printf 'three\n'; exit 3`, 0))
	mu.Lock()
	returned = true
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == nil || *res.ExitCode != 3 {
		t.Fatalf("exit code %v, want 3", res.ExitCode)
	}
	var b strings.Builder
	for _, c := range got {
		b.WriteString(c.Stream + ":" + c.Data)
	}
	if want := "stdout:one\nstderr:two\nstdout:three\n"; b.String() != want {
		t.Fatalf("live output %q, want %q", b.String(), want)
	}
	if !strings.Contains(res.Content, "stdout:\none\nthree\n") || !strings.Contains(res.Content, "stderr:\ntwo\n") {
		t.Fatalf("result changed: %q", res.Content)
	}
}

// TestShellWithoutOutputSinkStreamsNothing: with no Env.Output the
// shell runs as before.
func TestShellWithoutOutputSinkStreamsNothing(t *testing.T) {
	res, err := tool.Shell{}.Run(context.Background(), newEnv(t, t.TempDir()), shellIn(`echo hi`, 0))
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 || !strings.Contains(res.Content, "hi") {
		t.Fatalf("res %+v err %v", res, err)
	}
}

// TestShellLiveOutputOfATimedOutCommand: a command stopped at its
// timeout has streamed what it printed before the call fails. The
// timeout leaves a loaded machine time to start the shell (at 0.3 s
// the echo sometimes had not run yet at a load average of 10).
func TestShellLiveOutputOfATimedOutCommand(t *testing.T) {
	env := newEnv(t, t.TempDir())
	var mu sync.Mutex
	var data strings.Builder
	env.Output = func(c tool.OutputChunk) {
		mu.Lock()
		defer mu.Unlock()
		if c.Stream == protocol.OutputStdout {
			data.WriteString(c.Data)
		}
	}
	_, err := tool.Shell{Grace: 100e6}.Run(context.Background(), env, shellIn(`echo started; sleep 30`, 4))
	wantClass(t, err, tool.ClassTimeout)
	mu.Lock()
	defer mu.Unlock()
	if data.String() != "started\n" {
		t.Fatalf("live output %q", data.String())
	}
}
