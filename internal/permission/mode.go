package permission

import (
	"fmt"

	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

// Mode is a session's permission mode (contract §7). Its values are wire
// vocabulary (protocol.Mode*).
type Mode string

// The modes, from the most careful to the least.
const (
	// ModeDefault: tools that only read run; tools that change files,
	// run commands, fetch from the network or come from outside metis
	// ask first.
	ModeDefault Mode = protocol.ModeDefault
	// ModeAcceptEdits: file changes inside the workspace run too;
	// commands, fetches and external tools still ask.
	ModeAcceptEdits Mode = protocol.ModeAcceptEdits
	// ModePlan: nothing that changes files or runs a command runs: such
	// calls fail with permission_denied without asking, and the model is
	// not offered those tools.
	ModePlan Mode = protocol.ModePlan
	// ModeAuto: nothing asks unless a rule says so (and a shell command
	// asks when no sandbox confines it); deny rules still refuse.
	ModeAuto Mode = protocol.ModeAuto
)

// Modes lists every mode, in the order above.
func Modes() []Mode { return []Mode{ModeDefault, ModeAcceptEdits, ModePlan, ModeAuto} }

// ParseMode returns the mode named s; "" is an error, like any other
// name that is not a mode.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes() {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("%q is not a mode; use default, accept_edits, plan or auto", s)
}

// Refuses reports whether mode refuses every call of a tool of kind k
// outright (plan mode: anything that changes files, runs commands or
// comes from outside metis). The agent loop does not offer such tools
// to the model.
func Refuses(mode Mode, k tool.Kind) bool {
	if mode != ModePlan {
		return false
	}
	switch k {
	case tool.KindEdit, tool.KindExecute, tool.KindExternal:
		return true
	}
	return false
}

// modeDefault is what mode does with a call of kind k that no rule
// decided: allow or ask (plan's refusals are decided before).
// editsInside tells whether every file the call changes is a known path
// inside the workspace.
func modeDefault(mode Mode, k tool.Kind, editsInside bool) Action {
	switch k {
	case tool.KindRead, tool.KindDelegate:
		return Allow
	}
	switch mode {
	case ModeAuto:
		return Allow
	case ModeAcceptEdits:
		if k == tool.KindEdit && editsInside {
			return Allow
		}
	}
	return Ask
}
