package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
)

// Every timestamp the store reads comes back in UTC, whatever the process's time.Local, so that equal instants print
// and compare (==, map keys) alike. The connections do it, so it holds for every path that reads a time: Bun models,
// RETURNING scans, and raw database/sql scans and prepared statements (the click recorder's). This file is the one
// place; models need no hooks.

// openPostgresDB opens a pool of PostgreSQL connections that scan timestamptz in UTC (pgx returns time.Local otherwise).
func openPostgresDB(rawURL string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, err
	}
	// Bun writes every value into the SQL text itself, so nearly every statement's text is new (a timestamp, an ID).
	// pgx's default mode prepares each new text as a named statement first — a second round trip, a plan the server
	// keeps, and a DEALLOCATE when its cache of 512 overflows — for statements that never run twice. The simple
	// protocol sends the text once and is also what a PgBouncer in transaction mode needs. A URL that names
	// default_query_exec_mode keeps its own choice.
	if !strings.Contains(rawURL, "default_query_exec_mode") {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	}
	return stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(func(_ context.Context, conn *pgx.Conn) error {
		conn.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
		return nil
	})), nil
}

// openSQLiteDB opens a pool of SQLite connections that read TIMESTAMPTZ columns as times in UTC.
//
// modernc turns text into time.Time only for columns declared DATE, DATETIME, TIME or TIMESTAMP; the migrations
// declare TIMESTAMPTZ (one schema for both databases), so it returns the text Bun wrote ("2006-01-02
// 15:04:05.999999+00:00"). Bun would parse that into a zone of offset 0 that is not time.UTC, and database/sql
// cannot scan it into a time.Time at all. The connections therefore convert those columns as they read them.
func openSQLiteDB(dsn string) (*sql.DB, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(utcSQLiteConnector{c}), nil
}

// sqliteTimeFormat is how Bun writes times on SQLite (and how the click recorder's raw statements write them).
const sqliteTimeFormat = "2006-01-02 15:04:05.999999-07:00"

// sqliteTimeType is the declared type of every time column.
const sqliteTimeType = "TIMESTAMPTZ"

type utcSQLiteConnector struct{ driver.Connector }

// sqliteConn is what database/sql uses of a modernc connection; utcSQLiteConn passes all of it through.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// sqliteStmt is what database/sql uses of a modernc prepared statement.
type sqliteStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

func (c utcSQLiteConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := whole[sqliteConn](c.Connector.Connect(ctx))
	if err != nil {
		return nil, err
	}
	return &utcSQLiteConn{sqliteConn: conn}, nil
}

// utcSQLiteConn also keeps the statements run with arguments prepared, one each per text (see stmtCache).
type utcSQLiteConn struct {
	sqliteConn
	stmts stmtCache
}

func (c *utcSQLiteConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) > 0 {
		if st, release, err := c.stmts.take(ctx, c, query); err != nil || st != nil {
			if err != nil {
				return nil, err
			}
			rows, err := utcRows(st.QueryContext(ctx, args))
			if err != nil {
				release()
				return nil, err
			}
			return &releasingRows{Rows: rows, release: release}, nil
		}
	}
	return utcRows(c.sqliteConn.QueryContext(ctx, query, args))
}

func (c *utcSQLiteConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if len(args) > 0 {
		if st, release, err := c.stmts.take(ctx, c, query); err != nil || st != nil {
			if err != nil {
				return nil, err
			}
			defer release()
			return st.ExecContext(ctx, args)
		}
	}
	return c.sqliteConn.ExecContext(ctx, query, args)
}

func (c *utcSQLiteConn) Close() error {
	c.stmts.close()
	return c.sqliteConn.Close()
}

func (c *utcSQLiteConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := whole[sqliteStmt](c.sqliteConn.PrepareContext(ctx, query))
	if err != nil {
		return nil, err
	}
	return utcSQLiteStmt{st}, nil
}

type utcSQLiteStmt struct{ sqliteStmt }

