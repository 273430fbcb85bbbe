package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/tool"
	"github.com/metis-agent/metis/protocol"
)

// Tool is one tool of an MCP server, as offered to models: a tool.Tool
// whose calls go to the server.
type Tool struct {
	inst     *instance
	remote   string // the server's name for it
	spec     model.ToolSpec
	readOnly bool // the server's readOnlyHint
}

var (
	_ tool.Tool       = (*Tool)(nil)
	_ tool.Classified = (*Tool)(nil)
)

// Spec implements tool.Tool.
func (t *Tool) Spec() model.ToolSpec { return t.spec }

// Kind implements tool.Classified: an MCP tool is tool.KindExternal,
// unless its server's entry trusts read-only hints
// (trust_read_only_hints) and the tool has readOnlyHint: then it is
// tool.KindRead.
func (t *Tool) Kind() tool.Kind {
	if t.readOnly && t.inst.cfg.TrustReadOnlyHints {
		return tool.KindRead
	}
	return tool.KindExternal
}

// Server is the name of the tool's server; Remote the server's name for
// the tool.
func (t *Tool) Server() string { return t.inst.cfg.Name }

// Remote is the server's own name for the tool.
func (t *Tool) Remote() string { return t.remote }

// buildTools turns a server's tool list into the tools offered (sorted
// by the server's names, at most MaxTools) and their status, skipped
// ones included.
func buildTools(i *instance, listed []*sdk.Tool) ([]*Tool, []protocol.MCPToolStatus) {
	sort.SliceStable(listed, func(a, b int) bool { return listed[a].Name < listed[b].Name })
	var (
		ok    []*sdk.Tool
		specs []json.RawMessage
		notes []string
		info  []protocol.MCPToolStatus
	)
	seen := map[string]bool{}
	for _, t := range listed {
		st := protocol.MCPToolStatus{Tool: t.Name, Description: firstLine(t.Description), Skipped: true}
		if t.Annotations != nil {
			st.ReadOnlyHint = t.Annotations.ReadOnlyHint
		}
		schema, note, err := inputSchema(t.InputSchema)
		switch {
		case t.Name == "":
			st.Problem = "the tool has no name"
		case seen[t.Name]:
			st.Problem = "the server lists this name twice; the first is offered"
		case err != nil:
			st.Problem = err.Error()
		case len(ok) >= MaxTools:
			st.Problem = fmt.Sprintf("the server offers more than %d tools; the others are not offered", MaxTools)
		default:
			seen[t.Name] = true
			ok, specs, notes = append(ok, t), append(specs, schema), append(notes, note)
			continue
		}
		info = append(info, st)
	}
	names := make([]string, len(ok))
	for k, t := range ok {
		names[k] = t.Name
	}
	offered := assignNames(i.cfg.Name, names)
	tools := make([]*Tool, len(ok))
	for k, t := range ok {
		readOnly := t.Annotations != nil && t.Annotations.ReadOnlyHint
		tools[k] = &Tool{inst: i, remote: t.Name, readOnly: readOnly,
			spec: model.ToolSpec{Name: offered[k], Description: description(t.Description), InputSchema: specs[k]}}
		info = append(info, protocol.MCPToolStatus{Name: offered[k], Tool: t.Name, Description: firstLine(t.Description),
			ReadOnlyHint: readOnly, Kind: string(tools[k].Kind()), Problem: notes[k]})
	}
	sort.SliceStable(info, func(a, b int) bool { return info[a].Tool < info[b].Tool })
	for _, st := range info {
		if st.Skipped {
			i.log.Warn("mcp tool not offered", "tool", st.Tool, "problem", st.Problem)
		}
	}
	return tools, info
}

// Run implements tool.Tool: it calls the tool on its server, within the
// entry's call timeout. Cancelling ctx sends notifications/cancelled to
// the server and stops waiting at once.
func (t *Tool) Run(ctx context.Context, env tool.Env, input json.RawMessage) (tool.Result, error) {
	args := bytes.TrimSpace(input)
	if len(args) == 0 {
		args = []byte("{}")
	}
	if args[0] != '{' || !json.Valid(args) {
		return tool.Result{}, tool.Errorf(tool.ClassInvalidInput, "the input of %s is not a JSON object", t.spec.Name)
	}
	res, err := t.inst.call(ctx, t.remote, json.RawMessage(args))
	if err != nil {
		return tool.Result{}, err
	}
	return result(ctx, t.spec.Name, res)
}

