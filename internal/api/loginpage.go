package api

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
)

// loginScript posts the token as JSON and goes to the dashboard ("/")
// once the cookie is set.
const loginScript = `document.getElementById("f").addEventListener("submit", async (e) => {
  e.preventDefault();
  const msg = document.getElementById("msg");
  msg.textContent = "";
  try {
    const r = await fetch("/login", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({token: document.getElementById("t").value.trim()})});
    if (r.ok) { location.replace("/"); return; }
    const b = await r.json().catch(() => null);
    msg.textContent = (b && b.error && b.error.message) || ("refused: " + r.status);
  } catch (err) {
    msg.textContent = String(err);
  }
});`

// loginPage is the page GET /login serves: a browser cannot send a
// header on a page load, so it logs in here once and keeps the cookie.
var loginPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>metis: log in</title>
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}input,button{font:inherit;padding:.4rem}input{width:100%;box-sizing:border-box}#msg{color:#b00}</style>
</head><body>
<h1>metis</h1>
<p>This server needs its bearer token. It is in the server's token file (<code>&lt;home&gt;/token</code> unless <code>--token-file</code> names another).</p>
<form id="f"><p><input id="t" type="password" autocomplete="current-password" placeholder="token" required autofocus></p>
<p><button type="submit">Log in</button></p></form>
<p id="msg" role="alert"></p>
<script>` + loginScript + `</script>
</body></html>
`

// loginCSP allows the page's own inline script and style (by hash and
// inline style), requests to this server only, and no framing.
var loginCSP = func() string {
	sum := sha256.Sum256([]byte(loginScript))
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'",
		"style-src 'unsafe-inline'",
		"connect-src 'self'",
		"form-action 'self'",
		"frame-ancestors 'none'",
		"base-uri 'none'",
	}, "; ")
}()

func serveLoginPage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", loginCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(loginPage))
	}
}
