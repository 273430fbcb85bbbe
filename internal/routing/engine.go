package routing

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/metis-agent/metis/internal/safefile"
)

// MaxPolicyBytes is the size limit of routing.yaml.
const MaxPolicyBytes = safefile.DefaultLimit

// readPolicyFile reads routing.yaml: a regular file of at most
// MaxPolicyBytes, opened without blocking (a FIFO or a device in its
// place must not hang the poller, and with it the server's shutdown). A
// missing file reads as empty.
func readPolicyFile(path string) ([]byte, error) {
	b, err := safefile.ReadRegular(path, MaxPolicyBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// Change reports a reload attempt: a new policy version, or the error
// that kept the previous policy.
type Change struct {
	Version string
	Path    string
	Err     error
}

// Engine routes by the policy in a file. It starts with the file's
// policy (or, if the file is absent, an empty one that routes to the
// session's model), and Watch reloads it when the file changes. A file
// that does not parse or validate keeps the previous policy. The version
// changes exactly when the parsed policy does: rewriting the file with
// the same rules (or only new comments) keeps it.
type Engine struct {
	path     string
	log      *slog.Logger
	onChange func(Change)

	mu      sync.RWMutex
	policy  *Policy
	version string
	sum     [32]byte // of the bytes last read, to skip re-parsing
	seen    bool
}

// NewEngine loads the policy at path. A missing file is an empty policy;
// an invalid one is an error (the server refuses to start on it rather
// than route by a policy it cannot read). onChange (may be nil) is called
// after each reload that changed the version or failed.
func NewEngine(path string, log *slog.Logger, onChange func(Change)) (*Engine, error) {
	if log == nil {
		log = slog.Default()
	}
	e := &Engine{path: path, log: log, onChange: onChange, policy: &Policy{}, version: versionAt(time.Now())}
	if _, err := e.reload(); err != nil {
		return nil, err
	}
	return e, nil
}

// Decide implements Router.
func (e *Engine) Decide(in Input) Decision {
	e.mu.RLock()
	p, v := e.policy, e.version
	e.mu.RUnlock()
	if in.Override != "" {
		return Decision{Model: in.Override, Reason: ReasonSlashCommand, PolicyVersion: v}
	}
	m, reason := p.decide(in)
	return Decision{Model: m, Reason: reason, PolicyVersion: v}
}

// Version implements Router.
func (e *Engine) Version() string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.version
}

// Reload reads the file now. It reports whether the version changed; on
// error the previous policy stays.
func (e *Engine) Reload() (bool, error) {
	changed, err := e.reload()
	if err != nil {
		e.log.Warn("routing policy not reloaded; keeping the previous one", "path", e.path, "err", err)
	} else if changed {
		e.log.Info("routing policy reloaded", "path", e.path, "version", e.Version())
	}
	if e.onChange != nil && (changed || err != nil) {
		e.onChange(Change{Version: e.Version(), Path: e.path, Err: err})
	}
	return changed, err
}

func (e *Engine) reload() (bool, error) {
	b, err := readPolicyFile(e.path)
	if err != nil {
		return false, fmt.Errorf("read routing policy: %w", err)
	}
	sum := sha256.Sum256(b)
	e.mu.RLock()
	same := e.seen && sum == e.sum
	e.mu.RUnlock()
	if same {
		return false, nil
	}
	p, err := ParsePolicy(b)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sum, e.seen = sum, true // the same bad contents are reported once
	if err != nil {
		return false, fmt.Errorf("%s: %w", e.path, err)
	}
	if reflect.DeepEqual(p, e.policy) {
		return false, nil
	}
	e.policy = p
	if v := versionAt(time.Now()); v > e.version {
		e.version = v
	} else {
		// Two changes within a millisecond: still a new version.
		t, _ := time.Parse("2006-01-02T15:04:05.000Z07:00", e.version)
		e.version = versionAt(t.Add(time.Millisecond))
	}
	return true, nil
}

// Watch polls the file every interval until ctx is done and reloads it
// once its contents have changed and then stayed the same for one more
// poll, so a file caught half-written (an editor truncating before it
// writes) is never applied. A file that cannot be read (not a regular
// file, too large) is reported through Reload once each time the error
// changes, and the previous policy stays. An interval <= 0 disables
// polling.
func (e *Engine) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last [32]byte
	e.mu.RLock()
	last = e.sum
	e.mu.RUnlock()
	lastErr := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b, err := readPolicyFile(e.path)
			if err != nil {
				if err.Error() != lastErr {
					lastErr = err.Error()
					last = [32]byte{} // a good file afterwards is a change
					_, _ = e.Reload()
				}
				continue
			}
			lastErr = ""
			sum := sha256.Sum256(b)
			if sum != last {
				last = sum // changed: wait one poll for it to settle
				continue
			}
			_, _ = e.Reload()
		}
	}
}
