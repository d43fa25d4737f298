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

// settledVersion returns KeysVersion once two reads in a row agree: the version of a database nothing is changing.
func settledVersion(t *testing.T, db *store.DB) uint64 {
	t.Helper()
	prev := keysVersion(t, db)
	return await.Until(t, "KeysVersion to hold still", func() uint64 { return keysVersion(t, db) }, func(v uint64) bool {
		settled := v == prev
		prev = v
		return settled
	})
}

// wantVersionChange fails unless db's KeysVersion differs from before at the next call: both databases read the
// change itself, not an announcement of it that may still be on its way.
func wantVersionChange(t *testing.T, db *store.DB, before uint64, what string) {
	t.Helper()
	if got := keysVersion(t, db); got == before {
		t.Fatalf("KeysVersion still %d after %s", before, what)
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
// ("switchboard_access"), for a test to assert that nothing was announced as well as nothing changed: listeners
// outside the key cache may follow the channel.
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

// KeysVersion reads the database's own record of access changes on both databases, so it needs no watch running to
// be right: without one it holds still while nothing changes and moves at the first call after a change. Concurrent
// calls (which share reads on PostgreSQL) started after a revocation returned all see it.
func TestKeysVersionNeedsNoWatch(t *testing.T) {
	run := func(t *testing.T, url string) {
		server, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = server.Close() })
		cli := open(t, url) // migrates
		w := newWorkspace(t, cli, "no watch")
		_, k := newKey(t, cli, w.ID, nil)
		before := keysVersion(t, server)
		if again := keysVersion(t, server); again != before {
			t.Fatalf("KeysVersion moved from %d to %d with nothing written", before, again)
		}
		if _, err := cli.APIKeys.Revoke(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		const callers = 16
		got := make(chan uint64, callers)
		for range callers {
			go func() {
				v, err := server.APIKeys.KeysVersion(ctx)
				if err != nil {
					t.Error(err)
				}
				got <- v
			}()
		}
		for range callers {
			if v := <-got; v == before {
				t.Errorf("a KeysVersion call made after the revocation returned answered %d, as before it", v)
			}
		}
	}
	t.Run("sqlite", func(t *testing.T) { run(t, storetest.SQLiteURL(t)) })
	t.Run("postgres", func(t *testing.T) { run(t, storetest.PostgresURL(t)) })
}
