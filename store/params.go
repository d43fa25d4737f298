package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
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
// inserted without a change here). json marks the JSON columns (`type:json`): their value is the text Bun would
// write into the statement.
type rowInserter struct {
	query  string
	fields []*schema.Field
	json   []bool
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
		plain := plainColumn(f)
		js := !plain && jsonColumn(f)
		if !plain && !js {
			err := fmt.Errorf("store: %s.%s cannot be inserted with parameters", t, f.GoName)
			rowInserters.Store(t, err)
			return nil, err
		}
		cols = append(cols, string(f.SQLName))
		marks = append(marks, "?")
		ins.fields = append(ins.fields, f)
		ins.json = append(ins.json, js)
	}
	ins.query = fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", table.SQLName, strings.Join(cols, ", "), strings.Join(marks, ", "))
	rowInserters.Store(t, ins)
	return ins, nil
}

// plainColumn reports whether a field's value goes to the database as is (after sqliteArgs): text, numbers, booleans,
// times, pointers to those, and JSON kept as raw bytes.
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
	case reflect.Bool:
		// Bun writes TRUE or FALSE, which SQLite stores as the integer 1 or 0, as a bound bool is.
		return true
	}
	return false
}

// jsonColumn reports whether a field is a JSON column that Bun writes as it is (not as DEFAULT, not left out).
func jsonColumn(f *schema.Field) bool {
	return f.Tag.HasOption("type") && strings.HasPrefix(f.UserSQLType, "json") && f.SQLDefault == "" && !f.AutoIncrement &&
		!(f.NotNull && (f.IsPtr || f.NullZero)) && !f.Tag.HasOption("scanonly")
}

