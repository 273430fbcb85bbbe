package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Defaults of Options.
const (
	// DefaultMaxFileBytes: a file larger than this is left out of a
	// snapshot (and so never restored nor deleted by a restore).
	DefaultMaxFileBytes = 2 << 20
	// DefaultMaxNewFiles caps the files one snapshot adds that the
	// previous snapshot of the workspace did not hold; past it, the
	// top-level directories with the most new files are left out,
	// largest first, until the rest fits.
	DefaultMaxNewFiles = 50_000
	// DefaultTimeout bounds one git command.
	DefaultTimeout = 2 * time.Minute
)

// Errors. Every error of the package that callers branch on wraps one
// of these.
var (
	// ErrUnavailable: checkpoints cannot be taken here (git is missing
	// or too old, or they are turned off).
	ErrUnavailable = errors.New("checkpoints unavailable")
	// ErrNotFound: no checkpoint of that id in the workspace.
	ErrNotFound = errors.New("checkpoint not found")
	// ErrNothingToRestore: the workspace's files already are as the
	// checkpoint holds them.
	ErrNothingToRestore = errors.New("nothing to restore")
)

// Options configure a Store.
type Options struct {
	// Dir holds one git directory per workspace (<home>/checkpoints).
	Dir string
	// Git is the git binary ("": "git" on PATH).
	Git string
	// MaxFileBytes: larger files are left out (0: DefaultMaxFileBytes).
	MaxFileBytes int64
	// MaxNewFiles caps the new files of one snapshot (0:
	// DefaultMaxNewFiles).
	MaxNewFiles int
	// Timeout bounds each git command (0: DefaultTimeout).
	Timeout time.Duration
	Logger  *slog.Logger
}

// Store takes, compares and restores the checkpoints of every
// workspace. It is safe for concurrent use.
type Store struct {
	opts    Options
	git     string // the binary's path
	version string

	mu    sync.Mutex
	locks map[string]*sync.Mutex // by git directory
}

// Open finds git and returns a store writing under opts.Dir. Without a
// usable git it fails with an error wrapping ErrUnavailable that says
// what to install.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("checkpoint: empty directory")
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	if opts.MaxNewFiles <= 0 {
		opts.MaxNewFiles = DefaultMaxNewFiles
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	bin, version, err := findGit(ctx, opts.Git)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return &Store{opts: opts, git: bin, version: version, locks: map[string]*sync.Mutex{}}, nil
}

// GitVersion is what the git binary in use reports ("git version
// 2.39.5").
func (s *Store) GitVersion() string { return s.version }

// MaxFileBytes is the size over which files are left out.
func (s *Store) MaxFileBytes() int64 { return s.opts.MaxFileBytes }

// Dir returns the git directory of a workspace (an absolute, clean
// path): <Dir>/<the first 16 bytes of the SHA-256 of the path, in hex>.
func (s *Store) Dir(workspace string) string {
	sum := sha256.Sum256([]byte(workspace))
	return filepath.Join(s.opts.Dir, hex.EncodeToString(sum[:16]))
}

// workspaceFile, in a git directory, names the workspace it snapshots.
const workspaceFile = "metis-workspace"

// repo is one workspace's git directory, locked by its holder.
type repo struct {
	s  *Store
	ws string
	g  *git
	// root confines the reads of the workspace's files.
	root   *os.Root
	unlock func()
}

// open locks the git directory of workspace, creating it if need be,
// and returns it; close releases it.
func (s *Store) open(ctx context.Context, workspace string) (*repo, error) {
	if !filepath.IsAbs(workspace) || filepath.Clean(workspace) != workspace {
		return nil, fmt.Errorf("checkpoint: workspace %q is not an absolute clean path", workspace)
	}
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: workspace: %w", err)
	}
	dir := s.Dir(workspace)
	unlock, err := s.lock(ctx, dir)
	if err != nil {
		root.Close()
		return nil, err
	}
	r := &repo{s: s, ws: workspace, root: root, unlock: unlock,
		g: &git{bin: s.git, dir: dir, work: workspace, timeout: s.opts.Timeout}}
	if err := r.init(ctx); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *repo) close() {
	r.root.Close()
	r.unlock()
}

