package api

import "net/http"

// Decode reads a JSON object body into v exactly as the API's own
// handlers do (an empty body allowed only if emptyOK, nothing but JSON
// white space after the object). On a bad body it writes the API's
// error answer and reports false. The cluster's routing of a request
// to another node uses it, so that a forwarded request is refused as
// the API would refuse it.
func Decode(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) bool {
	return decode(w, r, v, emptyOK)
}

// WriteJSON answers with status and v as JSON, as the API's handlers
// do.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }
