package tool_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/metis-agent/metis/internal/tool"
)

// FuzzBackgroundInput: whatever input shell_output and shell_kill get,
// they answer invalid_input (no command of this session has that id:
// the fixture has none) and never panic.
func FuzzBackgroundInput(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"id":""}`, `{"id":"bg_0123456789ab"}`, `{"id":7}`, `[]`, `null`, `{"id":"bg_` + "\x00" + `"}`, `{"id":"` + string(make([]byte, 300)) + `"}`} {
		f.Add(s)
	}
	bg := &tool.Background{MaxPerSession: 1}
	env := tool.Env{SessionID: "ses_fuzz"}
	f.Fuzz(func(t *testing.T, input string) {
		for _, tl := range []tool.Tool{tool.ShellOutput{Background: bg}, tool.ShellKill{Background: bg}} {
			_, err := tl.Run(context.Background(), env, json.RawMessage(input))
			if tool.ClassOf(err) != tool.ClassInvalidInput {
				t.Fatalf("%s(%q): %v, want invalid_input", tl.Spec().Name, input, err)
			}
		}
	})
}
