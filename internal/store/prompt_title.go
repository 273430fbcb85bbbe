package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxPromptTitleRunes bounds a title derived from a prompt, the
// ellipsis included (a title the user gives is bounded by MaxTitleRunes).
const MaxPromptTitleRunes = 60

// The markdown and command syntax PromptTitle drops.
var (
	reSlash      = regexp.MustCompile(`^/([A-Za-z][\w-]*)(?:\s+|$)`)
	reToolName   = regexp.MustCompile(`^[\w.-]+\s*`)
	reFirstWord  = regexp.MustCompile(`^\S+\s*`)
	reArgField   = regexp.MustCompile(`"(?:task|command|path|query)"\s*:\s*"((?:[^"\\]|\\.)*)"`)
	reFence      = regexp.MustCompile("(?s)```.*?(?:```|$)")
	reInlineCode = regexp.MustCompile("`([^`]*)`")
	reLink       = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	reLinePrefix = regexp.MustCompile(`(?m)^[ \t]{0,3}(?:#{1,6}|>|[-*+]|\d+[.)])[ \t]+`)
	reStrong     = regexp.MustCompile(`\*\*(\S(?:.*?\S)?)\*\*`)
	reEm         = regexp.MustCompile(`\*(\S(?:.*?\S)?)\*`)
	reStrike     = regexp.MustCompile(`~~(\S(?:.*?\S)?)~~`)
	// Underscores mark emphasis only outside words (snake_case stays).
	reUnder   = regexp.MustCompile(`(^|[^\p{L}\p{N}_])(__?)([^\s_](?:[^_]*[^\s_])?)(__?)($|[^\p{L}\p{N}_])`)
	reJSONBit = regexp.MustCompile(`[{}\[\]"]+`)
)

// PromptTitle derives a short clean title from the text of a session's
// first prompt (docs/protocol.md, "Session titles"): a leading slash
// command is dropped (`/echo hi` is "hi", `/tool NAME {json}` the
// JSON's task, command, path or query, else NAME and the JSON's
// top-level string values, `/long N` "long answer (N)",
// `/model X rest` "rest"); markdown syntax is dropped (code fences with
// their content, inline code marks, links and images keep their text,
// headings, quotes and list markers, emphasis marks); white space runs
// become one space; text longer than MaxPromptTitleRunes runes is cut
// at a word boundary and ends with "…". Text that cleans to nothing
// (only a command, only a code block) keeps Title's form of it, so a
// session with a prompt always has a title.
func PromptTitle(text string) string {
	t := strings.TrimSpace(text)
	if m := reSlash.FindStringSubmatch(t); m != nil {
		t = t[len(m[0]):]
		switch m[1] {
		case "tool":
			name := strings.TrimSpace(reToolName.FindString(t))
			t = reToolName.ReplaceAllString(t, "")
			if reArgField.FindStringSubmatch(t) == nil {
				if vals := topStrings(t); len(vals) > 0 {
					t = name + " " + strings.Join(vals, " ") // grep {"pattern":"x"}: "grep x"
				}
			}
		case "model":
			t = reFirstWord.ReplaceAllString(t, "")
		case "long":
			if n := strings.Fields(t); len(n) > 0 {
				t = "long answer (" + n[0] + ")"
			} else {
				t = "long answer"
			}
		}
		if f := reArgField.FindStringSubmatch(t); f != nil {
			if s, err := strconv.Unquote(`"` + f[1] + `"`); err == nil {
				t = s
			} else {
				t = strings.ReplaceAll(f[1], `\"`, `"`)
			}
			if reSlash.MatchString(t) && len(t) < len(text) {
				// A task that is itself a command (a delegate's /echo).
				if inner := PromptTitle(t); inner != "" {
					return inner
				}
			}
		} else if m[1] == "tool" {
			t = reJSONBit.ReplaceAllString(t, " ") // the arguments' JSON syntax
		}
	}
	t = reFence.ReplaceAllString(t, " ")
	t = reInlineCode.ReplaceAllString(t, "$1")
	t = reLink.ReplaceAllString(t, "$1")
	t = reLinePrefix.ReplaceAllString(t, "")
	t = reStrong.ReplaceAllString(t, "$1")
	t = reEm.ReplaceAllString(t, "$1")
	t = reStrike.ReplaceAllString(t, "$1")
	t = reUnder.ReplaceAllStringFunc(t, func(s string) string {
		m := reUnder.FindStringSubmatch(s)
		if m[2] != m[4] {
			return s
		}
		return m[1] + m[3] + m[5]
	})
	if t = Title(t); t == "" {
		t = Title(text)
	}
	return capAtWord(t, MaxPromptTitleRunes)
}

// topStrings returns the string values at the top level of a JSON
// object, in order (nil for what is not one).
func topStrings(s string) []string {
	dec := json.NewDecoder(strings.NewReader(s))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []string
	for dec.More() {
		if _, err := dec.Token(); err != nil { // the key
			return nil
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if str, ok := v.(string); ok && strings.TrimSpace(str) != "" {
			out = append(out, str)
		}
	}
	return out
}

// capAtWord cuts a one-line text longer than max runes at the last word
// boundary past half of max (at max-1 runes when there is none), drops
// the punctuation left at the cut and ends it with "…".
func capAtWord(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	runes := []rune(s)
	cut := runes[:max-1]
	if runes[max-1] != ' ' {
		if sp := lastSpace(cut); sp > max/2 {
			cut = cut[:sp]
		}
	}
	kept := strings.TrimRightFunc(string(cut), func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(",.;:–-…", r)
	})
	if kept == "" {
		kept = string(cut)
	}
	return kept + "…"
}

// lastSpace is the index of the last space in rs (-1: none).
func lastSpace(rs []rune) int {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i] == ' ' {
			return i
		}
	}
	return -1
}

// cleanDerivedTitles (schema v10) cleans the titles stored before
// PromptTitle: a title that still reads as its session's first prompt
// did by Title is derived again by PromptTitle. A title the user gave
// (Rename) differs from that and stays as it is, unless it is the
// first prompt's text word for word.
func cleanDerivedTitles(ctx context.Context, tx *sql.Tx) error {
	prompts, err := firstPrompts(ctx, tx)
	if err != nil {
		return err
	}
	for id, text := range prompts {
		if _, err := tx.ExecContext(ctx, "UPDATE sessions SET title = ?1 WHERE id = ?2 AND title = ?3",
			PromptTitle(text), id, Title(text)); err != nil {
			return err
		}
	}
	return nil
}