// args returns the parameters of one row, as Bun would write them (a nullzero column's zero value is NULL).
func (ins *rowInserter) args(gen schema.QueryGen, row reflect.Value) ([]any, error) {
	args := make([]any, len(ins.fields))
	for i, f := range ins.fields {
		if f.NullZero && f.HasZeroValue(row) {
			continue
		}
		if ins.json[i] {
			// Bun's own text of the value, a quoted literal or NULL, is what the column would hold.
			lit := string(f.AppendValue(gen, nil, row))
			if lit == "NULL" {
				continue
			}
			if len(lit) < 2 || lit[0] != '\'' || lit[len(lit)-1] != '\'' {
				return nil, fmt.Errorf("store: %s is written as %.40q, not a quoted text", f.GoName, lit)
			}
			args[i] = strings.ReplaceAll(lit[1:len(lit)-1], "''", "'")
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
	return args, nil
}

// rowUpdater writes every column of a row of a model but the fixed ones, by its id, with parameters (derived once
// from the model's inserter, so that a column added to the model is written without a change here).
type rowUpdater struct {
	query string
	ins   *rowInserter
	cols  []int // the inserter's columns the statement sets, then id
}

var rowUpdaters sync.Map // updaterKey → *rowUpdater or error

type updaterKey struct {
	t     reflect.Type
	fixed string
}

// updateByID writes every column of row but id and those in fixed, where id is row's ID, inside q: on SQLite with
// parameters (parsed once per connection), elsewhere through Bun. It returns ErrNotFound when no row has the ID.
func updateByID[T any](ctx context.Context, db *DB, q bun.IDB, row *T, fixed ...string) error {
	raw, ok := db.rawSQLite(ctx, q)
	var up *rowUpdater
	if ok {
		var err error
		if up, err = db.updaterOf(reflect.TypeFor[T](), fixed); err != nil {
			ok = false
		}
	}
	if !ok {
		res, err := q.NewUpdate().Model(row).WherePK().ExcludeColumn(append([]string{"id"}, fixed...)...).Exec(ctx)
		return expectOneRow(res, err)
	}
	all, err := up.ins.args(db.w.QueryGen(), reflect.ValueOf(row).Elem())
	if err != nil {
		return err
	}
	args := make([]any, len(up.cols))
	for i, c := range up.cols {
		args[i] = all[c]
	}
	res, err := raw.ExecContext(ctx, up.query, sqliteArgs(args)...)
	db.health.noteErr(err)
	return expectOneRow(res, mapErr(err))
}

func (db *DB) updaterOf(t reflect.Type, fixed []string) (*rowUpdater, error) {
	k := updaterKey{t, strings.Join(fixed, ",")}
	if v, ok := rowUpdaters.Load(k); ok {
		if err, bad := v.(error); bad {
			return nil, err
		}
		return v.(*rowUpdater), nil
	}
	ins, err := db.inserterOf(t)
	if err != nil {
		rowUpdaters.Store(k, err)
		return nil, err
	}
	up := &rowUpdater{ins: ins}
	var sets []string
	id := -1
	for i, f := range ins.fields {
		switch name := string(f.SQLName); {
		case name == "id":
			id = i
		case !slices.Contains(fixed, name):
			sets = append(sets, name+" = ?")
			up.cols = append(up.cols, i)
		}
	}
	if id < 0 {
		err := fmt.Errorf("store: %s has no id column", t)
		rowUpdaters.Store(k, err)
		return nil, err
	}
	up.cols = append(up.cols, id)
	up.query = fmt.Sprintf("UPDATE %s SET %s WHERE id = ?", db.w.Table(t).SQLName, strings.Join(sets, ", "))
	rowUpdaters.Store(k, up)
	return up, nil
}

// insertParams is insertRows with the errors of insert: ErrConflict for a duplicate, ErrNotFound for a row that
// refers to one that is not there.
func insertParams[T any](ctx context.Context, db *DB, q bun.IDB, rows []T) error {
	err := insertRows(ctx, db, q, rows)
	if isForeignKeyViolation(err) {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return mapErr(err)
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
	gen := db.w.QueryGen()
	for i := range rows {
		args, err := ins.args(gen, reflect.ValueOf(&rows[i]).Elem())
		if err != nil {
			return err
		}
		if _, err = raw.ExecContext(ctx, ins.query, sqliteArgs(args)...); err != nil {
			db.health.noteErr(err)
			return err
		}
	}
	return nil
}

// selectParams runs a SELECT whose arguments are '?' placeholders (see execParams) and scans its rows into models
// of type T as Bun scans a model's query (select the columns with columnsOf).
func selectParams[T any](ctx context.Context, db *DB, q bun.IDB, query string, args ...any) ([]T, error) {
	rows, err := db.queryParams(ctx, q, query, args...)
	if err != nil {
		return nil, err
	}
	var out []T
	if err := db.w.ScanRows(ctx, rows, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// selectOneParams is selectParams for one row: the first, ErrNotFound when there is none.
func selectOneParams[T any](ctx context.Context, db *DB, q bun.IDB, query string, args ...any) (T, error) {
	rows, err := selectParams[T](ctx, db, q, query, args...)
	if err != nil || len(rows) == 0 {
		var zero T
		if err == nil {
			err = ErrNotFound
		}
		return zero, mapErr(err)
	}
	return rows[0], nil
}

var columnLists sync.Map // columnsKey → string

type columnsKey struct {
	t     reflect.Type
	alias string
}

// columnsOf lists the columns of model T, each prefixed with alias (none when empty), as a SELECT of its Bun model
// reads them (derived once from the model, so that a column added to the model is read without a change here).
func columnsOf[T any](db *DB, alias string) string {
	k := columnsKey{reflect.TypeFor[T](), alias}
	if v, ok := columnLists.Load(k); ok {
		return v.(string)
	}
	var cols []string
	for _, f := range db.w.Table(k.t).Fields {
		if alias != "" {
			cols = append(cols, alias+"."+string(f.SQLName))
		} else {
			cols = append(cols, string(f.SQLName))
		}
	}
	s := strings.Join(cols, ", ")
	columnLists.Store(k, s)
	return s
}

// oneOfParam is oneOf for a statement with parameters: one text whatever the number of ids, so that SQLite
// parses it once (it reads the IDs from a JSON array), `= ANY` of an array on PostgreSQL.
func (db *DB) oneOfParam(col string, ids []string) (string, any) {
	if db.dialect == Postgres {
		return col + " = ANY(?::text[])", pgTexts(ids, same)
	}
	b, _ := json.Marshal(ids)
	return col + " IN (SELECT value FROM json_each(?))", string(b)
}

// forUpdateSQL is what forUpdate adds to a statement's text: FOR UPDATE on PostgreSQL, nothing on SQLite (its
// writer is held for the whole transaction).
func (db *DB) forUpdateSQL() string {
	if db.dialect == Postgres {
		return " FOR UPDATE"
	}
	return ""
}
