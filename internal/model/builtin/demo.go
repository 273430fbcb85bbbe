// Package builtin provides builtin:demo, the offline model that is always
// available. It is deterministic: the same conversation yields the same
// deltas. It streams a short thinking block, text in word-sized deltas
// and, on the first call of a turn, a list_dir tool call whose input
// arrives in several JSON fragments; after the tool result it answers
// with a summary of what the tool returned.
//
// Prompts starting with a slash steer it, for demos and tests:
//
//	/echo TEXT    answer TEXT without thinking or tools
//	/long N       stream N numbered sentences (at most 100,000), no tools
//	/tool NAME {json}  call tool NAME with that input, then summarise
//	                   (one call per line: several lines call several
//	                   tools in one message)
//	/help, /demo  answer with the guide: what it understands and how to
//	              use a real model
//
// Any other prompt gets the thinking, list_dir and summary above; the
// summary of a conversation's first prompt ends with the guide, so a
// newcomer without a key learns what to type next.
//
// A user message holding images is answered with what it received, "I
// see 1 image (PNG 32×32).", and so is a tool result holding images: the
// bytes of each must have reached it.
//
// Asked for a compaction summary (Request.Task is model.TaskSummary), it
// answers with the user requests the transcript holds, one line each.
// Its usage counts tokens with model.EstimateTokens, as metis estimates
// them between calls.
//
// It is deterministic but for tool use ids, which are unique.
//
// builtin imports model and message only.
package builtin

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/protocol"
)

// Provider is the provider name of the demo model.
const Provider = "builtin"

// ModelID is the full id of the demo model.
const ModelID = "builtin:demo"

// Demo is the builtin:demo adapter.
type Demo struct {
	// Delay is the pause before each delta (0: none).
	Delay time.Duration
}

// Stream implements model.Adapter.
func (d Demo) Stream(ctx context.Context, req model.Request, emit func(model.Delta) error) (model.Result, error) {
	if len(req.Messages) == 0 {
		return model.Result{}, &model.Error{Class: model.ClassInvalidRequest, Message: "no messages"}
	}
	s := &streamer{ctx: ctx, delay: d.Delay, emit: emit}
	last := req.Messages[len(req.Messages)-1]
	prompt := lastUserText(req.Messages)
	var stop string
	var err error
	switch {
	case req.Task == model.TaskSummary:
		err = s.text(model.KindText, summary(req.Messages), "")
		stop = model.StopEndTurn
	case last.Role == message.RoleTool:
		err = s.summarise(prompt, last, firstPrompt(req.Messages))
		stop = model.StopEndTurn
	case last.Role == message.RoleUser && len(last.Images()) > 0:
		err = s.text(model.KindText, fmt.Sprintf("I see %s. I am the built-in demo model. You said: %s", seeImages(last.Images()), prompt), "")
		stop = model.StopEndTurn
	default:
		stop, err = s.answer(prompt, toolNames(req.Tools))
	}
	usage := message.Usage{InputTokens: int64(model.EstimateTokens(req)), OutputTokens: int64(model.EstimateTextTokens(s.out.String()) + 1)}
	if err != nil {
		return model.Result{Usage: usage}, err
	}
	return model.Result{StopReason: stop, Usage: usage}, nil
}

type streamer struct {
	ctx   context.Context
	delay time.Duration
	emit  func(model.Delta) error
	index int
	out   strings.Builder // everything streamed, for the usage
	timer *time.Timer
}

func (s *streamer) send(d model.Delta) error {
	if s.delay > 0 {
		if s.timer == nil {
			s.timer = time.NewTimer(s.delay)
		} else {
			s.timer.Reset(s.delay)
		}
		select {
		case <-s.ctx.Done():
			s.timer.Stop()
			return s.ctx.Err()
		case <-s.timer.C:
		}
	} else if err := s.ctx.Err(); err != nil {
		return err
	}
	s.out.WriteString(d.Text)
	return s.emit(d)
}

func (s *streamer) text(kind model.DeltaKind, text, signature string) error {
	words := chunk(text)
	for i, w := range words {
		d := model.Delta{Kind: kind, Index: s.index, Text: w}
		if i == len(words)-1 {
			d.Signature = signature
		}
		if err := s.send(d); err != nil {
			return err
		}
	}
	if err := s.send(model.Delta{Kind: model.KindBlockStop, Index: s.index}); err != nil {
		return err
	}
	s.index++
	return nil
}

