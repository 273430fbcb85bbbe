package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

func user(text string) message.Message {
	return message.Message{Role: message.RoleUser, Content: []message.Block{message.Text(text)}}
}

func collect(t *testing.T, d Demo, req model.Request) ([]model.Delta, model.Result, *model.Accumulator) {
	t.Helper()
	var got []model.Delta
	acc := &model.Accumulator{}
	res, err := d.Stream(context.Background(), req, func(x model.Delta) error {
		got = append(got, x)
		return acc.Apply(x)
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, res, acc
}

var tools = []model.ToolSpec{{Name: "list_dir"}}

func TestDemoFirstCallThinksTalksAndCallsListDir(t *testing.T) {
	req := model.Request{Messages: []message.Message{user("what is here?")}, Tools: tools}
	deltas, res, acc := collect(t, Demo{}, req)
	if res.StopReason != model.StopToolUse {
		t.Fatalf("stop %q", res.StopReason)
	}
	content := acc.Content()
	if len(content) != 3 || content[0].Type != message.BlockThinking || content[1].Type != message.BlockText || content[2].Type != message.BlockToolUse {
		t.Fatalf("content %+v", content)
	}
	if content[0].Signature == "" {
		t.Error("thinking block has no signature")
	}
	if content[2].Name != "list_dir" || string(content[2].Input) != `{"path": "."}` {
		t.Errorf("tool use %+v", content[2])
	}
	inputFrags := 0
	for _, d := range deltas {
		if d.Kind == model.KindToolInput {
			inputFrags++
		}
	}
	if inputFrags < 2 {
		t.Errorf("tool input came in %d fragments; want it split", inputFrags)
	}
	again, _, _ := collect(t, Demo{}, req)
	var firstID, secondID string
	for i := range again {
		if again[i].ToolUseID != "" {
			firstID, secondID = deltas[i].ToolUseID, again[i].ToolUseID
			again[i].ToolUseID = deltas[i].ToolUseID
		}
	}
	if !reflect.DeepEqual(deltas, again) {
		t.Error("demo is not deterministic")
	}
	if firstID == secondID || !strings.HasPrefix(firstID, "tu_demo_list_dir_") {
		t.Errorf("tool use ids %q and %q: want unique ids", firstID, secondID)
	}
}

func TestDemoSummarisesToolResult(t *testing.T) {
	req := model.Request{Tools: tools, Messages: []message.Message{
		user("what is here?"),
		{Role: message.RoleAssistant, Content: []message.Block{{Type: message.BlockToolUse, ID: "tu_1", Name: "list_dir", Input: json.RawMessage(`{}`)}}},
		{Role: message.RoleTool, Content: []message.Block{{Type: message.BlockToolResult, ToolUseID: "tu_1", Content: "a.go\nb/"}}},
	}}
	_, res, acc := collect(t, Demo{}, req)
	if res.StopReason != model.StopEndTurn {
		t.Fatalf("stop %q", res.StopReason)
	}
	text := acc.Content()[0].Text
	if !strings.Contains(text, "2 lines") || !strings.Contains(text, "a.go, b/") {
		t.Errorf("summary %q", text)
	}
}

// TestDemoSummarisesAShellResult: a shell result reads as its exit code
// and what the command printed on each stream, not as the result's
// labels; a text that only looks like one is summarised as lines.
func TestDemoSummarisesAShellResult(t *testing.T) {
	for content, want := range map[string]string{
		"exit code: 2\nstdout:\nREADME.md\nnotes.txt\nstderr:\nwarning: x\n": "The command exited with code 2; it printed 2 lines, starting with: README.md, notes.txt; on stderr: 1 line, starting with: warning: x. ",
		"exit code: 0\nstdout:\nstderr:\n":                                   "The command exited with code 0 and printed nothing. ",
		"exit code: 0\nnote: kept open\nstdout:\nhi\nstderr:\n":              "The command exited with code 0; it printed 1 line, starting with: hi. ",
		"exit code: 0\nstdout:\nstderr:\nstderr:\n":                          "The tool returned 4 lines, starting with: exit code: 0, stdout:, stderr:, stderr:. ",
	} {
		req := model.Request{Tools: tools, Messages: []message.Message{
			user("run it"),
			{Role: message.RoleAssistant, Content: []message.Block{{Type: message.BlockToolUse, ID: "tu_1", Name: "shell", Input: json.RawMessage(`{}`)}}},
			{Role: message.RoleTool, Content: []message.Block{{Type: message.BlockToolResult, ToolUseID: "tu_1", Content: content}}},
		}}
		_, _, acc := collect(t, Demo{}, req)
		if text := acc.Content()[0].Text; !strings.HasPrefix(text, want) {
			t.Errorf("summary of %q:\n%q\nwant it to start with\n%q", content, text, want)
		}
	}
}

// TestDemoTeachesANewcomer: the answer to a conversation's first prompt
// ends with the guide (the commands and how to use a real model); later
// answers point to /demo, which answers with the guide, as /help does.
func TestDemoTeachesANewcomer(t *testing.T) {
	toolUse := message.Message{Role: message.RoleAssistant, Content: []message.Block{{Type: message.BlockToolUse, ID: "tu_1", Name: "list_dir", Input: json.RawMessage(`{}`)}}}
	result := message.Message{Role: message.RoleTool, Content: []message.Block{{Type: message.BlockToolResult, ToolUseID: "tu_1", Content: "a.go"}}}
	_, _, acc := collect(t, Demo{}, model.Request{Tools: tools, Messages: []message.Message{user("hello"), toolUse, result}})
	first := acc.Content()[0].Text
	for _, want := range []string{"/echo TEXT", "/long N", "/tool NAME {json}", "delegate", "ANTHROPIC_API_KEY=", "OPENAI_API_KEY="} {
		if !strings.Contains(first, want) {
			t.Errorf("the first answer lacks %q:\n%s", want, first)
		}
	}
	answer := message.Message{Role: message.RoleAssistant, Content: []message.Block{message.Text(first)}}
	_, _, acc = collect(t, Demo{}, model.Request{Tools: tools, Messages: []message.Message{user("hello"), toolUse, result, answer, user("again"), toolUse, result}})
	if second := acc.Content()[0].Text; strings.Contains(second, Guide) || !strings.Contains(second, "/demo") {
		t.Errorf("the second answer:\n%s", second)
	}
	for _, cmd := range []string{"/help", "/demo"} {
		_, _, acc = collect(t, Demo{}, model.Request{Tools: tools, Messages: []message.Message{user(cmd)}})
		if got := acc.Content()[0].Text; got != Guide {
			t.Errorf("%s answered %q", cmd, got)
		}
	}
}

func TestDemoCommands(t *testing.T) {
	_, res, acc := collect(t, Demo{}, model.Request{Messages: []message.Message{user("/echo hello  there")}})
	if res.StopReason != model.StopEndTurn || acc.Content()[0].Text != "hello  there" {
		t.Fatalf("echo: %+v", acc.Content())
	}
	_, _, acc = collect(t, Demo{}, model.Request{Messages: []message.Message{user("/long 3")}})
	if !strings.HasSuffix(acc.Content()[0].Text, "Sentence 3 of 3. ") {
		t.Fatalf("long: %q", acc.Content()[0].Text)
	}
	_, res, acc = collect(t, Demo{}, model.Request{Messages: []message.Message{user(`/tool read_file {"path":"é.txt"}`)}})
	uses := acc.ToolUses()
	if res.StopReason != model.StopToolUse || len(uses) != 1 || string(uses[0].Input) != `{"path":"é.txt"}` {
		t.Fatalf("tool: %+v", uses)
	}
	_, res, acc = collect(t, Demo{}, model.Request{Messages: []message.Message{user("/tool list_dir {\"path\":\".\"}\n/tool read_file {\"path\":\"a\"}")}})
	uses = acc.ToolUses()
	if res.StopReason != model.StopToolUse || len(uses) != 2 || uses[0].Name != "list_dir" || uses[1].Name != "read_file" ||
		uses[0].ID == uses[1].ID {
		t.Fatalf("two tools in one message: %+v", uses)
	}
}

func TestDemoCancelStopsPromptly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := Demo{Delay: time.Millisecond}.Stream(ctx, model.Request{Messages: []message.Message{user("/long 1000")}}, func(model.Delta) error {
		n++
		if n == 5 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 5 {
		t.Fatalf("err %v after %d deltas", err, n)
	}
}
