package store_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/migrations"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMigrateIsIdempotent(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		// storetest already migrated once.
		for range 2 {
			if err := db.Migrate(ctx); err != nil {
				t.Fatalf("Migrate again: %v", err)
			}
		}
		files, err := fs.Glob(migrations.FS, "*.up.sql")
		if err != nil {
			t.Fatal(err)
		}
		var applied int
		if err := db.Bun().NewSelect().Table("bun_migrations").ColumnExpr("count(*)").Scan(ctx, &applied); err != nil {
			t.Fatal(err)
		}
		if applied != len(files) {
			t.Errorf("%d migrations recorded as applied, want one per file (%d)", applied, len(files))
		}
		newWorkspace(t, db, "after migrations")
	})
}

// The doc comment of Migrate promises that several processes (the server and `switchboard migrate`) may migrate
// one SQLite file at once. The race is narrow, so it is run a few times on fresh files.
func TestMigrateTwoProcessesAtOnceOnSQLite(t *testing.T) {
	for round := range 8 {
		url := storetest.SQLiteURL(t)
		dbs := make([]*store.DB, 2)
		for i := range dbs {
			db, err := store.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			dbs[i] = db
		}
		errs := make([]error, len(dbs))
		var wg sync.WaitGroup
		for i, db := range dbs {
			wg.Go(func() { errs[i] = db.Migrate(ctx) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: Migrate in process %d: %v", round+1, i+1, err)
			}
		}
	}
}

func TestOpenSQLiteURLs(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, url, dir string
	}{
		{"file: URL", "file:" + filepath.Join(dir, "a", "one.db"), filepath.Join(dir, "a")},
		{"sqlite: URL", "sqlite:" + filepath.Join(dir, "b", "two.db"), filepath.Join(dir, "b")},
		{"query string ignored", "file:" + filepath.Join(dir, "c", "three.db") + "?mode=ro", filepath.Join(dir, "c")},
		{"plain path", filepath.Join(dir, "d", "four.db"), filepath.Join(dir, "d")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := store.Open(ctx, tt.url)
			if err != nil {
				t.Fatalf("Open(%q): %v", tt.url, err)
			}
			defer db.Close()
			if db.Dialect() != store.SQLite || db.DataDir() != tt.dir {
				t.Errorf("Open(%q): dialect %q, data dir %q; want sqlite in %q", tt.url, db.Dialect(), db.DataDir(), tt.dir)
			}
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			if err := db.Ping(ctx); err != nil {
				t.Errorf("Ping: %v", err)
			}
		})
	}
}

func TestOpenRejectsInMemorySQLite(t *testing.T) {
	// Every connection would see its own empty database.
	for _, url := range []string{"file::memory:", "sqlite::memory:", ":memory:", "file:"} {
		if db, err := store.Open(ctx, url); err == nil {
			_ = db.Close()
			t.Errorf("Open(%q) succeeded, want an error", url)
		}
	}
}

func TestOpenPostgres(t *testing.T) {
	url := storetest.PostgresURL(t)
	for _, u := range []string{url, strings.Replace(url, "postgres://", "postgresql://", 1)} {
		db, err := store.Open(ctx, u)
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		if db.Dialect() != store.Postgres || db.DataDir() != "" {
			t.Errorf("Open(%q): dialect %q, data dir %q; want pg and no data dir", u, db.Dialect(), db.DataDir())
		}
		if err := db.Ping(ctx); err != nil {
			t.Errorf("Ping: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

func TestOpenUnreachablePostgres(t *testing.T) {
	_, err := store.Open(ctx, "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
}

func TestNewID(t *testing.T) {
	prev := ""
	for range 1000 {
		id := store.NewID("key")
		if !strings.HasPrefix(id, "key_") || len(id) != len("key_")+26 {
			t.Fatalf("NewID(key) = %q, want key_ and a 26-character ULID", id)
		}
		if id <= prev {
			t.Fatalf("NewID returned %q after %q: IDs must sort in creation order", id, prev)
		}
		prev = id
	}
}

// The SQLite files hold password hashes and sealed secrets: the database, its WAL and shared memory are the owner's
// only, in a directory only the owner enters.
func TestSQLiteFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	db, err := store.Open(context.Background(), "file:"+filepath.Join(dir, "switchboard.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("data directory: %v %v", st.Mode().Perm(), err)
	}
	for _, name := range []string{"switchboard.db", "switchboard.db-wal", "switchboard.db-shm"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, st.Mode().Perm())
		}
	}
}
