package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Unavailable reports whether err means the database cannot be reached or used right now (a connection refused,
// reset or timed out, a server shutting down, a closed pool, SQLite busy past its timeout), as opposed to a
// statement the database refused. Callers answer such errors with 503 and Retry-After: trying again later helps.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var (
		connect *pgconn.ConnectError
		netErr  net.Error
		opErr   *net.OpError
		pgErr   *pgconn.PgError
		sqlErr  *sqlite.Error
	)
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.As(err, &connect), errors.As(err, &opErr), errors.As(err, &netErr):
		return true
	case pgconn.Timeout(err), pgconn.SafeToRetry(err):
		return true
	case errors.As(err, &pgErr):
		// Class 08: connection exception; 57P01–57P03: the server is shutting down or starting; 53300: too many
		// connections; 3D000: the database does not exist (dropped or not yet created).
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" ||
			pgErr.Code == "57P03" || pgErr.Code == "53300" || pgErr.Code == "3D000"
	case errors.As(err, &sqlErr):
		code := sqlErr.Code() & 0xff
		return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED || code == sqlite3.SQLITE_IOERR ||
			code == sqlite3.SQLITE_CANTOPEN || code == sqlite3.SQLITE_FULL
	}
	msg := err.Error()
	return strings.Contains(msg, "sql: database is closed") || strings.Contains(msg, "conn closed") ||
		strings.Contains(msg, "failed to connect")
}
