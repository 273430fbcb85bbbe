// Package editor owns the editors attached to sessions: a client (the
// ACP agent, `metis acp`) declares what the editor it serves offers
// (reading and writing text files, its unsaved buffers included), and
// the file tools of the session's turns ask it, through this package,
// to read or write a file on the server's behalf (docs/editors.md).
//
// A Broker holds the attachments per session (the newest one that
// offers a capability serves it), hands each request to the
// attachment's queue, and waits for the answer with a timeout and the
// call's context. Every failure (no attachment, the attachment gone,
// a full queue, the timeout, an error answer) is an error the tool
// answers by using the disk instead: the editor is an optimisation of
// where the bytes come from and go, never the only path.
//
// It is core: it imports protocol and the standard library only, and
// knows nothing of HTTP (the api package serves the attachments) or of ACP.
package editor
