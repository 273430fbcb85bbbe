package config

// The providers register themselves with internal/model when linked in;
// the server links them, and so do these tests.
import (
	_ "github.com/metis-agent/metis/internal/model/anthropic"
	_ "github.com/metis-agent/metis/internal/model/builtin"
	_ "github.com/metis-agent/metis/internal/model/openai"
)
