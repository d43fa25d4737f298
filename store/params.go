package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/schema"
)

// The hot statements of the send pipeline and the outbox are written with parameters: on SQLite their text then
// stays the same from one run to the next, and the connection parses it once (see stmtCache) instead of once per
// run as with Bun, which writes every value into the text. On PostgreSQL they go through Bun as every other
// statement (the pool runs the simple protocol, and a pipelined transaction queues text), so one text with '?'
// placeholders serves both databases.

// execParams runs a statement whose arguments are '?' placeholders: on SQLite with its arguments as parameters
// (through the transaction or pool q names), elsewhere formatted by Bun.
func (db *DB) execParams(ctx context.Context, q bun.IDB, query string, args ...any) (sql.Result, error) {
	if raw, ok := db.rawSQLite(ctx, q); ok {
		res, err := raw.ExecContext(ctx, query, sqliteArgs(args)...)
		db.health.noteErr(err)
		return res, err
	}
	return q.ExecContext(ctx, query, args...)
}

// queryParams is execParams for a statement that returns rows.
func (db *DB) queryParams(ctx context.Context, q bun.IDB, query string, args ...any) (*sql.Rows, error) {
	if raw, ok := db.rawSQLite(ctx, q); ok {
		rows, err := raw.QueryContext(ctx, query, sqliteArgs(args)...)
		db.health.noteErr(err)
		return rows, err
	}
	return q.QueryContext(ctx, query, args...)
}

// scanInt runs a statement with parameters (execParams) that returns one integer, and returns it; ErrNotFound when
// it returns no row.
func (db *DB) scanInt(ctx context.Context, q bun.IDB, query string, args ...any) (int64, error) {
	rows, err := db.queryParams(ctx, q, query, args...)
	if err != nil {
		return 0, mapErr(err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, err
		}
		return 0, ErrNotFound
	}
	var n int64
	if err := rows.Scan(&n); err != nil {
		return 0, err
	}
	return n, rows.Close()
}

// sqlRunner is what database/sql's pools and transactions have in common.
type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// rawSQLite returns the database/sql handle under q on SQLite. The writer pool is refused inside a transaction of
// the database, as poolGuard refuses it for Bun's statements: it then goes through Bun, whose hook reports it.
func (db *DB) rawSQLite(ctx context.Context, q bun.IDB) (sqlRunner, bool) {
	if db.dialect != SQLite {
		return nil, false
	}
	switch h := q.(type) {
	case bun.Tx:
		return h.Tx, true
	case *bun.Tx:
		return h.Tx, true
	case *bun.DB:
		if h == db.w && ctx.Value(txKey{db}) != nil {
			return nil, false
		}
		return h.DB, true
	}
	return nil, false
}

// sqliteArgs converts arguments to the values Bun would have written into the text: times in UTC in Bun's format
// (SQLite compares them as text), JSON as text.
func sqliteArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case time.Time:
			out[i] = v.UTC().Format(sqliteTimeFormat)
		case *time.Time:
			if v != nil {
				out[i] = v.UTC().Format(sqliteTimeFormat)
			}
		case json.RawMessage:
			if v != nil {
				out[i] = string(v)
			}
		default:
			out[i] = a
		}
	}
	return out
}

// noteErr counts err as AfterQuery does for Bun's statements.
func (h *health) noteErr(err error) {
	if err != nil {
		h.record(err)
	}
}

// rowInserter inserts rows of a model one statement each, with parameters: the text, its columns and how each
// column's value is read from a row, derived once from the model's Bun table (so a column added to the model is
// inserted without a change here).
type rowInserter struct {
	query  string
	fields []*schema.Field
}

var rowInserters sync.Map // reflect.Type → *rowInserter or error

// inserterOf returns the inserter of model type t, or an error when a column has a type it does not convert (the
// caller then inserts through Bun).
func (db *DB) inserterOf(t reflect.Type) (*rowInserter, error) {
	if v, ok := rowInserters.Load(t); ok {
		if err, bad := v.(error); bad {
			return nil, err
		}
		return v.(*rowInserter), nil
	}
	table := db.w.Table(t)
	ins := &rowInserter{}
	var cols, marks []string
	for _, f := range table.Fields {
		if !plainColumn(f) {
			err := fmt.Errorf("store: %s.%s cannot be inserted with parameters", t, f.GoName)
			rowInserters.Store(t, err)
			return nil, err
		}
		cols = append(cols, string(f.SQLName))
		marks = append(marks, "?")
		ins.fields = append(ins.fields, f)
	}
	ins.query = fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", table.SQLName, strings.Join(cols, ", "), strings.Join(marks, ", "))
	rowInserters.Store(t, ins)
	return ins, nil
}

// plainColumn reports whether a field's value goes to the database as is (after sqliteArgs): text, numbers, times,
// pointers to those, and JSON kept as raw bytes.
func plainColumn(f *schema.Field) bool {
	if f.SQLDefault != "" || f.AutoIncrement || f.NotNull && (f.IsPtr || f.NullZero) || f.Tag.HasOption("scanonly") {
		return false // Bun may write DEFAULT or leave the column out
	}
	t := f.IndirectType
	switch {
	case t == reflect.TypeFor[time.Time](), t == reflect.TypeFor[json.RawMessage]():
		return true
	case f.Tag.HasOption("type") && strings.HasPrefix(f.UserSQLType, "json"):
		return false
	}
	switch t.Kind() {
	case reflect.String, reflect.Int, reflect.Int32, reflect.Int64:
		return true
	}
	return false
}

// args returns the parameters of one row, as Bun would write them (a nullzero column's zero value is NULL).
func (ins *rowInserter) args(row reflect.Value) []any {
	args := make([]any, len(ins.fields))
	for i, f := range ins.fields {
		if f.NullZero && f.HasZeroValue(row) {
			continue
		}
		v := f.Value(row)
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				continue
			}
			v = v.Elem()
		}
		args[i] = v.Interface()
	}
	return args
}

// insertRows inserts rows inside q: on SQLite one parameterized statement a row (parsed once per connection), on
// PostgreSQL multi-row statements through Bun (one round trip for many rows).
func insertRows[T any](ctx context.Context, db *DB, q bun.IDB, rows []T) error {
	if len(rows) == 0 {
		return nil
	}
	raw, ok := db.rawSQLite(ctx, q)
	var ins *rowInserter
	if ok {
		var err error
		if ins, err = db.inserterOf(reflect.TypeFor[T]()); err != nil {
			ok = false
		}
	}
	if !ok {
		return insertChunks(ctx, q, rows)
	}
	for i := range rows {
		_, err := raw.ExecContext(ctx, ins.query, sqliteArgs(ins.args(reflect.ValueOf(&rows[i]).Elem()))...)
		if err != nil {
			db.health.noteErr(err)
			return err
		}
	}
	return nil
}