func (s *streamer) toolUse(name string, input string) error {
	// Tool use ids must be unique everywhere (tool calls are stored by
	// them), like a provider's; everything else the demo streams is
	// deterministic.
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	id := fmt.Sprintf("tu_demo_%s_%d_%x", name, s.index, rnd)
	if err := s.send(model.Delta{Kind: model.KindToolUseStart, Index: s.index, ToolUseID: id, ToolName: name}); err != nil {
		return err
	}
	for _, frag := range fragments(input, 7) {
		if err := s.send(model.Delta{Kind: model.KindToolInput, Index: s.index, Text: frag}); err != nil {
			return err
		}
	}
	if err := s.send(model.Delta{Kind: model.KindBlockStop, Index: s.index}); err != nil {
		return err
	}
	s.index++
	return nil
}

// maxLong caps "/long N": a user's N must not size the server's memory.
const maxLong = 100_000

func (s *streamer) answer(prompt string, tools map[string]bool) (string, error) {
	cmd, arg, _ := strings.Cut(strings.TrimSpace(prompt), " ")
	switch cmd {
	case "/echo":
		return model.StopEndTurn, s.text(model.KindText, arg, "")
	case "/help", "/demo":
		return model.StopEndTurn, s.text(model.KindText, Guide, "")
	case "/long":
		n, err := strconv.Atoi(strings.TrimSpace(arg))
		if err != nil || n <= 0 {
			n = 50
		}
		n = min(n, maxLong)
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "Sentence %d of %d. ", i, n)
		}
		return model.StopEndTurn, s.text(model.KindText, b.String(), "")
	case "/tool":
		// One call per line: "/tool A {…}\n/tool B {…}" calls both, in
		// one message.
		var calls [][2]string
		for _, line := range strings.Split(strings.TrimSpace(prompt), "\n") {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "/tool ")
			if !ok {
				continue
			}
			name, input, _ := strings.Cut(strings.TrimSpace(rest), " ")
			if strings.TrimSpace(input) == "" {
				input = "{}"
			}
			calls = append(calls, [2]string{name, input})
		}
		names := make([]string, len(calls))
		for i, c := range calls {
			names[i] = c[0]
		}
		if err := s.text(model.KindText, fmt.Sprintf("Calling %s.", strings.Join(names, ", ")), ""); err != nil {
			return "", err
		}
		for _, c := range calls {
			if err := s.toolUse(c[0], c[1]); err != nil {
				return "", err
			}
		}
		return model.StopToolUse, nil
	}
	thinking := fmt.Sprintf("The user wrote %d words. I should look at the workspace before answering.", len(strings.Fields(prompt)))
	if err := s.text(model.KindThinking, thinking, "demo-signature-"+strconv.Itoa(len(prompt))); err != nil {
		return "", err
	}
	if !tools["list_dir"] {
		return model.StopEndTurn, s.text(model.KindText, "I am the built-in demo model. You said: "+prompt, "")
	}
	if err := s.text(model.KindText, "Let me look at the files in your workspace first.", ""); err != nil {
		return "", err
	}
	return model.StopToolUse, s.toolUse("list_dir", `{"path": "."}`)
}

func (s *streamer) summarise(prompt string, results message.Message, first bool) error {
	var b strings.Builder
	for _, r := range results.Content {
		if r.Type != message.BlockToolResult {
			continue
		}
		if r.IsError {
			fmt.Fprintf(&b, "The tool call failed: %s. ", firstLine(r.Content))
			continue
		}
		if len(r.Images) > 0 {
			fmt.Fprintf(&b, "The tool returned %s. ", seeImages(r.Images))
			continue
		}
		if sr, ok := protocol.ParseShellResult(r.Content); ok {
			stdout, stderr := sr.Stdout, sr.Stderr
			fmt.Fprintf(&b, "The command exited with code %d", sr.ExitCode)
			if stdout == "" && stderr == "" {
				b.WriteString(" and printed nothing")
			}
			if stdout != "" {
				b.WriteString("; it printed " + someLines(stdout))
			}
			if stderr != "" {
				b.WriteString("; on stderr: " + someLines(stderr))
			}
			b.WriteString(". ")
			continue
		}
		fmt.Fprintf(&b, "The tool returned %s. ", someLines(r.Content))
	}
	fmt.Fprintf(&b, "I am the built-in demo model, so that is as far as I go with %q. Set ANTHROPIC_API_KEY or OPENAI_API_KEY to talk to a real model.", truncate(prompt, 60))
	if first {
		b.WriteString("\n\n" + Guide)
	} else {
		b.WriteString(" (/demo shows what I understand.)")
	}
	return s.text(model.KindText, b.String(), "")
}

// someLines tells how many lines text has and shows the first eight:
// "3 lines: a, b, c".
func someLines(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return "0 lines"
	}
	shown := lines
	if len(shown) > 8 {
		shown = shown[:8]
	}
	noun := "lines"
	if len(lines) == 1 {
		noun = "line"
	}
	return fmt.Sprintf("%d %s, starting with: %s", len(lines), noun, strings.Join(shown, ", "))
}

