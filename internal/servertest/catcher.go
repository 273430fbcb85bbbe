package servertest

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
)

// theCert is the certificate ProcessCert hands out.
var theCert struct {
	once           sync.Once
	dir, cert, key string
	err            error
}

// ProcessCert returns a self-signed certificate (localhost, 127.0.0.1,
// ::1) and its key that are the same for the whole test process: the
// system certificate pool, which SSL_CERT_FILE feeds, is loaded once per
// process, so every server a client of the default transport should
// trust must serve this one, also when a test runs again (-count). Set
// SSL_CERT_FILE to the certificate before the process's first TLS
// handshake. The files live until RemoveProcessCert (call it from
// TestMain).
func ProcessCert(t testing.TB) (cert, key string) {
	t.Helper()
	theCert.once.Do(func() {
		theCert.dir, theCert.err = os.MkdirTemp("", "metis-test-cert-")
		if theCert.err == nil {
			theCert.cert, theCert.key = SelfSignedCert(t, theCert.dir)
		}
	})
	if theCert.err != nil {
		t.Fatal(theCert.err)
	}
	return theCert.cert, theCert.key
}

// RemoveProcessCert removes ProcessCert's files, if it made any.
func RemoveProcessCert() {
	if theCert.dir != "" {
		_ = os.RemoveAll(theCert.dir)
	}
}

// TokenCatcher is a server a user might be tricked into naming with
// --server or $METIS_SERVER: it speaks TLS with the given certificate,
// answers every request 401 (asking for a token, as a real server
// would), and records the Authorization header of each. A client must
// never send it the local home's token.
type TokenCatcher struct {
	URL string
	srv *httptest.Server

	mu   sync.Mutex
	auth []string
}

// NewTokenCatcher starts a TokenCatcher, stopped when the test ends.
func NewTokenCatcher(t testing.TB, certFile, keyFile string) *TokenCatcher {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	c := &TokenCatcher{}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.auth = append(c.auth, r.Header.Get("Authorization"))
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("WWW-Authenticate", `Bearer realm="metis"`)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"send your token"}}` + "\n"))
	}))
	c.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	c.srv.StartTLS()
	c.URL = c.srv.URL
	t.Cleanup(c.srv.Close)
	return c
}

// Seen returns the Authorization headers received, one per request (""
// for none).
func (c *TokenCatcher) Seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.auth)
}
