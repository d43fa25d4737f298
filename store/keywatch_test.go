package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

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

// settledVersion returns KeysVersion once two reads in a row agree. On PostgreSQL the version moves on every call
// until the listener is connected (no cached key is trusted while changes could be missed).
func settledVersion(t *testing.T, db *store.DB) uint64 {
	t.Helper()
	prev := keysVersion(t, db)
	return await.Until(t, "KeysVersion to hold still", func() uint64 { return keysVersion(t, db) }, func(v uint64) bool {
		settled := v == prev
		prev = v
		return settled
	})
}

// wantVersionChange fails unless db's KeysVersion differs from before: on SQLite at once (the next read sees
// PRAGMA data_version move), on PostgreSQL as soon as the notification arrives (it is asynchronous).
func wantVersionChange(t *testing.T, db *store.DB, before uint64, what string) {
	t.Helper()
	if db.Dialect() == store.SQLite {
		if keysVersion(t, db) == before {
			t.Fatalf("KeysVersion still %d after %s", before, what)
		}
		return
	}
	await.Until(t, "KeysVersion to move after "+what, func() uint64 { return keysVersion(t, db) },
		func(v uint64) bool { return v != before })
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
		announced := listenForAccessChanges(t, server)
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
			if got := keysVersion(t, server); got != v {
				t.Fatalf("KeysVersion moved from %d to %d on read %d with nothing written", v, got, i+1)
			}
		}
		announced.wantNone(t, cli, "reads")
	})
}

// Writes that do not change what a key may do (last-use times, new workspaces and keys — later clicks and
// deliveries) must not throw away the key cache, or the cache is useless under write load.
func TestKeysVersionIgnoresUnrelatedWrites(t *testing.T) {
	processes(t, func(t *testing.T, server, cli *store.DB) {
		w := newWorkspace(t, server, "busy")
		_, k := newKey(t, server, w.ID, nil)
		v := settledVersion(t, server)
		announced := listenForAccessChanges(t, server)
		if err := cli.APIKeys.TouchLastUsed(ctx, map[string]time.Time{k.ID: time.Now()}); err != nil {
			t.Fatal(err)
		}
		newKey(t, cli, newWorkspace(t, cli, "another").ID, nil)
		if got := keysVersion(t, server); got != v {
			t.Errorf("KeysVersion moved from %d to %d on writes that change no access", v, got)
		}
		announced.wantNone(t, cli, "writes that change no access")
	})
}

// accessChanges hears what is announced on the PostgreSQL channel that key changes are announced on
// ("switchboard_access"). It is how a test asserts that nothing was announced, which KeysVersion alone cannot show
// on PostgreSQL: a notification moves it only when it arrives, asynchronously.
type accessChanges struct {
	heard chan string // nil on SQLite, where KeysVersion reads the database and sees every change at once
}

// listenForAccessChanges listens from now until the test ends (on PostgreSQL; on SQLite it does nothing).
func listenForAccessChanges(t *testing.T, db *store.DB) accessChanges {
	t.Helper()
	if db.Dialect() != store.Postgres {
		return accessChanges{}
	}
	heard, connected := make(chan string, 64), make(chan struct{}, 1)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.Listen(lctx, store.Listener{Channel: "switchboard_access",
			Connected: func() {
				select {
				case connected <- struct{}{}:
				default: // a reconnection: the test waits for the first connection only
				}
			},
			Notified: func(payload string) {
				select {
				case heard <- payload:
				case <-lctx.Done():
				}
			},
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	await.Receive(t, "the test's listener", connected)
	return accessChanges{heard: heard}
}

// wantNone fails t if anything was announced since listening began. The proof is positive: db notifies a barrier
// now, and PostgreSQL delivers a channel's notifications in commit order, so once the barrier is heard, anything
// announced before it has been heard too.
func (a accessChanges) wantNone(t *testing.T, db *store.DB, since string) {
	t.Helper()
	if a.heard == nil {
		return
	}
	const barrier = "test barrier"
	if _, err := db.Bun().ExecContext(ctx, "SELECT pg_notify('switchboard_access', ?)", barrier); err != nil {
		t.Fatal(err)
	}
	if got := await.Receive(t, "the barrier notification", a.heard); got != barrier {
		t.Fatalf("a change was announced after %s (payload %q)", since, got)
	}
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
