package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// ErrNotSQLite is returned by operations that only an SQLite database supports (on PostgreSQL its own tools do them).
var ErrNotSQLite = errors.New("store: this works on SQLite databases only")

// BackupTo writes a consistent copy of an SQLite database to path, a new file, while the server may keep serving:
// VACUUM INTO reads one snapshot (a read transaction, which in WAL mode never blocks writers) and writes it as a
// compact database of its own, without a WAL. The copy is created 0600: it holds password and key hashes. Returns
// ErrNotSQLite on PostgreSQL, and an error when path exists.
func (db *DB) BackupTo(ctx context.Context, path string) error {
	if db.dialect != SQLite {
		return ErrNotSQLite
	}
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("store: %s exists already; back up to a new file", path)
	}
	// Created empty and private first, so the copy is never readable by others, even while it is written.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("store: create backup: %w", err)
	}
	_ = f.Close()
	if _, err := db.w.ExecContext(ctx, "VACUUM INTO ?", path); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("store: back up: %w", err)
	}
	return nil
}

// Table is a table of the store, as CopyTo copies it.
type Table struct {
	Name    string
	Columns []string
	// Key are the columns of its primary key (all columns when it has none), the order rows are copied in.
	Key []string
	// Parents are the tables its foreign keys reference.
	Parents []string
}

// notCopied are the tables of the migration runner: the destination records its own migrations.
var notCopied = []string{"bun_migrations", "bun_migration_locks"}

// Tables lists every table of an SQLite database — every table its migrations created, so a table added by a new
// migration is copied without being named anywhere — parents before the tables that reference them. Returns
// ErrNotSQLite on PostgreSQL.
func (db *DB) Tables(ctx context.Context) ([]Table, error) {
	if db.dialect != SQLite {
		return nil, ErrNotSQLite
	}
	var names []string
	if err := db.r.NewSelect().TableExpr("sqlite_master").Column("name").
		Where("type = 'table' AND name NOT LIKE 'sqlite_%'").Order("name").Scan(ctx, &names); err != nil {
		return nil, err
	}
	byName := map[string]*Table{}
	var tables []*Table
	for _, name := range names {
		if slices.Contains(notCopied, name) {
			continue
		}
		t := &Table{Name: name}
		var cols []struct {
			Name string `bun:"name"`
			PK   int    `bun:"pk"`
		}
		if err := db.r.NewRaw("SELECT name, pk FROM pragma_table_info(?) ORDER BY cid", name).Scan(ctx, &cols); err != nil {
			return nil, err
		}
		keyAt := map[int]string{}
		for _, c := range cols {
			t.Columns = append(t.Columns, c.Name)
			if c.PK > 0 {
				keyAt[c.PK] = c.Name
			}
		}
		for i := 1; i <= len(keyAt); i++ {
			t.Key = append(t.Key, keyAt[i])
		}
		if len(t.Key) == 0 {
			t.Key = t.Columns
		}
		if err := db.r.NewRaw(`SELECT DISTINCT "table" FROM pragma_foreign_key_list(?)`, name).Scan(ctx, &t.Parents); err != nil {
			return nil, err
		}
		byName[name] = t
		tables = append(tables, t)
	}
	// Parents first (a depth-first topological order; a table referencing itself is its own parent and ignored).
	var ordered []Table
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(t *Table) error
	visit = func(t *Table) error {
		switch state[t.Name] {
		case 1:
			return fmt.Errorf("store: foreign keys form a cycle through %s", t.Name)
		case 2:
			return nil
		}
		state[t.Name] = 1
		for _, p := range t.Parents {
			if pt := byName[p]; pt != nil && p != t.Name {
				if err := visit(pt); err != nil {
					return err
				}
			}
		}
		state[t.Name] = 2
		ordered = append(ordered, *t)
		return nil
	}
	for _, t := range tables {
		if err := visit(t); err != nil {
			return nil, err
		}
	}
	return ordered, nil
}

// Copied is how many rows of a table CopyTo copied.
type Copied struct {
	Table string
	Rows  int
}

// Extra is a set of tables that code other than the migrations creates in the product's database (a provider's
// library that keeps its own schema, versioned its own way). The destination's migrations do not create them, so
// CopyTo copies them only after the extra prepared both databases; without an Extra that owns them the copy fails
// on the first table the destination lacks.
type Extra struct {
	// Name says what the tables hold, for errors.
	Name string
	// Owns reports whether a table of the source is one of the extra's.
	Owns func(table string) bool
	// Prepare brings the extra's schema of the source and of the destination to the same version, given the
	// source's tables it owns, or returns why it cannot (a binary built without the code that owns them).
	Prepare func(ctx context.Context, src, dst *DB, tables []string) error
	// Versions are the extra's tables that record its schema version: Prepare filled them in the destination, so
	// they are not copied.
	Versions []string
}

// copyBatch is how many rows one INSERT carries (PostgreSQL allows 65,535 parameters per statement).
const copyBatch = 500

