package api

import (
	"net/http"
	"strconv"
)

// turnBodyLimit bounds the body of POST /sessions/{id}/turns: the
// other bodies' limit for the text and the rest, plus the session
// manager's most images at their most bytes, in base64 (4 bytes for
// every 3).
func (a *API) turnBodyLimit() int64 {
	n, each := a.sessions.ImageLimits()
	return MaxBodyBytes + int64(n)*((each+2)/3*4+64)
}

// image is GET /sessions/{id}/images/{sha256}: the bytes of an image the
// session holds, with its media type, never sniffed by the browser, never
// run as a document, and cacheable for good (the name is the content's
// hash).
func (a *API) image(w http.ResponseWriter, r *http.Request) {
	im, err := a.sessions.Image(r.Context(), r.PathValue("id"), r.PathValue("sha256"))
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", im.MediaType)
	h.Set("Content-Length", strconv.Itoa(len(im.Data)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	h.Set("ETag", `"`+im.SHA256+`"`)
	if r.Header.Get("If-None-Match") == `"`+im.SHA256+`"` {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(im.Data)
	}
}
