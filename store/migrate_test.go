package store_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// emptyDatabases runs fn on a new SQLite file and a new PostgreSQL database, neither migrated.
func emptyDatabases(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	for name, url := range map[string]func(testing.TB) string{
		"sqlite": storetest.SQLiteURL, "postgres": storetest.EmptyPostgresURL,
	} {
		t.Run(name, func(t *testing.T) {
			db, err := store.Open(ctx, url(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			fn(t, db)
		})
	}
}

func tableExists(t *testing.T, db *store.DB, table string) bool {
	t.Helper()
	q := "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
	if db.Dialect() == store.Postgres {
		q = "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?"
	}
	var n int
	if err := db.Bun().QueryRowContext(ctx, q, table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func recordedMigrations(t *testing.T, db *store.DB) []string {
	t.Helper()
	var names []string
	if err := db.Bun().NewSelect().Table("bun_migrations").Column("name").Order("name").Scan(ctx, &names); err != nil {
		t.Fatal(err)
	}
	return names
}

func TestFailingMigrationLeavesNothing(t *testing.T) {
	emptyDatabases(t, func(t *testing.T, db *store.DB) {
		fsys := fstest.MapFS{
			"20260101000001_first.tx.up.sql": {Data: []byte("CREATE TABLE first (id TEXT PRIMARY KEY)")},
			// The second statement fails after the first succeeded.
			"20260101000002_second.tx.up.sql": {Data: []byte(
				"CREATE TABLE second (id TEXT PRIMARY KEY);\n--bun:split\nINSERT INTO no_such_table VALUES (1)")},
		}
		if err := db.MigrateFS(ctx, fsys); err == nil {
			t.Fatal("a migration with a failing statement succeeded")
		}
		if !tableExists(t, db, "first") || tableExists(t, db, "second") {
			t.Errorf("after the failure: first exists %v, second exists %v; want only the first migration applied",
				tableExists(t, db, "first"), tableExists(t, db, "second"))
		}
		if got := recordedMigrations(t, db); strings.Join(got, ",") != "20260101000001" {
			t.Errorf("recorded migrations %v, want only 20260101000001", got)
		}

		// Fixed, it applies from its beginning at the next start.
		fsys["20260101000002_second.tx.up.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE second (id TEXT PRIMARY KEY)")}
		if err := db.MigrateFS(ctx, fsys); err != nil {
			t.Fatalf("migrate after the fix: %v", err)
		}
		if !tableExists(t, db, "second") {
			t.Error("the fixed migration was not applied")
		}
		if got := recordedMigrations(t, db); strings.Join(got, ",") != "20260101000001,20260101000002" {
			t.Errorf("recorded migrations %v, want both", got)
		}
	})
}

// A migration that cannot be recorded is not applied either: here the migration writes its own bookkeeping row
// first, so the runner's row breaks the unique name, and the table it created must be gone with it.
func TestMigrationAndItsRecordCommitTogether(t *testing.T) {
	emptyDatabases(t, func(t *testing.T, db *store.DB) {
		fsys := fstest.MapFS{
			"20260101000001_clash.tx.up.sql": {Data: []byte("CREATE TABLE clash (id TEXT PRIMARY KEY);\n--bun:split\n" +
				"INSERT INTO bun_migrations (name, group_id, migrated_at) VALUES ('20260101000001', 1, CURRENT_TIMESTAMP)")},
		}
		if err := db.MigrateFS(ctx, fsys); err == nil {
			t.Fatal("a migration whose bookkeeping row cannot be written succeeded")
		}
		if tableExists(t, db, "clash") {
			t.Error("the migration's table survived the failure of its bookkeeping row")
		}
		if got := recordedMigrations(t, db); len(got) != 0 {
			t.Errorf("recorded migrations %v, want none", got)
		}
	})
}

func TestMigrationsMustBeTransactional(t *testing.T) {
	db := storetest.SQLite(t)
	fsys := fstest.MapFS{"20260101000001_plain.up.sql": {Data: []byte("CREATE TABLE plain (id TEXT)")}}
	if err := db.MigrateFS(ctx, fsys); err == nil || !strings.Contains(err.Error(), "transactional") {
		t.Fatalf("a migration outside a transaction: err = %v, want a refusal", err)
	}
	if tableExists(t, db, "plain") {
		t.Error("the refused migration ran")
	}
}
