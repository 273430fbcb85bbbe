//go:build !linux

package clustertest_test

import (
	"testing"

	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
)

func connectNarrow(t *testing.T, tr streamtest.Transport, h *servertest.Harness, sid string) streamtest.Conn {
	t.Skip("shrinking a socket's receive window needs Linux socket options")
	return nil
}
