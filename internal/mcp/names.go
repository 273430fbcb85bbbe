package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxToolName is the longest tool name offered to a model: Anthropic
// takes ^[a-zA-Z0-9_-]{1,64}$ and OpenAI's function names the same
// characters and length.
const MaxToolName = 64

// Prefix starts the name of every MCP tool: mcp__<server>__<tool>.
const Prefix = "mcp__"

func validNameRune(r rune) bool {
	return r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// cleanName replaces every character a tool name cannot hold with '_'.
func cleanName(s string) string {
	return strings.Map(func(r rune) rune {
		if validNameRune(r) {
			return r
		}
		return '_'
	}, s)
}

// hashSuffix is "_" and the first 8 hex digits of the SHA-256 of the
// server and tool names: the same for the same tool, every time.
func hashSuffix(server, tool string) string {
	h := sha256.Sum256([]byte(server + "\x00" + tool))
	return "_" + hex.EncodeToString(h[:4])
}

// ToolName is the name a server's tool is offered under, before
// collisions: mcp__<server>__<tool> with every character other than
// letters, digits, '_' and '-' replaced by '_'. A name longer than
// MaxToolName is cut to 55 bytes and ends with hashSuffix, so two long
// names that share their first 55 bytes still differ.
func ToolName(server, tool string) string {
	n := Prefix + cleanName(server) + "__" + cleanName(tool)
	if len(n) <= MaxToolName {
		return n
	}
	return n[:MaxToolName-9] + hashSuffix(server, tool)
}

// assignNames gives each of a server's tools (by the server's names, in
// order: callers sort them) its offered name. Two tools whose names
// clean to the same one (a.b and a_b) collide: the first in order keeps
// it, the others get the name cut to 55 bytes followed by hashSuffix
// (and, in the unlikely case that is taken too, -2, -3, …).
func assignNames(server string, tools []string) []string {
	out := make([]string, len(tools))
	taken := map[string]bool{}
	for i, t := range tools {
		n := ToolName(server, t)
		if taken[n] {
			base := n
			if len(base) > MaxToolName-9 {
				base = base[:MaxToolName-9]
			}
			hashed := base + hashSuffix(server, t)
			n = hashed
			for k := 2; taken[n]; k++ {
				s := fmt.Sprintf("-%d", k)
				n = hashed[:min(len(hashed), MaxToolName-len(s))] + s
			}
		}
		taken[n] = true
		out[i] = n
	}
	return out
}
