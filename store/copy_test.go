package store_test

import (
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
