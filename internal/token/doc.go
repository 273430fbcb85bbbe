// Package token owns the bearer token that guards a metis server reached
// from the network: generating it into <home>/token, reading a token
// file safely (a regular file, not readable by group or others, small,
// never blocking on a FIFO or a device), recording the addresses the
// server on a home serves (<home>/addresses.json), and finding the token
// a client command should send (--token-file, $METIS_TOKEN, or
// <home>/token to that home's own server only) and refusing to send any
// over plain http to a host that is not loopback.
//
// The token is a secret: nothing in this package logs it or puts it in
// an error message.
//
// token is a leaf: it imports the standard library only.
package token
