package protocol

// Role is a message's author (contract §4, the canonical message).
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool carries tool_result blocks fed back to the model.
	RoleTool Role = "tool"
)

// MessageStatus is a stored message's status (spec §6.2.6).
type MessageStatus string

// Message statuses.
const (
	StatusComplete  MessageStatus = "complete"
	StatusCancelled MessageStatus = "cancelled"
	StatusFailed    MessageStatus = "failed"
)

// Content block types of the canonical message (contract §4).
const (
	BlockText       = "text"
	BlockThinking   = "thinking"
	BlockToolUse    = "tool_use"
	BlockToolResult = "tool_result"
	// BlockCompaction: see context.go.
)
