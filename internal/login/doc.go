// Package login owns what a browser's login to a server that requires
// its bearer token is made of, and the limit on attempts to log in:
//
//   - Sessions: each login (POST /login with the right token) gets a
//     session id of its own, 32 bytes from crypto/rand, which the browser
//     keeps in a cookie. The server keeps only the id's SHA-256, in memory
//     and in the trace store, with a tag of the token the login was made
//     with, so a session survives a restart. A session ends when it has
//     not been used for Idle (7 days), Max (30 days) after the login, at
//     logout, or when the server's token changes (every session made
//     with another token is dropped at start).
//   - Limiter: a token bucket per remote address (an IPv6 address
//     counts by its /64), for attempts to present the token: a few at
//     once, then one a second; a bounded table, so that many addresses
//     cannot grow it without limit.
//
// Nothing here logs or returns a session id or a token, except the id
// Create hands to the caller for the cookie.
//
// login is core: it imports the store (its Login rows) and the standard
// library only.
package login
