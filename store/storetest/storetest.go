// Package storetest gives tests real, migrated databases: a fresh SQLite file per test and one PostgreSQL database
// per test binary (created on first use, dropped by Main). Tests that share the PostgreSQL database isolate their
// data by creating their own workspaces.
//
// PostgreSQL is found at SWITCHBOARD_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres). When
// it cannot be reached the PostgreSQL half of a test is skipped, unless CI is set: then it fails.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/switchboard/switchboard/store"
)

// DefaultPostgresURL is the server tests use unless SWITCHBOARD_TEST_POSTGRES_URL says otherwise.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

var pg struct {
	once  sync.Once
	admin string // URL of the maintenance database
	url   string // URL of this binary's test database
	name  string
	err   error
}

// Main runs the tests and drops the PostgreSQL database they created. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if pg.name != "" {
		if db, err := sql.Open("pgx", pg.admin); err == nil {
			_, _ = db.Exec("DROP DATABASE IF EXISTS " + pg.name + " WITH (FORCE)")
			_ = db.Close()
		}
	}
	os.Exit(code)
}

// Dialects runs fn as a subtest on SQLite and on PostgreSQL, each with a migrated database.
func Dialects(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, Postgres(t)) })
}

// OwnDialects is Dialects with a PostgreSQL database of the test's own: for tests of what works across every
// workspace of a deployment (the channel runtime holds every instance), which other tests' data would disturb.
func OwnDialects(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, open(t, EmptyPostgresURL(t))) })
}

// SQLite opens a new migrated SQLite database in a temporary directory, closed when the test ends.
func SQLite(t testing.TB) *store.DB {
	t.Helper()
	return open(t, "file:"+filepath.Join(t.TempDir(), "switchboard.db"))
}

// SQLiteURL returns the URL of a new, empty SQLite database file (for tests that run the binary).
func SQLiteURL(t testing.TB) string {
	return "file:" + filepath.Join(t.TempDir(), "switchboard.db")
}

// Postgres opens this test binary's migrated PostgreSQL database, or skips (fails under CI) without a server.
func Postgres(t testing.TB) *store.DB {
	t.Helper()
	return open(t, PostgresURL(t))
}

// PostgresURL returns the URL of this test binary's PostgreSQL database, creating it on first use.
func PostgresURL(t testing.TB) string {
	t.Helper()
	pg.once.Do(createPostgres)
	if pg.err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL is required when CI is set: %v", pg.err)
		}
		t.Skipf("PostgreSQL not available (set SWITCHBOARD_TEST_POSTGRES_URL): %v", pg.err)
	}
	return pg.url
}

func createPostgres() {
	pg.admin = os.Getenv("SWITCHBOARD_TEST_POSTGRES_URL")
	if pg.admin == "" {
		pg.admin = DefaultPostgresURL
	}
	admin, err := sql.Open("pgx", pg.admin)
	if err != nil {
		pg.err = err
		return
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		pg.err = err
		return
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "switchboard_test_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		pg.err = fmt.Errorf("create test database: %w", err)
		return
	}
	u, err := url.Parse(pg.admin)
	if err != nil {
		pg.err = err
		return
	}
	u.Path = "/" + name
	pg.name, pg.url = name, u.String()
}

// EmptyPostgresURL creates a PostgreSQL database of the test's own, empty and not migrated, dropped when the test
// ends: for tests that need a database no other test writes to (migrations, copies of a whole deployment).
func EmptyPostgresURL(t testing.TB) string {
	t.Helper()
	PostgresURL(t)
	admin, err := sql.Open("pgx", pg.admin)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "switchboard_test_" + hex.EncodeToString(b)
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if admin, err := sql.Open("pgx", pg.admin); err == nil {
			_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
			_ = admin.Close()
		}
	})
	u, err := url.Parse(pg.admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

func open(t testing.TB, url string) *store.DB {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, url)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db
}
