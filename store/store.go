// Package store is the Bun data layer of Switchboard over embedded SQLite (the default) or PostgreSQL.
//
// It knows nothing of HTTP or of the generated API types: handlers map between those and the models here.
// Every method's doc comment names the sentinel errors it returns; anything else is an internal error.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/oklog/ulid/v2"
	"github.com/uptrace/bun"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// DefaultURL is the database used when DATABASE_URL is not set: an embedded SQLite file.
const DefaultURL = "file:data/switchboard.db"

var (
	// ErrNotFound means the object does not exist (or not in the workspace asked about).
	ErrNotFound = errors.New("store: not found")
	// ErrConflict means the change would break a uniqueness rule.
	ErrConflict = errors.New("store: conflict")
)

// Dialect names the SQL dialect of the open database; migrations switch on it.
type Dialect string

// The supported dialects.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "pg"
)

// DB is an open Switchboard database.
type DB struct {
	// w runs writes that are not part of a transaction; on SQLite it is the single writer connection. While a
	// context carries a transaction of this database its statements are refused (see poolGuard).
	w *bun.DB
	// txw begins transactions on w's connections; it is a second handle on the same pool, so that the statements of
	// a transaction (which Bun runs through the handle that began it) are not taken for writes beside it.
	txw *bun.DB
	// r runs reads; on SQLite it is a pool of read-only connections, on PostgreSQL the same pool as w (through an
	// unguarded handle: a read beside a transaction waits for nothing there).
	r *bun.DB

	dialect Dialect
	url     string
	// dir is the directory of the SQLite file ("" on PostgreSQL): the data directory of the installation.
	dir        string
	sqlitePath string
	// sqliteDSN is the connection string of the store's SQLite connections; wal maps their WAL index (nil on
	// PostgreSQL) and is released after they are closed.
	sqliteDSN string
	wal       *walIndex
	// gate orders the transactions waiting for SQLite's writer (see writeGate); unused on PostgreSQL.
	gate writeGate

	keys keyWatch
	// notes sends the notifications of committed transactions (PostgreSQL).
	notes notifier
	// health counts the faults of the database that the store's operations met (see Health).
	health health

	Workspaces  *Workspaces
	APIKeys     *APIKeys
	Users       *Users
	Sessions    *Sessions
	Webhooks    *WebhookEndpoints
	Events      *Events
	Deliveries  *Deliveries
	Idempotency *IdempotencyKeys
	Links       *Links
	Clicks      *Clicks
	Instances   *Instances
	Messages    *Messages
	Chats       *Chats
	Labels      *Labels
	Contacts    *Contacts
	People      *People
	Routes      *Routes
	Groups      *Groups
	Media       *MediaFiles
	// LinkChanges announces link changes to redirect caches.
	LinkChanges *LinkChanges
	// EventTypes are the workspaces' custom event types; Sources and SourceRequests their ingest endpoints.
	EventTypes *EventTypeDefs
	Sources    *Sources
	// Bots are the instances' bots, their runs and the chats in takeover.
	Bots *Bots
	// ModelUpstreams are the workspaces' own OpenAI-compatible model servers.
	ModelUpstreams *ModelUpstreams
	SourceRequests *SourceRequests
	// Sandbox is the data of the sandbox messaging network.
	Sandbox *SandboxNetwork
	// SendQueue, InstanceLeases and InstanceCommands are the channel runtime's: the durable send queue, which process
	// holds each instance's session, and the calls carried to that process.
	SendQueue        *SendQueue
	InstanceLeases   *InstanceLeases
	InstanceCommands *InstanceCommands
}

