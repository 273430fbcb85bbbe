package openai

import (
	"crypto/rand"
	"encoding/hex"
)

// fallbackID returns a fresh id for a tool call the server sent without
// one: "call_metis_" and 96 random bits, so ids never repeat across
// calls, turns or sessions (a counter per stream would repeat every
// turn).
func fallbackID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return "call_metis_" + hex.EncodeToString(b[:])
}