// call runs tools/call on the running connection. A streamable HTTP
// session the server lost (404) is reconnected and the call made once
// more: the server never saw it. Other failures are classified for the
// model (see callError), and a failure that may mean a broken
// connection has the supervisor check it.
func (i *instance) call(ctx context.Context, name string, args json.RawMessage) (*sdk.CallToolResult, error) {
	c, _, state := i.current()
	if c == nil {
		return nil, i.unavailable(state)
	}
	for attempt := 0; ; attempt++ {
		res, err, timedOut := c.call(ctx, name, args, i.cfg.CallTimeout)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if attempt == 0 && c.lostSession(err) {
			i.log.Info("mcp server lost the session; reconnecting", "err", err)
			wctx, cancel := context.WithTimeout(ctx, i.cfg.StartTimeout+time.Second)
			next := i.awaitNew(wctx, c)
			cancel()
			if next != nil {
				c = next
				continue
			}
		}
		return nil, i.callError(c, name, err, timedOut)
	}
}

// call makes one tools/call on c, ended by ctx, by the call timeout or
// by the connection's close.
func (c *conn) call(ctx context.Context, name string, args json.RawMessage, timeout time.Duration) (*sdk.CallToolResult, error, bool) {
	cctx, cancel := context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	res, err := c.session.CallTool(cctx, &sdk.CallToolParams{Name: name, Arguments: args})
	return res, err, errors.Is(context.Cause(cctx), errCallTimeout)
}

var errCallTimeout = errors.New("call timeout")

// lostSession reports whether a call failed because the streamable
// HTTP server no longer knows the session (it answered 404): the
// request that met the 404, and every later one on the session, was
// never processed, so the call may be made again on a new session. The
// 404 may have met another request first (the event stream, a
// notification): the call then fails as the connection closed, and the
// session's end says why.
func (c *conn) lostSession(err error) bool {
	if c.proc != nil {
		return false
	}
	missing := func(err error) bool {
		// The SDK wraps ErrSessionMissing, except on one path of its
		// event stream's reconnection, which keeps only the message.
		return err != nil && (errors.Is(err, sdk.ErrSessionMissing) || strings.Contains(err.Error(), sdk.ErrSessionMissing.Error()))
	}
	if missing(err) {
		return true
	}
	// The call failed as the connection closed: on the SDK's side, or
	// on ours (the supervisor closed it once it ended).
	if !errors.Is(err, sdk.ErrConnectionClosed) && !errors.Is(context.Cause(c.ctx), errEnded) {
		return false
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-c.waited:
		return missing(c.session.Wait())
	case <-t.C:
		return false
	}
}

// unavailable is the error of a call while the server does not run.
func (i *instance) unavailable(state string) error {
	i.mu.Lock()
	last := i.lastErr
	i.mu.Unlock()
	msg := fmt.Sprintf("the MCP server %s is not running (%s)", i.cfg.Name, state)
	if last != "" {
		msg += ": " + last
	}
	return tool.Errorf(tool.ClassUnavailable, "%s", msg)
}

// callError classifies a failed call: the call timeout is timeout; an
// error the server answered with is invalid_input (invalid params) or
// execution_error; a connection that ended or was stopped is
// unavailable, with how the server ended when it did.
func (i *instance) callError(c *conn, name string, err error, timedOut bool) error {
	if timedOut {
		return tool.Errorf(tool.ClassTimeout, "the MCP server %s did not answer %s within %s (call_timeout)", i.cfg.Name, name, i.cfg.CallTimeout)
	}
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		i.checkConn()
		class := tool.ClassExecution
		if rpc.Code == jsonrpc.CodeInvalidParams {
			class = tool.ClassInvalidInput
		}
		return tool.Errorf(class, "the MCP server %s refused the call: %s", i.cfg.Name, rpc.Message)
	}
	// The connection broke: wait a moment for it to be seen as gone,
	// to say how the server ended.
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-c.dead:
		if errors.Is(context.Cause(c.ctx), errStopped) {
			return tool.Errorf(tool.ClassUnavailable, "the MCP server %s was stopped during the call", i.cfg.Name)
		}
		return tool.Errorf(tool.ClassUnavailable, "the MCP server %s ended during the call: %s", i.cfg.Name, c.why())
	case <-t.C:
	}
	i.checkConn()
	return tool.Errorf(tool.ClassUnavailable, "the call to the MCP server %s failed: %v", i.cfg.Name, err)
}