// lock takes the lock of a git directory: the process's mutex, then the
// flock of <dir>.lock (beside the directory, so it exists before it).
func (s *Store) lock(ctx context.Context, dir string) (func(), error) {
	s.mu.Lock()
	mu := s.locks[dir]
	if mu == nil {
		mu = &sync.Mutex{}
		s.locks[dir] = mu
	}
	s.mu.Unlock()
	// A mutex cannot be waited for with a context; snapshots are short,
	// so a caller whose context ends meanwhile finds out after.
	mu.Lock()
	if err := ctx.Err(); err != nil {
		mu.Unlock()
		return nil, fmt.Errorf("checkpoint: lock: %w", context.Cause(ctx))
	}
	release, err := flock(dir + ".lock")
	if err != nil {
		mu.Unlock()
		return nil, fmt.Errorf("checkpoint: lock %s: %w", dir, err)
	}
	return func() { release(); mu.Unlock() }, nil
}

// init creates the git directory if it does not exist, checks that it
// belongs to this workspace, clears the locks a killed git left behind
// and writes the attributes that keep files' bytes as they are.
func (r *repo) init(ctx context.Context) error {
	dir := r.g.dir
	name, err := os.ReadFile(filepath.Join(dir, workspaceFile))
	switch {
	case err == nil:
		if string(name) != r.ws {
			return fmt.Errorf("checkpoint: %s belongs to workspace %q, not %q", dir, name, r.ws)
		}
	case errors.Is(err, os.ErrNotExist):
		if err := os.RemoveAll(dir); err != nil { // a creation cut short
			return fmt.Errorf("checkpoint: %w", err)
		}
		g := &git{bin: r.g.bin, dir: dir, timeout: r.g.timeout}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if _, err := g.run(ctx, nil, nil, "init", "--quiet", "--bare", "--template=", dir); err != nil {
			return fmt.Errorf("checkpoint: create %s: %w", dir, err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "info"), 0o700); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, workspaceFile), []byte(r.ws), 0o600); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	default:
		return fmt.Errorf("checkpoint: %w", err)
	}
	// We hold the directory's lock: a lock file of git's is left over
	// from a git that was killed (a crash of the server).
	for _, f := range []string{"index.lock", "packed-refs.lock", "HEAD.lock", "config.lock", "shallow.lock"} {
		_ = os.Remove(filepath.Join(dir, f))
	}
	_ = filepath.WalkDir(filepath.Join(dir, "refs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
			_ = os.Remove(p)
		}
		return nil
	})
	return writeIfChanged(filepath.Join(dir, "info", "attributes"), []byte(gitAttributes))
}

// writeIfChanged writes data to path unless it already holds it.
func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// idPattern is what checkpoint ids look like: "ckpt_" and a ULID.
var idPattern = regexp.MustCompile(`^ckpt_[0-9A-HJKMNP-TV-Z]{26}$`)

// ValidID reports whether id can be a checkpoint id (a client's input
// is checked before it names a ref).
func ValidID(id string) bool { return idPattern.MatchString(id) }

// refOf is the ref holding checkpoint id.
func refOf(id string) string { return "refs/metis/" + id }

// resolve returns the commit of checkpoint id, or ErrNotFound.
func (r *repo) resolve(ctx context.Context, id string) (string, error) {
	if !ValidID(id) {
		return "", fmt.Errorf("%w: %q is not a checkpoint id", ErrNotFound, id)
	}
	out, err := r.g.run(ctx, nil, nil, "rev-parse", "--verify", "--quiet", refOf(id)+"^{commit}")
	if err != nil {
		if isExit(err, 1) {
			return "", fmt.Errorf("%w: %s in workspace %s", ErrNotFound, id, r.ws)
		}
		return "", fmt.Errorf("checkpoint: resolve %s: %w", id, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Exists reports whether checkpoint id is held for workspace.
func (s *Store) Exists(ctx context.Context, workspace, id string) (bool, error) {
	r, err := s.open(ctx, workspace)
	if err != nil {
		return false, err
	}
	defer r.close()
	if _, err := r.resolve(ctx, id); err != nil {
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
