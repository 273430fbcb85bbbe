package acp

import "testing"

// Only metis's own commands are taken from a prompt; "/model X text"
// (the server's per-turn override) and every other "/word" go to the
// server as they are.
func TestParseCommand(t *testing.T) {
	for _, tc := range []struct {
		in, name, arg string
		ok            bool
	}{
		{"/compact", "compact", "", true},
		{"  /compact keep the test names  ", "compact", "keep the test names", true},
		{"/compact\nkeep the test names", "compact", "keep the test names", true},
		{"/mode plan", "mode", "plan", true},
		{"/mode", "mode", "", true},
		{"/model anthropic:claude-sonnet-4-6", "model", "anthropic:claude-sonnet-4-6", true},
		{"/model builtin:demo /echo hi", "", "", false},
		{"/help", "help", "", true},
		{"/modelx a:b", "", "", false},
		{"/echo hi", "", "", false},
		{"/tool shell {}", "", "", false},
		{"compact", "", "", false},
		{"/", "", "", false},
		{"", "", "", false},
	} {
		name, arg, ok := parseCommand(tc.in)
		if name != tc.name || arg != tc.arg || ok != tc.ok {
			t.Errorf("parseCommand(%q) = %q, %q, %v; want %q, %q, %v", tc.in, name, arg, ok, tc.name, tc.arg, tc.ok)
		}
	}
}

// A model id is provider:model without white space.
func TestValidModelID(t *testing.T) {
	for in, want := range map[string]bool{
		"builtin:demo": true, "openai:qwen2.5-coder:7b": true, "anthropic:claude-sonnet-4-6": true,
		"demo": false, ":demo": false, "builtin:": false, "a:b c": false, "": false,
	} {
		if got := validModelID(in); got != want {
			t.Errorf("validModelID(%q) = %v", in, got)
		}
	}
}
