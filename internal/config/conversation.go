package config

import (
	"errors"
	"strconv"

	"github.com/metis-agent/metis/internal/images"
)

// Conversation holds the settings of follow-ups and images
// (docs/conversation.md).
type Conversation struct {
	// MaxQueuedTurns bounds the turns waiting in one session's queue
	// (and the messages waiting to be steered into one turn).
	MaxQueuedTurns int
	// MaxImages bounds the images of one message; MaxImageBytes each
	// image's size.
	MaxImages     int
	MaxImageBytes int64
}

// Defaults of the conversation settings.
const (
	DefaultMaxQueuedTurns = 10
	DefaultMaxImages      = 10
	DefaultMaxImageBytes  = images.DefaultMaxBytes
)

func defaultConversation() Conversation {
	return Conversation{MaxQueuedTurns: DefaultMaxQueuedTurns, MaxImages: DefaultMaxImages, MaxImageBytes: DefaultMaxImageBytes}
}

// maxImageBytesCap bounds max-image-bytes: a turn's body carries its
// images in base64, and the server reads it whole.
const maxImageBytesCap = 32 << 20

func init() {
	fields = append(fields,
		intField("max-queued-turns", "turns that may wait in one session's queue (and messages waiting to be steered into one turn); more are refused with 409 queue_full", 1, func(c *Config) *int { return &c.MaxQueuedTurns }),
		intField("max-images", "images one message may hold", 1, func(c *Config) *int { return &c.MaxImages }),
		field{"max-image-bytes", "bytes one image may have (at most 33554432)",
			func(c *Config) string { return strconv.FormatInt(c.MaxImageBytes, 10) },
			func(c *Config, s string) error {
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil || n < 1 || n > maxImageBytesCap {
					return errors.New("want a number of bytes from 1 to 33554432")
				}
				c.MaxImageBytes = n
				return nil
			}},
	)
}
