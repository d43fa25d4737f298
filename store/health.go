package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// FaultWindow is how long a failed operation of the store keeps it unhealthy: a load balancer that asks /readyz
// within that time is told to send its traffic elsewhere.
const FaultWindow = 10 * time.Second

// health counts the store's operations that failed because of the database rather than the statement: a connection
// lost, SQLite busy past its timeout, an I/O or locking-protocol error, a corrupt page. A ping answers whether the
// database is reachable now; these answer whether the work the server does with it succeeds, which is what a
// readiness check must tell (a server whose every third write fails with a disk I/O error still answers pings).
type health struct {
	faults atomic.Int64
	// last is the time (Unix nanoseconds) and kind of the latest fault.
	lastAt   atomic.Int64
	lastKind atomic.Pointer[string]
}

// BeforeQuery implements bun.QueryHook.
func (h *health) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

// AfterQuery implements bun.QueryHook: it records a fault of the database.
func (h *health) AfterQuery(_ context.Context, event *bun.QueryEvent) {
	if event.Err != nil {
		h.record(event.Err)
	}
}

// record counts err when it is a fault of the database (see faultKind).
func (h *health) record(err error) {
	kind := faultKind(err)
	if kind == "" {
		return
	}
	h.faults.Add(1)
	h.lastKind.Store(&kind)
	h.lastAt.Store(time.Now().UnixNano())
}

// faultKind names the kind of database fault err is, or returns "" when err is not one: a statement the database
// refused (a constraint, a syntax error), no rows, or a context that ended (the caller's deadline or a client that
// left says nothing about the database).
func faultKind(err error) string {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ""
	}
	if sqlErr, ok := errors.AsType[*sqlite.Error](err); ok {
		switch sqlErr.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return "sqlite_busy"
		case sqlite3.SQLITE_IOERR:
			return "sqlite_io_error"
		case sqlite3.SQLITE_PROTOCOL:
			return "sqlite_locking_protocol"
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return "sqlite_corrupt"
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM:
			return "sqlite_storage"
		}
		return ""
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && !Unavailable(pgErr) {
		// Class 53 (insufficient resources: disk full, out of memory) and 58 (system error, I/O) are the server's
		// faults too, though retrying soon rarely helps.
		if c := pgErr.Code[:2]; c == "53" || c == "58" || c == "XX" {
			return "postgres_" + pgErr.Code
		}
		return ""
	}
	if Unavailable(err) {
		return "connection"
	}
	return ""
}

// Health reports whether the store's operations of the last FaultWindow succeeded: nil if none failed because of
// the database, otherwise an error naming how many faults there were in all and the kind of the latest (never a
// statement or a value).
func (db *DB) Health() error {
	at := db.health.lastAt.Load()
	if at == 0 || time.Since(time.Unix(0, at)) > FaultWindow {
		return nil
	}
	return fmt.Errorf("the database failed an operation %s ago (%s; %d since the server started)",
		time.Since(time.Unix(0, at)).Round(time.Millisecond), *db.health.lastKind.Load(), db.health.faults.Load())
}

// Faults counts the store's operations that failed because of the database since it was opened.
func (db *DB) Faults() int64 { return db.health.faults.Load() }