// Open connects to the database named by rawURL ("" means DefaultURL): postgres:// or postgresql:// URLs open
// PostgreSQL through pgx, anything else (file:path, sqlite:path or a plain path) an SQLite file whose directory is
// created when missing. Open does not migrate; call Migrate.
func Open(ctx context.Context, rawURL string) (*DB, error) {
	if rawURL == "" {
		rawURL = DefaultURL
	}
	db := &DB{url: rawURL}
	var err error
	if strings.HasPrefix(rawURL, "postgres://") || strings.HasPrefix(rawURL, "postgresql://") {
		err = db.openPostgres(rawURL)
	} else {
		err = db.openSQLite(rawURL)
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := db.w.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: connect to %s database: %w", db.dialect, err)
	}
	if db.dialect == SQLite {
		// The writer's connection has opened the database: map its WAL index (if SQLite has not made one yet,
		// the watches map it on first use).
		db.wal.refresh()
		watch, err := newSQLiteKeyWatch(db.sqliteDSN, db.wal)
		if err != nil {
			_ = db.Close()
			return nil, err
		}
		db.keys = watch
	}
	db.Workspaces = &Workspaces{db: db}
	db.APIKeys = &APIKeys{workspaceScoped[APIKey]{db}}
	db.Users = &Users{db: db}
	db.Sessions = &Sessions{db: db}
	db.Webhooks = &WebhookEndpoints{workspaceScoped[WebhookEndpoint]{db}}
	db.Events = &Events{workspaceScoped[Event]{db}}
	db.Deliveries = &Deliveries{workspaceScoped[Delivery]{db}}
	db.Idempotency = &IdempotencyKeys{db: db}
	db.Links = &Links{workspaceScoped[Link]{db}}
	db.Clicks = &Clicks{db: db}
	db.Instances = &Instances{workspaceScoped[Instance]{db}}
	db.Messages = &Messages{workspaceScoped[Message]{db}}
	db.Chats = &Chats{workspaceScoped[Chat]{db}}
	db.Labels = &Labels{workspaceScoped[Label]{db}}
	db.Contacts = &Contacts{workspaceScoped[Contact]{db}}
	db.People = &People{workspaceScoped[Person]{db}}
	db.Routes = &Routes{workspaceScoped[Route]{db}}
	db.Groups = &Groups{workspaceScoped[ChatGroup]{db}}
	db.Media = &MediaFiles{workspaceScoped[Media]{db}}
	db.LinkChanges = &LinkChanges{db: db}
	db.EventTypes = &EventTypeDefs{db: db}
	db.Sources = &Sources{workspaceScoped[Source]{db}}
	db.Bots = &Bots{workspaceScoped[Bot]{db}}
	db.ModelUpstreams = &ModelUpstreams{workspaceScoped[ModelUpstream]{db}}
	db.SourceRequests = &SourceRequests{db: db}
	db.Sandbox = &SandboxNetwork{db: db, commits: NewGroupCommit(db, 0)}
	db.SendQueue = &SendQueue{db: db}
	db.InstanceLeases = &InstanceLeases{db: db}
	db.InstanceCommands = &InstanceCommands{db: db}
	return db, nil
}

func (db *DB) openPostgres(rawURL string) error {
	sqldb, err := openPostgresDB(rawURL)
	if err != nil {
		return fmt.Errorf("store: open postgres: %w", err)
	}
	sqldb.SetMaxOpenConns(20)
	sqldb.SetMaxIdleConns(20)
	sqldb.SetConnMaxIdleTime(5 * time.Minute)
	db.dialect = Postgres
	db.w = bun.NewDB(sqldb, newPGDialect()).WithQueryHook(&db.health).WithQueryHook(poolGuard{db})
	db.txw = bun.NewDB(sqldb, newPGDialect()).WithQueryHook(&db.health)
	db.r = db.txw
	db.keys = newPGKeyWatch(db.r)
	return nil
}

// sqlitePath extracts the file path from file:path, sqlite:path or path URLs (a query string is ignored: the
// pragmas Switchboard needs are always set).
func sqlitePath(rawURL string) (string, error) {
	p := rawURL
	for _, prefix := range []string{"sqlite://", "sqlite:", "file://", "file:"} {
		if strings.HasPrefix(p, prefix) {
			p = strings.TrimPrefix(p, prefix)
			break
		}
	}
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	p, err := url.PathUnescape(p)
	if err != nil || p == "" || p == ":memory:" {
		return "", fmt.Errorf("store: %q is not an SQLite file path", rawURL)
	}
	return p, nil
}

