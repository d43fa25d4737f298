package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The copy is driven by the schema the migrations made, so every table of a migrated database is copied: this
// fails when a table exists on PostgreSQL that the copy would not fill (or the other way round).
func TestCopyCoversEveryTable(t *testing.T) {
	src := storetest.SQLite(t)
	tables, err := src.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var copied []string
	for _, tb := range tables {
		copied = append(copied, tb.Name)
	}
	dst := migratedPostgres(t)
	var pg []string
	if err := dst.Bun().NewRaw(`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()
		AND table_type = 'BASE TABLE' AND table_name NOT LIKE 'bun\_%' ORDER BY table_name`).Scan(ctx, &pg); err != nil {
		t.Fatal(err)
	}
	slices.Sort(copied)
	if !slices.Equal(copied, pg) {
		t.Errorf("tables copied from SQLite:\n%v\ntables of PostgreSQL:\n%v", copied, pg)
	}
	// Parents come before the tables that reference them.
	seen := map[string]bool{}
	for _, tb := range tables {
		for _, p := range tb.Parents {
			if p != tb.Name && !seen[p] {
				t.Errorf("%s is copied before its parent %s", tb.Name, p)
			}
		}
		seen[tb.Name] = true
	}
}

func migratedPostgres(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(ctx, storetest.EmptyPostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestCopyToPostgres(t *testing.T) {
	src := storetest.SQLite(t)
	w := newWorkspace(t, src, "Copied")
	newKey(t, src, w.ID, nil)
	newKey(t, src, w.ID, func(n *store.NewAPIKey) { n.Scopes = []string{"models:read"} })
	dst := migratedPostgres(t)
	var progress []string
	copied, err := src.CopyTo(ctx, dst, func(table string, n, total int) {
		progress = append(progress, fmt.Sprintf("%s %d/%d", table, n, total))
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(progress, "api_keys 2/2") || !slices.Contains(progress, "workspaces 1/1") {
		t.Errorf("progress %v, want api_keys 2/2 and workspaces 1/1", progress)
	}
	for _, c := range copied {
		if c.Table == "api_keys" && c.Rows != 2 {
			t.Errorf("copied %+v, want 2 keys", c)
		}
	}
	storetest.CompareDatabases(t, src, dst)

	// A second copy into a database that has data is refused, and changes nothing.
	if _, err := src.CopyTo(ctx, dst, nil); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("copy into a database with data: %v, want a refusal", err)
	}
}

func TestBackupIsACopy(t *testing.T) {
	db := storetest.SQLite(t)
	w := newWorkspace(t, db, "Backed up")
	newKey(t, db, w.ID, nil)
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := db.BackupTo(ctx, path); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("backup mode %v, want 0600", info.Mode().Perm())
	}
	if err := db.BackupTo(ctx, path); err == nil {
		t.Error("a backup over an existing file succeeded")
	}
	restored, err := store.Open(ctx, "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	storetest.CompareDatabases(t, db, restored)

	pg := storetest.Postgres(t)
	if err := pg.BackupTo(ctx, filepath.Join(t.TempDir(), "pg.db")); err != store.ErrNotSQLite {
		t.Errorf("backup of PostgreSQL: %v, want ErrNotSQLite", err)
	}
}

// Tables that code other than the migrations creates are copied only after an Extra prepared them: without one the
// copy stops at the first table the destination lacks; an Extra can refuse; a prepared one's rows are copied with
// their types converted (SQLite's 0/1 to boolean, text in a bytea column to bytes), and its version table is the
// destination's own.
func TestCopyToExtras(t *testing.T) {
	src := storetest.SQLite(t)
	newWorkspace(t, src, "With extras")
	for _, q := range []string{
		"CREATE TABLE plugin_version (version INTEGER)",
		"INSERT INTO plugin_version VALUES (1)",
		"CREATE TABLE plugin_things (id TEXT PRIMARY KEY, enabled BOOLEAN NOT NULL, data bytea NOT NULL)",
		"INSERT INTO plugin_things VALUES ('a', 1, '\\x61')", // text that PostgreSQL's bytea input would decode
	} {
		if _, err := src.Bun().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	owns := func(table string) bool { return strings.HasPrefix(table, "plugin_") }
	dst := migratedPostgres(t)
	if _, err := src.CopyTo(ctx, dst, nil); err == nil || !strings.Contains(err.Error(), "plugin_things") {
		t.Errorf("copy without the extra: %v, want the missing table named", err)
	}
	var owned []string
	refuse := store.Extra{Name: "plugin data", Owns: owns, Prepare: func(_ context.Context, _, _ *store.DB, tables []string) error {
		owned = tables
		return errors.New("no plugin here")
	}}
	if _, err := src.CopyTo(ctx, dst, nil, refuse); err == nil || !strings.Contains(err.Error(), "plugin data: no plugin here") {
		t.Errorf("copy with a refusing extra: %v", err)
	}
	if !slices.Equal(owned, []string{"plugin_things", "plugin_version"}) {
		t.Errorf("the extra was given %v", owned)
	}
	prepare := store.Extra{Name: "plugin data", Owns: owns, Versions: []string{"plugin_version"},
		Prepare: func(ctx context.Context, _, dst *store.DB, _ []string) error {
			for _, q := range []string{
				"CREATE TABLE plugin_version (version INTEGER)",
				"INSERT INTO plugin_version VALUES (9)",
				"CREATE TABLE plugin_things (id TEXT PRIMARY KEY, enabled BOOLEAN NOT NULL, data bytea NOT NULL)",
			} {
				if _, err := dst.Bun().ExecContext(ctx, q); err != nil {
					return err
				}
			}
			return nil
		}}
	if _, err := src.CopyTo(ctx, dst, nil, prepare); err != nil {
		t.Fatal(err)
	}
	var thing struct {
		Enabled bool   `bun:"enabled"`
		Data    []byte `bun:"data"`
	}
	if err := dst.Bun().NewRaw("SELECT enabled, data FROM plugin_things WHERE id = 'a'").Scan(ctx, &thing); err != nil ||
		!thing.Enabled || string(thing.Data) != `\x61` {
		t.Errorf("the extra's row on PostgreSQL: %+v, %v", thing, err)
	}
	var version int
	if err := dst.Bun().NewRaw("SELECT version FROM plugin_version").Scan(ctx, &version); err != nil || version != 9 {
		t.Errorf("the destination's version %d (%v), want its own 9", version, err)
	}
}
