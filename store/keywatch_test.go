package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// notifyWithin is how long an announced change may take to reach another process's KeysVersion. SQLite sees it at
// once (PRAGMA data_version); PostgreSQL notifications are asynchronous.
var notifyWithin = map[store.Dialect]time.Duration{store.SQLite: 0, store.Postgres: 2 * time.Second}

// processes runs fn on SQLite and PostgreSQL with two store.DBs open on one database: the server, and the CLI
// (or another replica) changing keys behind the server's back.
func processes(t *testing.T, fn func(t *testing.T, server, cli *store.DB)) {
	t.Helper()
	run := func(t *testing.T, url string) {
		server, cli := open(t, url), open(t, url)
		fn(t, server, cli)
	}
	t.Run("sqlite", func(t *testing.T) { run(t, storetest.SQLiteURL(t)) })
	t.Run("postgres", func(t *testing.T) { run(t, storetest.PostgresURL(t)) })
}

// open opens and migrates the database at url and runs its key watch, as a server process does.
func open(t *testing.T, url string) *store.DB {
	t.Helper()
	db, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	watchCtx, stop := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); db.APIKeys.Watch(watchCtx) }()
	t.Cleanup(func() { stop(); <-watched })
	return db
}

func keysVersion(t *testing.T, db *store.DB) uint64 {
	t.Helper()
	v, err := db.APIKeys.KeysVersion(ctx)
	if err != nil {
		t.Fatalf("KeysVersion: %v", err)
	}
	return v
}

// settledVersion returns KeysVersion once it holds still. On PostgreSQL the version moves on every call until the
// listener is connected (no cached key is trusted while changes could be missed).
func settledVersion(t *testing.T, db *store.DB) uint64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	prev := keysVersion(t, db)
	for {
		time.Sleep(10 * time.Millisecond)
		v := keysVersion(t, db)
		if v == prev {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("KeysVersion still moving after 5 s (%d → %d)", prev, v)
		}
		prev = v
	}
}

// wantVersionChange fails unless db's KeysVersion differs from before within the dialect's notification delay.
func wantVersionChange(t *testing.T, db *store.DB, before uint64, what string) {
	t.Helper()
	deadline := time.Now().Add(notifyWithin[db.Dialect()])
	for {
		if keysVersion(t, db) != before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("KeysVersion still %d %v after %s", before, notifyWithin[db.Dialect()], what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestKeysVersionSeesARevocationByAnotherProcess(t *testing.T) {
	processes(t, func(t *testing.T, server, cli *store.DB) {
		w := newWorkspace(t, server, "revoked elsewhere")
		_, k := newKey(t, server, w.ID, nil)
		before := settledVersion(t, server)

		if _, err := cli.APIKeys.Revoke(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		wantVersionChange(t, server, before, "a revocation by another process")

		got, err := server.APIKeys.Get(ctx, w.ID, k.ID)
		if err != nil || got.RevokedAt == nil {
			t.Errorf("the server reads %+v, %v after the revocation; want it revoked", got, err)
		}
	})
}

func TestKeysVersionSeesEnabledModelsChangedByAnotherProcess(t *testing.T) {
	processes(t, func(t *testing.T, server, cli *store.DB) {
		w := newWorkspace(t, server, "models changed elsewhere")
		newKey(t, server, w.ID, nil)
		before := settledVersion(t, server)

		if _, err := cli.Workspaces.SetEnabledModels(ctx, w.ID, []string{}); err != nil {
			t.Fatal(err)
		}
		wantVersionChange(t, server, before, "SetEnabledModels by another process")
	})
}

func TestKeysVersionSeesARevocationInTheSameProcess(t *testing.T) {
	processes(t, func(t *testing.T, server, _ *store.DB) {
		w := newWorkspace(t, server, "revoked here")
		_, k := newKey(t, server, w.ID, nil)
		before := settledVersion(t, server)
		if _, err := server.APIKeys.Revoke(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		wantVersionChange(t, server, before, "a revocation by the same process")
	})
}

// Requests read keys all the time; reading must never invalidate the cache.
func TestKeysVersionHoldsStillWhenNothingChanges(t *testing.T) {
	processes(t, func(t *testing.T, server, cli *store.DB) {
		w := newWorkspace(t, server, "quiet")
		secret, k := newKey(t, server, w.ID, nil)
		v := settledVersion(t, server)
		for i := range 5 {
			if _, err := server.APIKeys.ByHash(ctx, secret.Hash); err != nil {
				t.Fatal(err)
			}
			if _, err := cli.APIKeys.Get(ctx, w.ID, k.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := server.Workspaces.List(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
			if got := keysVersion(t, server); got != v {
				t.Fatalf("KeysVersion moved from %d to %d on read %d with nothing written", v, got, i+1)
			}
		}
	})
}

// Writes that do not change what a key may do (last-use times, new workspaces and keys — later clicks and
// deliveries) must not throw away the key cache, or the cache is useless under write load.
func TestKeysVersionIgnoresUnrelatedWrites(t *testing.T) {
	processes(t, func(t *testing.T, server, cli *store.DB) {
		w := newWorkspace(t, server, "busy")
		_, k := newKey(t, server, w.ID, nil)
		v := settledVersion(t, server)
		if err := cli.APIKeys.TouchLastUsed(ctx, map[string]time.Time{k.ID: time.Now()}); err != nil {
			t.Fatal(err)
		}
		newKey(t, cli, newWorkspace(t, cli, "another").ID, nil)
		if got := keysVersion(t, server); got != v {
			t.Errorf("KeysVersion moved from %d to %d on writes that change no access", v, got)
		}
	})
}

// Where changes are announced (PostgreSQL), a process that does not run Watch would miss them: its KeysVersion must
// then never hold still, so no cached key is trusted. Once the watch stops, the same holds again.
func TestKeysVersionMovesWithoutTheWatch(t *testing.T) {
	db, err := store.Open(ctx, storetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	moving := func(when string) {
		t.Helper()
		if a, b := keysVersion(t, db), keysVersion(t, db); a == b {
			t.Errorf("KeysVersion held still (%d) %s", a, when)
		}
	}
	moving("before the watch ran")
	watchCtx, stop := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); db.APIKeys.Watch(watchCtx) }()
	settledVersion(t, db)
	stop()
	<-watched
	moving("after the watch stopped")
}