func (db *DB) openSQLite(rawURL string) error {
	path, err := sqlitePath(rawURL)
	if err != nil {
		return err
	}
	db.dir, db.sqlitePath = filepath.Dir(path), path
	// The database holds password hashes and sealed secrets: only its owner reads it. SQLite gives the WAL and
	// shared-memory files the database file's mode, so the file is created 0600 before SQLite opens it, and files
	// left readable by an older version are tightened. An existing database file is never opened here: closing a
	// descriptor of it would drop the locks SQLite connections of this process may hold on it (see walIndexHint).
	if err := os.MkdirAll(db.dir, 0o700); err != nil {
		return fmt.Errorf("store: create data directory: %w", err)
	}
	db.wal = acquireWALIndex(path) // before any connection: see walIndex
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("store: create database file: %w", err)
		}
		if f != nil {
			_ = f.Close()
		}
	}
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(name, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("store: restrict %s: %w", name, err)
		}
	}
	// WAL lets readers run beside the one writer; busy_timeout waits out writers in other processes (the CLI);
	// _txlock=immediate takes the write lock at BEGIN so transactions never fail half-way on an upgrade.
	// temp_store=memory keeps statement journals in memory: a group commit runs each call in a savepoint, whose
	// journal otherwise spills to a temporary file past 64 KiB — measured on the messaging send path, writing it
	// was 7% of all CPU, in write system calls.
	base := "file:" + path + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(NORMAL)&_pragma=temp_store(memory)&_txlock=immediate"
	// The writer gets a 32 MiB page cache (SQLite's default is 2 MiB): click batches update rollup rows of many
	// links, and with the default the writer reads pages back from disk once there are many links.
	wdb, err := openSQLiteDB(base + "&_pragma=cache_size(-32768)")
	if err != nil {
		return fmt.Errorf("store: open sqlite: %w", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	rdb, err := openSQLiteDB(base + "&_pragma=query_only(1)")
	if err != nil {
		_ = wdb.Close()
		return fmt.Errorf("store: open sqlite: %w", err)
	}
	rdb.SetMaxOpenConns(8)
	rdb.SetMaxIdleConns(8)
	rdb.SetConnMaxLifetime(0)
	db.dialect = SQLite
	db.sqliteDSN = base
	db.w = bun.NewDB(wdb, newSQLiteDialect()).WithQueryHook(&db.health).WithQueryHook(poolGuard{db})
	db.txw = bun.NewDB(wdb, newSQLiteDialect()).WithQueryHook(&db.health)
	db.r = bun.NewDB(rdb, newSQLiteDialect()).WithQueryHook(&db.health)
	return nil
}

// Dialect reports which database is open.
func (db *DB) Dialect() Dialect { return db.dialect }

// Path is the SQLite database file, or "" on PostgreSQL.
func (db *DB) Path() string { return db.sqlitePath }

// DataDir is the directory of the SQLite database file, or "" on PostgreSQL.
func (db *DB) DataDir() string { return db.dir }

// Ping checks that the database answers (readiness).
func (db *DB) Ping(ctx context.Context) error {
	if err := db.w.PingContext(ctx); err != nil {
		return err
	}
	var one int
	return db.r.NewSelect().ColumnExpr("1").Scan(ctx, &one)
}

// RunInTx runs fn in a write transaction: the way areas make a change and Emit its event atomically. Everything fn
// writes goes through tx: a write through the store's pool with fn's context is refused (see poolGuard), and so is
// a transaction inside it. With a bound on ctx (WithTxTimeout) the transaction, its wait for the writer included,
// ends within it; past it the transaction is rolled back and RunInTx returns ErrTxTimeout.
func (db *DB) RunInTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	tctx, cancel, err := db.txContext(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if db.dialect == SQLite {
		if err := db.gate.lock(tctx); err != nil {
			return overBound(tctx, ctx, err)
		}
		defer db.gate.unlock()
	}
	if err := db.txw.RunInTx(tctx, nil, fn); err != nil {
		return overBound(tctx, ctx, err)
	}
	db.committed(tctx)
	return nil
}

// RunInRepeatableTx runs fn in a write transaction whose loss in a crash of the database server only makes work be
// done again: a queue's claims, releases and recorded outcomes, which at-least-once delivery already allows to
// repeat. On PostgreSQL it commits asynchronously (synchronous_commit off for this transaction only): the commit
// returns before its WAL record is flushed, so a dispatcher does not wait a disk flush per batch. Everyone sees
// the change at once and it is atomic as any other; a server crash within about three wal_writer_delay (600 ms by
// default) may forget it, which leaves a claim unleased (claimed again, sent again) or an outcome unrecorded (sent
// again once its lease runs out). The transactions that accept work — queuing a delivery, an event, a message —
// never use it. On SQLite it is RunInTx: WAL commits there do not wait for the disk anyway (synchronous=NORMAL).
//
// Its statements must find their rows by key (a batch of IDs): the transaction also keeps the planner from scanning
// whole tables (see keyedWrites).
func (db *DB) RunInRepeatableTx(ctx context.Context, fn func(ctx context.Context, tx bun.IDB) error) error {
	return db.runInRepeatableTx(ctx, keyedWrites, fn)
}

// The settings of a repeatable transaction on PostgreSQL, sent with its BEGIN. A queue's table grows and
// shrinks faster than autovacuum's statistics follow, and planned with the statistics of an empty queue the
// statements of a busy one read the whole backlog every time; measured at 10 000 pending deliveries:
// keyedWrites (recording a batch of outcomes by ID) keeps the planner on the indexes: a bulk UPDATE … FROM
// (VALUES …) otherwise hash-joins a sequential scan of every delivery. (The webhook claim, whose ORDER BY … LIMIT
// … FOR UPDATE SKIP LOCKED must walk the queue's index in order and stop at the limit, 1.5 ms a claim instead of
// 12 ms, is a function with those settings of its own: see its migration.)
const (
	asyncCommit = "SELECT set_config('synchronous_commit', 'off', true)"
	keyedWrites = "SELECT set_config('synchronous_commit', 'off', true), set_config('enable_seqscan', 'off', true)"
)

// runInRepeatableTx is RunInRepeatableTx with the settings given. On PostgreSQL the transaction is pipelined (see
// pipelinedTx): its writes are sent with the next read or with COMMIT.
func (db *DB) runInRepeatableTx(ctx context.Context, settings string, fn func(ctx context.Context, tx bun.IDB) error) error {
	if db.dialect == Postgres {
		return db.runPipelined(ctx, settings, fn)
	}
	return db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error { return fn(ctx, tx) })
}

