package delegate

import "github.com/metis-agent/metis/internal/tool"

// Kind implements tool.Classified: the delegate tool starts a worker,
// whose own calls the permission policy judges in the worker's mode.
func (*Tool) Kind() tool.Kind { return tool.KindDelegate }