// Guide is the demo model's answer to /help and /demo, and the end of
// its answer to a conversation's first prompt: what it understands and
// how to use a real model.
const Guide = "**You are talking to `builtin:demo`**, the offline model metis uses when no provider key is set. " +
	"It understands no language, but it shows everything metis does. Try:\n\n" +
	"- `/echo TEXT`: answers TEXT.\n" +
	"- `/long N`: streams N numbered sentences (try `/long 300`, then cancel it with Esc or Ctrl-C).\n" +
	"- `/tool NAME {json}`: calls a tool with that input and summarises the result, for example " +
	"`/tool list_dir {\"path\": \".\"}`, `/tool shell {\"command\": \"ls -la\"}` (metis asks you before it runs a command: " +
	"y allows once, a for the session, n denies) or `/tool write_file {\"path\": \"hello.txt\", \"content\": \"hi\\n\"}` (its diff is shown).\n" +
	"- `/tool delegate {\"task\": \"look around\"}`: hands a task to a worker session.\n" +
	"- anything else: thinks, lists the workspace and summarises it.\n\n" +
	"For a real model, quit and start metis again with a key in the environment: " +
	"`ANTHROPIC_API_KEY=… metis`, `OPENAI_API_KEY=… metis`, or `OPENAI_BASE_URL=http://localhost:11434/v1 metis` " +
	"for a local server such as Ollama (or put the key under `providers:` in ~/.metis/config.yaml)."

// firstPrompt reports whether the conversation holds one prompt of the
// user's (its first turn), not a slash command of the demo's.
func firstPrompt(ms []message.Message) bool {
	n := 0
	for _, m := range ms {
		if m.Role == message.RoleUser && m.PlainText() != "" {
			n++
		}
	}
	return n == 1 && !strings.HasPrefix(strings.TrimSpace(lastUserText(ms)), "/")
}

func lastUserText(ms []message.Message) string {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Role == message.RoleUser {
			return ms[i].PlainText()
		}
	}
	return ""
}

func toolNames(specs []model.ToolSpec) map[string]bool {
	m := make(map[string]bool, len(specs))
	for _, s := range specs {
		m[s.Name] = true
	}
	return m
}

// maxSummaryLines bounds a summary's lines: a summary of a long
// conversation stays short.
const maxSummaryLines = 12

// summary answers a compaction's summary request: the user requests of
// the conversation it was given (the transcript in its last message),
// one line each, the most recent ones when there are many. It is
// deterministic, as everything the demo says.
func summary(ms []message.Message) string {
	transcript := ""
	if n := len(ms); n > 0 {
		transcript = ms[n-1].PlainText()
	}
	var asks []string
	for _, line := range strings.Split(transcript, "\n") {
		if rest, ok := strings.CutPrefix(line, "[user] "); ok && strings.TrimSpace(rest) != "" {
			asks = append(asks, truncate(strings.TrimSpace(rest), 60))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Summary (built-in demo model): the conversation so far held %d user requests.", len(asks))
	if len(asks) > maxSummaryLines {
		fmt.Fprintf(&b, " The last %d:", maxSummaryLines)
		asks = asks[len(asks)-maxSummaryLines:]
	}
	for _, a := range asks {
		b.WriteString("\n- " + a)
	}
	return b.String()
}

// chunk splits text into word-sized deltas that keep their spacing, so
// concatenating them gives back text exactly.
func chunk(text string) []string {
	var out []string
	start := 0
	for i := 1; i < len(text); i++ {
		if text[i] == ' ' && text[i-1] != ' ' {
			out = append(out, text[start:i])
			start = i
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// fragments splits s into pieces of about n bytes, like a provider
// splitting JSON mid-token, but never inside a UTF-8 sequence.
func fragments(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// seeImages says what images the demo received: "1 image (PNG 32×32)",
// "2 images (PNG 32×32, JPEG 8×8)"; an image whose bytes did not arrive
// (or not whole) says so.
func seeImages(imgs []message.Block) string {
	parts := make([]string, len(imgs))
	for i, im := range imgs {
		name := strings.TrimPrefix(strings.ToUpper(im.MediaType), "IMAGE/")
		if name == "WEBP" {
			name = "WebP"
		}
		parts[i] = fmt.Sprintf("%s %d×%d", name, im.Width, im.Height)
		if int64(len(im.Data)) != im.Size {
			parts[i] += ", bytes missing"
		}
	}
	noun := "images"
	if len(imgs) == 1 {
		noun = "image"
	}
	return fmt.Sprintf("%d %s (%s)", len(imgs), noun, strings.Join(parts, ", "))
}

// Models implements model.Lister: the demo is the one model.
func (Demo) Models(context.Context) ([]string, error) { return []string{"demo"}, nil }