// repeatable runs one statement as RunInRepeatableTx would, with the settings given: in such a transaction on
// PostgreSQL, straight on the writer on SQLite (where a transaction around one statement would only add round
// trips).
func (db *DB) repeatable(ctx context.Context, settings string, fn func(idb bun.IDB) error) error {
	if db.dialect != Postgres {
		return fn(db.w)
	}
	return db.runPipelined(ctx, settings, func(_ context.Context, idb bun.IDB) error { return fn(idb) })
}

// Reader is the handle for reads outside a transaction: on SQLite the pool of read-only connections, which never
// waits for the single writer.
func (db *DB) Reader() bun.IDB { return db.r }

// Bun exposes the writer handle for tests and tools that need raw SQL.
func (db *DB) Bun() *bun.DB { return db.w }

// AddQueryHook adds a hook to every handle of the database — its writes, its transactions and its reads — for
// tests that watch statements or fail one.
func (db *DB) AddQueryHook(h bun.QueryHook) {
	db.w.AddQueryHook(h)
	db.txw.AddQueryHook(h)
	if db.r != db.txw {
		db.r.AddQueryHook(h)
	}
}

// Close releases every connection.
func (db *DB) Close() error {
	var errs []error
	flushed, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	db.notes.flush(flushed)
	cancel()
	if db.keys != nil {
		errs = append(errs, db.keys.close())
	}
	if db.r != nil && db.r.DB != db.w.DB {
		errs = append(errs, db.r.Close())
	}
	if db.w != nil {
		errs = append(errs, db.w.Close())
	}
	// Last: until every connection above is closed, SQLite holds locks on the WAL index (see walIndexHint).
	db.wal.release()
	db.wal = nil
	return errors.Join(errs...)
}

