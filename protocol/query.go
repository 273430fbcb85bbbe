package protocol

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// The SSE stream (GET /sessions/{id}/events) takes its subscribe in the
// query: the subscribe frame's fields, flattened. Lists are
// comma-separated, and a list parameter may also be repeated.
const (
	QuerySince    = "since"                   // an event id: replay what came after it
	QuerySnapshot = "snapshot"                // true: a snapshot first
	QueryTypes    = "types"                   // filter.event_types
	QueryActors   = "actors"                  // filter.actors
	QueryPreset   = "preset"                  // a preset name, "chat" or "preset:chat"
	QueryWorkers  = "include_worker_sessions" // filter.include_worker_sessions
	// HeaderLastEventID is the header an SSE client sends on reconnect:
	// the id of the last event it received. It overrides since and
	// snapshot: the client resumes after it.
	HeaderLastEventID = "Last-Event-ID"
)

// presetPrefix starts a preset's name in a subscribe frame.
const presetPrefix = "preset:"

// QueryError is a query the SSE stream refuses before subscribing:
// Param names the parameter at fault.
type QueryError struct {
	Param   string
	Message string
}

func (e *QueryError) Error() string { return e.Message }

func badQuery(param, format string, args ...any) *QueryError {
	return &QueryError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// DecodeSubscribeQuery turns the SSE stream's query and its
// Last-Event-ID header (lastEventID, "" when absent) into the Subscribe
// a WebSocket subscribe frame decodes to; the hub then validates both
// the same way (unknown types or presets, cursors). Unknown parameters
// are ignored, as unknown fields of a frame are. A malformed parameter,
// a single-valued one given twice with different values, a preset
// together with types or actors, or a field over the frame's limits is
// a *QueryError. An empty since is no cursor.
func DecodeSubscribeQuery(q url.Values, lastEventID string) (*Subscribe, error) {
	s := &Subscribe{}
	since, err := single(q, QuerySince)
	if err != nil {
		return nil, err
	}
	if lastEventID != "" {
		// The client holds everything up to it: resume, whatever the URL
		// it reconnects to asked for the first time.
		since = lastEventID
	} else if s.Snapshot, err = flag(q, QuerySnapshot); err != nil {
		return nil, err
	}
	if since != "" {
		if len(since) > MaxCursor {
			return nil, badQuery(QuerySince, "the cursor is longer than %d bytes; it must be an event id", MaxCursor)
		}
		s.Since = &since
	}
	if s.Filter.IncludeWorkerSessions, err = flag(q, QueryWorkers); err != nil {
		return nil, err
	}
	preset, err := single(q, QueryPreset)
	if err != nil {
		return nil, err
	}
	if s.Filter.EventTypes, err = list(q, QueryTypes); err != nil {
		return nil, err
	}
	if s.Filter.Actors, err = list(q, QueryActors); err != nil {
		return nil, err
	}
	if preset != "" {
		if s.Filter.EventTypes != nil || s.Filter.Actors != nil {
			return nil, badQuery(QueryPreset, "give either a preset or types and actors, not both")
		}
		if !strings.HasPrefix(preset, presetPrefix) {
			preset = presetPrefix + preset
		}
		s.Preset = preset
	}
	return s, nil
}

// QueryRaw names the query as a whole in a QueryError about a query
// that does not parse.
const QueryRaw = "query"

// DecodeSubscribeRequest is DecodeSubscribeQuery for an HTTP request:
// its raw query (URL.RawQuery) and the values of its Last-Event-ID
// headers. A query that does not parse (a bad percent escape such as
// "%zz", a semicolon) is a *QueryError, where url.URL.Query would drop
// the pair silently and subscribe to everything; so are Last-Event-ID
// headers with different values (the same value repeated is one).
func DecodeSubscribeRequest(rawQuery string, lastEventIDs []string) (*Subscribe, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, badQuery(QueryRaw, "the query does not parse: %s", truncate(err.Error(), 80))
	}
	last := ""
	for i, v := range lastEventIDs {
		if i > 0 && v != last {
			return nil, badQuery(HeaderLastEventID, "%s is given more than once, with different values", HeaderLastEventID)
		}
		last = v
	}
	return DecodeSubscribeQuery(q, last)
}

// single returns a parameter that may be given once (or repeated with
// the same value).
func single(q url.Values, name string) (string, error) {
	vs := q[name]
	for _, v := range vs[min(len(vs), 1):] {
		if v != vs[0] {
			return "", badQuery(name, "%s is given more than once, with different values", name)
		}
	}
	if len(vs) == 0 {
		return "", nil
	}
	return vs[0], nil
}

// flag reads a boolean parameter: absent is false, present without a
// value ("?snapshot") is true.
func flag(q url.Values, name string) (bool, error) {
	v, err := single(q, name)
	if err != nil || len(q[name]) == 0 {
		return false, err
	}
	if v == "" {
		return true, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badQuery(name, "%s must be true or false, not %q", name, truncate(v, 32))
	}
	return b, nil
}

// list reads a list parameter: nil when absent, the comma-separated
// entries of every occurrence otherwise (so "types=" is an empty list,
// which the filter refuses).
func list(q url.Values, name string) ([]string, error) {
	vs, ok := q[name]
	if !ok {
		return nil, nil
	}
	out := []string{}
	for _, v := range vs {
		if v == "" {
			continue
		}
		out = append(out, strings.Split(v, ",")...)
		if len(out) > MaxFilterItems {
			return nil, badQuery(name, "%s lists more than %d items", name, MaxFilterItems)
		}
	}
	return out, nil
}

// EncodeSubscribeQuery is DecodeSubscribeQuery's inverse: the query of
// the SSE stream that subscribes as s does. A filter given as an object
// with every type (EventTypes nil) and no actors encodes to no filter
// parameter at all.
func EncodeSubscribeQuery(s Subscribe) url.Values {
	q := url.Values{}
	if s.Since != nil && *s.Since != "" {
		q.Set(QuerySince, *s.Since)
	}
	if s.Snapshot {
		q.Set(QuerySnapshot, "true")
	}
	if s.Preset != "" {
		p := strings.TrimPrefix(s.Preset, presetPrefix)
		if strings.HasPrefix(p, presetPrefix) {
			p = s.Preset // "preset:preset:x" would decode as "preset:x"
		}
		q.Set(QueryPreset, p)
	}
	if s.Filter.EventTypes != nil {
		q.Set(QueryTypes, strings.Join(s.Filter.EventTypes, ","))
	}
	if s.Filter.Actors != nil {
		q.Set(QueryActors, strings.Join(s.Filter.Actors, ","))
	}
	if s.Filter.IncludeWorkerSessions {
		q.Set(QueryWorkers, "true")
	}
	return q
}
