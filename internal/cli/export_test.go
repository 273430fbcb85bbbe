package cli

import (
	"io"
	"time"

	"github.com/metis-agent/metis/client"
)

// PrintMCPForTest exposes printMCP to the tests.
func PrintMCPForTest(out io.Writer, st client.MCPStatus, tools bool) {
	printMCP(out, st, tools, time.Now())
}
