//go:build !linux

package spectest_test

import (
	"testing"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
)

func attachNarrow(t *testing.T, h *servertest.Harness, sid string) *streamtest.Client {
	t.Skip("shrinking a socket's receive window needs Linux socket options")
	return nil
}
