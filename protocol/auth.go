package protocol

// CodeTooManyRequests answers (429, with a Retry-After header in
// seconds) an attempt to present the bearer token, by POST /login or an
// Authorization header, from a remote address that has made too many
// attempts with a wrong token lately. Wait, then try again.
const CodeTooManyRequests = "too_many_requests"