// lockFile takes an exclusive flock on path, polling until ctx ends, and returns the function that releases it.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: open migration lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("store: lock migrations: %w", err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("store: wait for another process to finish migrating: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// NewID returns a new opaque, time-sortable ID: prefix, "_", and a ULID (for example "ws_01JDA9K3M2Q7B8C9D0E1F2G3H4").
func NewID(prefix string) string {
	return prefix + "_" + ulid.Make().String()
}

// now is the store's clock: UTC with the microsecond precision both databases keep.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// mapErr turns "no rows" into ErrNotFound and unique violations into ErrConflict.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return ErrNotFound
	case isUniqueViolation(err):
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	return err
}

// Constraint violations, as the drivers report them: PostgreSQL by SQLSTATE, SQLite by extended result code (modernc
// turns extended codes on for every connection).
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
)

// isUniqueViolation reports whether err is a unique or primary key violation.
func isUniqueViolation(err error) bool {
	return hasViolation(err, pgUniqueViolation, sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

// isForeignKeyViolation reports whether err is a foreign key violation: a row referenced what does not exist.
func isForeignKeyViolation(err error) bool {
	return hasViolation(err, pgForeignKeyViolation, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY)
}

func hasViolation(err error, pgCode string, sqliteCodes ...int) bool {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgErr.Code == pgCode
	}
	if sqliteErr, ok := errors.AsType[*sqlite.Error](err); ok {
		return slices.Contains(sqliteCodes, sqliteErr.Code())
	}
	return false
}

// insert inserts model (a row or a slice of rows) with one statement, whose foreign keys check that what it
// references exists (no read first, no transaction of its own). Returns ErrNotFound if a referenced row does not
// exist (the workspace, the user, …) and ErrConflict if the row breaks a uniqueness rule.
func insert(ctx context.Context, db bun.IDB, model any) error {
	_, err := db.NewInsert().Model(model).Exec(ctx)
	if isForeignKeyViolation(err) {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return mapErr(err)
}

// keyWatch tells whether API keys may have changed in the database since a previous call, including changes
// made by other processes (the CLI, other replicas). It makes the key cache safe without a lookup per request.
type keyWatch interface {
	version(ctx context.Context) (uint64, error)
	// changed records that this process just committed an access change, so its own next request sees it without
	// waiting for a notification.
	changed()
	// watch follows the changes of other processes until ctx ends, where they are announced rather than read.
	watch(ctx context.Context)
	close() error
}

// sqliteKeyWatch reads PRAGMA data_version on a connection of its own: SQLite changes the value whenever another
// connection (of this or another process) commits. Only when it changed does the watch read the access_version
// row, so unrelated writes do not look like key changes.
//
// Those two reads cost a read transaction each time, and version is on the path of every API request. So the watch
// first compares the header of the WAL index (the -shm file every WAL connection maps; see walIndexHint): while it
// is byte-for-byte unchanged no connection has committed, and the last answer still holds.
type sqliteKeyWatch struct {
	db *sql.DB
	// hint is the store's WAL index (while it is not mapped, every call checks the database).
	hint *walIndex
	// state is the last answer and the WAL-index header it was read under (nil before the first check).
	state atomic.Pointer[keyWatchState]

	mu     sync.Mutex // serialises checks; guards everything below
	conn   *sql.Conn
	data   *sql.Stmt // PRAGMA data_version
	access *sql.Stmt // the access_version row
	seen   bool
	// lastData is data_version at the last read of access_version, lastAccess what that read found.
	lastData, lastAccess uint64
}

type keyWatchState struct {
	header  walIndexHeader
	version uint64
}

// newSQLiteKeyWatch watches the database of dsn; hint is the store's WAL index, which outlives the watch.
func newSQLiteKeyWatch(dsn string, hint *walIndex) (*sqliteKeyWatch, error) {
	db, err := openSQLiteDB(dsn + "&_pragma=query_only(1)")
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite: %w", err)
	}
	db.SetMaxOpenConns(1)
	return &sqliteKeyWatch{db: db, hint: hint}, nil
}

func (w *sqliteKeyWatch) version(ctx context.Context) (uint64, error) {
	if st := w.state.Load(); st != nil && st.header.valid() && w.hint.header() == st.header {
		return st.version, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn == nil {
		if err := w.connect(ctx); err != nil {
			return 0, err
		}
	}
	if !w.hint.header().valid() {
		w.hint.refresh() // SQLite makes the -shm file on a connection's first read
	}
	// Read the header before the check: a commit in between changes it again, so the next call checks again.
	header := w.hint.header()
	v, err := w.check()
	if err != nil {
		return 0, err
	}
	w.state.Store(&keyWatchState{header: header, version: v})
	return v, nil
}

// check reads the version with statements prepared once, under a context that cannot be cancelled (they read
// shared memory and a one-row table and never wait on a lock), which spares the driver a parse and a
// cancellation watcher per call.
func (w *sqliteKeyWatch) check() (uint64, error) {
	bg := context.Background()
	var data, access uint64
	err := w.data.QueryRowContext(bg).Scan(&data)
	if err == nil && w.seen && data == w.lastData {
		return w.lastAccess, nil
	}
	if err == nil {
		err = w.access.QueryRowContext(bg).Scan(&access)
	}
	if err != nil {
		w.reset()
		return 0, err
	}
	w.seen, w.lastData, w.lastAccess = true, data, access
	return access, nil
}

func (w *sqliteKeyWatch) connect(ctx context.Context) error {
	c, err := w.db.Conn(ctx)
	if err != nil {
		return err
	}
	w.conn = c
	if w.data, err = c.PrepareContext(ctx, "PRAGMA data_version"); err == nil {
		w.access, err = c.PrepareContext(ctx, "SELECT version FROM access_version WHERE id = 1")
	}
	if err != nil {
		w.reset()
	}
	return err
}

// reset drops the connection after an error; the next call reconnects. The mapping stays: it is the store's.
func (w *sqliteKeyWatch) reset() {
	w.state.Store(nil)
	for _, st := range []*sql.Stmt{w.data, w.access} {
		if st != nil {
			_ = st.Close()
		}
	}
	if w.conn != nil {
		_ = w.conn.Close()
	}
	w.conn, w.data, w.access, w.seen = nil, nil, nil, false
}

// changed needs nothing on SQLite: the commit rewrote the WAL-index header.
func (w *sqliteKeyWatch) changed() {}

// watch needs nothing on SQLite: every commit, by any process, changes PRAGMA data_version.
func (w *sqliteKeyWatch) watch(context.Context) {}

// close runs when no request is served any more; the store releases the mapping after its connections.
func (w *sqliteKeyWatch) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reset()
	return w.db.Close()
}

// jsonText encodes v for a JSON column (TEXT on SQLite, JSONB on PostgreSQL).
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("store: encode JSON column: %v", err)) // only called with plain slices and maps
	}
	return string(b)
}

// expectOneRow turns an Exec result that touched no row into ErrNotFound.
func expectOneRow(res sql.Result, err error) error {
	if err != nil {
		return mapErr(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}
