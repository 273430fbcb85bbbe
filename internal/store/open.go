package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ErrClosed is returned by every method of a closed Store, and passed to
// the done callback of a submission made after Close.
var ErrClosed = errors.New("store: closed")

// Defaults of Options.
const (
	DefaultMaxBatch = 4096 // ops per write transaction
	DefaultQueueLen = 8192 // queued submissions
	busyTimeoutMS   = 10000
	readConns       = 4
)

// Options configure Open.
type Options struct {
	// Path is the database file. Its directory is created if missing.
	// Required; in-memory databases are not supported because the
	// writer and the readers use separate connections.
	Path string
	// Logger receives writer diagnostics; nil uses slog.Default().
	Logger *slog.Logger
	// MaxBatch bounds the ops grouped into one write transaction
	// (default DefaultMaxBatch). A single submission larger than
	// MaxBatch still gets a transaction of its own.
	MaxBatch int
	// QueueLen bounds the submissions waiting for the writer (default
	// DefaultQueueLen); Submit blocks while the queue is full.
	QueueLen int
}

// Store is the trace store. It is safe for concurrent use. Open it with
// Open and Close it when done.
type Store struct {
	log        *slog.Logger
	maxBatch   int
	pruneChunk int

	wdb   *sql.DB // the one write connection, owned by the writer goroutine
	rdb   *sql.DB // read-only pool
	stmts writerStmts

	// mu guards sends on queue against Close closing it: Submit holds it
	// shared while sending, Close exclusively while closing.
	mu      sync.RWMutex
	queue   chan submission
	closed  atomic.Bool
	stopped chan struct{} // closed when the writer goroutine returns

	seqBuf []seqAssign // scratch of the writer goroutine
	// touchBuf is the writer goroutine's scratch of the newest activity
	// per session in the transaction being built (see txn.touched).
	touchBuf map[string]int64

	stats stats
	fault faultHook // test seam: see SetFault

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the database at opts.Path, brings its
// schema up to date and starts the writer goroutine. ctx bounds the
// opening only.
//
// The database runs in WAL mode with synchronous=NORMAL: a committed
// transaction survives a crash of the process, though not necessarily a
// power loss of the machine.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Path == "" {
		return nil, errors.New("store: open: empty path")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.QueueLen <= 0 {
		opts.QueueLen = DefaultQueueLen
	}
	path, err := filepath.Abs(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", opts.Path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := privateFiles(path); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}

	wdb, err := openDB(ctx, path, writerParams, 1)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: writer: %w", path, err)
	}
	if err := migrate(ctx, wdb); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := ensureArchived(ctx, wdb); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if _, err := wdb.ExecContext(ctx, retentionIndexes); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("store: open %s: retention indexes: %w", path, err)
	}
	if err := incrementalVacuum(ctx, wdb, opts.Logger); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	stmts, err := prepareWriter(ctx, wdb)
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	rdb, err := openDB(ctx, path, readerParams, readConns)
	if err != nil {
		stmts.close()
		wdb.Close()
		return nil, fmt.Errorf("store: open %s: readers: %w", path, err)
	}

	s := &Store{
		log:        opts.Logger,
		maxBatch:   opts.MaxBatch,
		pruneChunk: defaultPruneChunk,
		wdb:        wdb,
		rdb:        rdb,
		stmts:      stmts,
		queue:      make(chan submission, opts.QueueLen),
		stopped:    make(chan struct{}),
	}
	go s.run()
	return s, nil
}

// privateFiles creates the database file with mode 0600 when it does not
// exist yet, so that SQLite, which gives its WAL and shared-memory files
// the database file's mode, never makes any of them readable by others
// whatever the umask; and it makes an existing database and its WAL and
// shared-memory files 0600 if group or others had access to them (a
// database created by an older version under the usual umask).
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file (%s)", p, st.Mode().Type())
		}
		if st.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// Connection parameters (modernc.org/sqlite DSN keys). The writer takes
// its write lock at BEGIN (immediate) so a transaction never has to
// upgrade; readers are query_only.
var (
	writerParams = []string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeoutMS),
		// Before any table exists (a new database) this makes freed pages
		// returnable by PRAGMA incremental_vacuum; an older database is
		// converted once by incrementalVacuum.
		"_pragma=auto_vacuum(INCREMENTAL)",
		"_pragma=journal_mode(WAL)",
		"_pragma=synchronous(NORMAL)",
		"_pragma=foreign_keys(OFF)",
		"_pragma=temp_store(MEMORY)",
		"_pragma=cache_size(-16000)",
		"_pragma=journal_size_limit(67108864)",
		"_pragma=wal_autocheckpoint(4000)",
		"_txlock=immediate",
	}
	readerParams = []string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeoutMS),
		"_pragma=cache_size(-2000)",
		"_pragma=temp_store(MEMORY)",
		"_query_only=1",
	}
)

// autoVacuumIncremental is PRAGMA auto_vacuum's value for INCREMENTAL.
const autoVacuumIncremental = 2

// incrementalVacuum makes sure the database runs with auto_vacuum =
// INCREMENTAL, so that Prune can give freed pages back to the file
// system. A new database has it from its first connection
// (writerParams); one created before this setting existed is converted
// once, by a full VACUUM, which rewrites the file and needs as much free
// disk space as the database holds.
func incrementalVacuum(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	var mode int
	if err := db.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&mode); err != nil {
		return fmt.Errorf("auto_vacuum: %w", err)
	}
	if mode == autoVacuumIncremental {
		return nil
	}
	log.Info("store: converting the database to incremental vacuum; this runs once and rewrites the file")
	if _, err := db.ExecContext(ctx, "PRAGMA auto_vacuum = INCREMENTAL"); err != nil {
		return fmt.Errorf("auto_vacuum: %w", err)
	}
	if _, err := db.ExecContext(ctx, "VACUUM"); err != nil {
		return fmt.Errorf("auto_vacuum: vacuum: %w", err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&mode); err != nil {
		return fmt.Errorf("auto_vacuum: %w", err)
	}
	if mode != autoVacuumIncremental {
		return fmt.Errorf("auto_vacuum: still %d after VACUUM", mode)
	}
	return nil
}

// openDB opens a pool of at most conns connections to path and checks
// that one can be established.
func openDB(ctx context.Context, path string, params []string, conns int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path, params))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// dsn builds a SQLite URI for path: "%", "?" and "#" in the path are
// percent-encoded so they cannot be taken for URI syntax.
func dsn(path string, params []string) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
	return "file:" + esc + "?" + strings.Join(params, "&")
}

// Close stops accepting submissions, waits for the writer to commit
// everything already submitted (calling their done callbacks), then
// checkpoints the WAL and closes the database. Calling it again returns
// the first call's result. It must not be called from a done callback.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed.Store(true)
		close(s.queue)
		s.mu.Unlock()
		<-s.stopped

		var errs []error
		// Fold the WAL into the database so the file is self-contained;
		// failure only leaves a WAL for the next Open to recover.
		if _, err := s.wdb.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			s.log.Warn("store: checkpoint on close failed", "err", err)
		}
		s.stmts.close()
		if err := s.rdb.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close readers: %w", err))
		}
		if err := s.wdb.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close writer: %w", err))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// readable reports ErrClosed once Close has begun.
func (s *Store) readable() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}