// stmtCache holds a connection's statements prepared for the texts it ran with arguments. Bun writes every value
// into the SQL text, so its statements are new text each time and SQLite parses each one from scratch: measured on
// the messaging send path, parsing was a quarter of all CPU. The store's hot statements are therefore written with
// parameters (see execParams), and a text run with arguments is parsed once per connection and then only bound and
// stepped. Only texts with arguments are kept — the hand-written statements, a bounded set — and at most
// stmtCacheSize of them; a statement whose rows are still open when its text runs again is not shared (a fresh one
// is prepared for that run). database/sql uses a connection from one goroutine at a time, so the cache needs no lock.
type stmtCache struct {
	m map[string]*cachedStmt
}

type cachedStmt struct {
	st   sqliteStmt
	busy bool
}

// stmtCacheSize bounds a connection's cache: far more than the store's hand-written texts.
const stmtCacheSize = 256

// take returns the prepared statement of query and the function that gives it back, or nil when it is not kept
// (the cache is full, or its statement is busy): the caller then runs the text as it would without a cache.
func (c *stmtCache) take(ctx context.Context, conn *utcSQLiteConn, query string) (sqliteStmt, func(), error) {
	cs, ok := c.m[query]
	if !ok {
		if len(c.m) >= stmtCacheSize {
			return nil, nil, nil
		}
		st, err := whole[sqliteStmt](conn.sqliteConn.PrepareContext(ctx, query))
		if err != nil {
			return nil, nil, err
		}
		if c.m == nil {
			c.m = map[string]*cachedStmt{}
		}
		cs = &cachedStmt{st: st}
		c.m[query] = cs
	}
	if cs.busy {
		return nil, nil, nil
	}
	cs.busy = true
	return cs.st, func() { cs.busy = false }, nil
}

func (c *stmtCache) close() {
	for _, cs := range c.m {
		_ = cs.st.Close()
	}
	c.m = nil
}

// releasingRows gives its statement back to the cache when closed.
type releasingRows struct {
	driver.Rows
	release func()
}

func (r *releasingRows) Close() error {
	err := r.Rows.Close()
	if r.release != nil {
		r.release()
		r.release = nil
	}
	return err
}

func (s utcSQLiteStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return utcRows(s.sqliteStmt.QueryContext(ctx, args))
}

// whole returns what the driver opened as an I, everything of it that database/sql uses, which a wrapper passes
// through; one that lacks part of it is closed and refused, rather than quietly losing that part behind the wrapper.
func whole[I any](v interface{ Close() error }, err error) (I, error) {
	var i I
	if err != nil {
		return i, err
	}
	i, ok := v.(I)
	if !ok {
		_ = v.Close()
		return i, fmt.Errorf("store: the sqlite driver's %T lacks a method the store relies on", v)
	}
	return i, nil
}

// utcTimeRows converts the text of the TIMESTAMPTZ columns of its rows to times in UTC.
type utcTimeRows struct {
	driver.Rows
	times []int // indexes of the TIMESTAMPTZ columns
}

// utcRows wraps the rows of a query that have TIMESTAMPTZ columns (the declared type survives RETURNING, joins,
// subqueries and CTEs; only aggregates lose it) and returns other rows, and errors, as they are.
func utcRows(rows driver.Rows, err error) (driver.Rows, error) {
	typed, ok := rows.(driver.RowsColumnTypeDatabaseTypeName)
	if err != nil || !ok {
		return rows, err
	}
	var times []int
	for i := range rows.Columns() {
		if typed.ColumnTypeDatabaseTypeName(i) == sqliteTimeType {
			times = append(times, i)
		}
	}
	if times == nil {
		return rows, nil
	}
	return &utcTimeRows{Rows: rows, times: times}, nil
}

func (r *utcTimeRows) Next(dest []driver.Value) error {
	if err := r.Rows.Next(dest); err != nil {
		return err
	}
	for _, i := range r.times {
		// Anything else (NULL, text that is not a time) is left for the scan to judge, as before.
		if s, ok := dest[i].(string); ok {
			if t, err := time.Parse(sqliteTimeFormat, s); err == nil {
				dest[i] = t.UTC()
			}
		}
	}
	return nil
}