// CopyTo copies every table of an SQLite database (see Tables) into a migrated PostgreSQL database that holds no
// workspace and no user yet, in one transaction of the destination: it has all of the source's rows or none. The
// source is read in one read transaction, a consistent snapshot even while a server writes; writes after it are
// not copied, so stop the servers first. progress is called after every batch. The tables of extras are copied
// after each extra present in the source prepared its schema: schema, like the migrations, is created outside the
// transaction, and a failed copy leaves it empty, as a server would create it, so the copy can be run again.
// Returns ErrNotSQLite when db is not SQLite, and an error when dst is not PostgreSQL, is not empty, lacks a table
// or column of the source (migrate it with the same version first), or an extra refuses.
func (db *DB) CopyTo(ctx context.Context, dst *DB, progress func(table string, copied, total int), extras ...Extra) ([]Copied, error) {
	if db.dialect != SQLite {
		return nil, ErrNotSQLite
	}
	if dst.dialect != Postgres {
		return nil, errors.New("store: the destination must be a PostgreSQL database")
	}
	for _, t := range []string{"workspaces", "users"} {
		var n int
		if err := dst.w.NewSelect().TableExpr(t).ColumnExpr("count(*)").Scan(ctx, &n); err != nil {
			return nil, err
		}
		if n > 0 {
			return nil, fmt.Errorf("store: the destination is not empty (%d rows in %s)", n, t)
		}
	}
	tables, err := db.Tables(ctx)
	if err != nil {
		return nil, err
	}
	var versions []string
	prepared := false
	for _, x := range extras {
		var owned []string
		for _, t := range tables {
			if x.Owns(t.Name) {
				owned = append(owned, t.Name)
			}
		}
		if len(owned) == 0 {
			continue
		}
		if err := x.Prepare(ctx, db, dst, owned); err != nil {
			return nil, fmt.Errorf("store: %s: %w", x.Name, err)
		}
		versions = append(versions, x.Versions...)
		prepared = true
	}
	if prepared { // preparing may have upgraded the source's schema of an extra
		if tables, err = db.Tables(ctx); err != nil {
			return nil, err
		}
	}
	tables = slices.DeleteFunc(tables, func(t Table) bool { return slices.Contains(versions, t.Name) })
	types, err := dst.columnTypes(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		for _, c := range t.Columns {
			if _, ok := types[t.Name][c]; !ok {
				return nil, fmt.Errorf("store: the destination has no column %s.%s: migrate it with this version first", t.Name, c)
			}
		}
	}
	src, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = src.Rollback() }()
	tx, err := dst.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	// Rows the migrations seeded (counters) are replaced by the source's: children first, then parents.
	for i := len(tables) - 1; i >= 0; i-- {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+quoteIdent(tables[i].Name)); err != nil {
			return nil, err
		}
	}
	var copied []Copied
	for _, t := range tables {
		var total int
		if err := src.QueryRowContext(ctx, "SELECT count(*) FROM "+quoteIdent(t.Name)).Scan(&total); err != nil {
			return nil, err
		}
		n, err := copyTable(ctx, src.Tx, tx.Tx, t, types[t.Name], total, progress)
		if err != nil {
			return nil, fmt.Errorf("store: copy %s: %w", t.Name, err)
		}
		copied = append(copied, Copied{Table: t.Name, Rows: n})
	}
	return copied, tx.Commit()
}

func copyTable(ctx context.Context, src, dst *sql.Tx, t Table, types map[string]string, total int,
	progress func(string, int, int)) (int, error) {
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = quoteIdent(c)
	}
	key := make([]string, len(t.Key))
	for i, c := range t.Key {
		key[i] = quoteIdent(c)
	}
	rows, err := src.QueryContext(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+quoteIdent(t.Name)+
		" ORDER BY "+strings.Join(key, ", "))
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var (
		n     int
		args  []any
		count int
	)
	flush := func() error {
		if count == 0 {
			return nil
		}
		var b strings.Builder
		b.WriteString("INSERT INTO " + quoteIdent(t.Name) + " (" + strings.Join(cols, ", ") + ") VALUES ")
		for r := range count {
			if r > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for c := range cols {
				if c > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "$%d", r*len(cols)+c+1)
			}
			b.WriteByte(')')
		}
		if _, err := dst.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
		n += count
		args, count = args[:0], 0
		if progress != nil {
			progress(t.Name, n, total)
		}
		return nil
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		for i, v := range vals {
			cv, err := toPostgres(v, types[t.Columns[i]])
			if err != nil {
				return n, fmt.Errorf("column %s: %w", t.Columns[i], err)
			}
			args = append(args, cv)
		}
		if count++; count == copyBatch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	if err := flush(); err != nil {
		return n, err
	}
	if n == 0 && progress != nil {
		progress(t.Name, 0, total)
	}
	return n, nil
}

// toPostgres converts a value read from SQLite to the PostgreSQL column type it goes into: SQLite keeps booleans as
// integers and JSON as text, and a column it does not know as binary (whatsmeow's bytea) may hold text.
func toPostgres(v any, pgType string) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case int64:
		if pgType == "boolean" {
			return x != 0, nil
		}
	case []byte:
		if pgType != "bytea" {
			return string(x), nil
		}
	case string:
		if pgType == "bytea" {
			return []byte(x), nil
		}
		if pgType == "timestamp with time zone" {
			for _, layout := range []string{"2006-01-02 15:04:05.999999999-07:00", time.RFC3339Nano, "2006-01-02 15:04:05"} {
				if ts, err := time.Parse(layout, x); err == nil {
					return ts.UTC(), nil
				}
			}
			return nil, fmt.Errorf("%q is not a time", x)
		}
	}
	return v, nil
}

// columnTypes reads the data types of every column of a PostgreSQL database's tables.
func (db *DB) columnTypes(ctx context.Context) (map[string]map[string]string, error) {
	var cols []struct {
		Table  string `bun:"table_name"`
		Column string `bun:"column_name"`
		Type   string `bun:"data_type"`
	}
	if err := db.w.NewRaw(`SELECT table_name, column_name, data_type FROM information_schema.columns
		WHERE table_schema = current_schema()`).Scan(ctx, &cols); err != nil {
		return nil, err
	}
	types := map[string]map[string]string{}
	for _, c := range cols {
		if types[c.Table] == nil {
			types[c.Table] = map[string]string{}
		}
		types[c.Table][c.Column] = c.Type
	}
	return types, nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
