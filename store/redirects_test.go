package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// seedLink inserts a link row directly (the redirect and click code reads links; it never creates them), after
// edit adjusted the defaults: an active 302 link on sb.test with a random slug.
func seedLink(t *testing.T, db *store.DB, workspaceID string, edit func(*store.Link)) store.Link {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	id := store.NewID("lnk")
	l := store.Link{
		ID: id, WorkspaceID: workspaceID, Domain: "sb.test", Slug: "s" + id[len(id)-8:],
		DestinationURL: "https://example.com/landing", Tags: []string{}, UTM: map[string]string{},
		RedirectType: 302, ForwardQuery: true, Metadata: map[string]any{}, CreatedAt: now, UpdatedAt: now,
	}
	if edit != nil {
		edit(&l)
	}
	l.SlugKey = store.SlugKey(l.Slug)
	if _, err := db.Bun().NewInsert().Model(&l).Exec(ctx); err != nil {
		t.Fatalf("insert link: %v", err)
	}
	return l
}

func readLink(t *testing.T, db *store.DB, id string) store.Link {
	t.Helper()
	var l store.Link
	if err := db.Bun().NewSelect().Model(&l).Where("id = ?", id).Scan(ctx); err != nil {
		t.Fatalf("read link %s: %v", id, err)
	}
	return l
}

func TestResolveByDomainAndSlugKey(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "resolve")
		l := seedLink(t, db, ws.ID, func(l *store.Link) { l.Slug = "Black-Friday-" + l.ID[20:] })
		got, err := db.Links.Resolve(ctx, store.LinkKey{Domain: "sb.test", SlugKey: store.SlugKey(l.Slug)})
		if err != nil || got.ID != l.ID || got.DestinationURL != l.DestinationURL {
			t.Fatalf("Resolve = %+v, %v", got, err)
		}
		wantTime(t, "created_at", got.CreatedAt, l.CreatedAt)
		for _, k := range []store.LinkKey{
			{Domain: "sb.test", SlugKey: l.Slug}, // the key is the lower-case slug
			{Domain: "other.test", SlugKey: store.SlugKey(l.Slug)},
		} {
			if _, err := db.Links.Resolve(ctx, k); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Resolve(%v) = %v, want ErrNotFound", k, err)
			}
		}
	})
}

// Exactly max_clicks of many concurrent admissions succeed, and the one that reaches the cap emits once.
func TestAdmitClickIsExactUnderConcurrency(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "admit")
		maxClicks := int64(7)
		l := seedLink(t, db, ws.ID, func(l *store.Link) { l.MaxClicks = &maxClicks })
		var admitted, reached atomic.Int64
		var wg sync.WaitGroup
		for range 30 {
			wg.Go(func() {
				ok, err := db.Links.AdmitClick(ctx, l.ID, func(ctx context.Context, tx bun.Tx, got store.Link) error {
					reached.Add(1)
					if got.ID != l.ID || got.AdmittedClicks != maxClicks || got.MaxClicksEventAt == nil {
						t.Errorf("reached with %+v", got)
					}
					_, err := events.NewOutbox(db, events.Builtin()).EmitJSON(ctx, tx, ws.ID, "link.max_clicks_reached", []byte(`{"id":"`+got.ID+`"}`))
					return err
				})
				if err != nil {
					t.Errorf("AdmitClick: %v", err)
				}
				if ok {
					admitted.Add(1)
				}
			})
		}
		wg.Wait()
		if admitted.Load() != maxClicks || reached.Load() != 1 {
			t.Fatalf("admitted %d (want %d), reached called %d times (want 1)", admitted.Load(), maxClicks, reached.Load())
		}
		got := readLink(t, db, l.ID)
		if got.AdmittedClicks != maxClicks || got.MaxClicksEventAt == nil {
			t.Fatalf("link after the cap: admitted %d, event at %v", got.AdmittedClicks, got.MaxClicksEventAt)
		}
		var events int
		if err := db.Bun().NewSelect().Table("events").ColumnExpr("count(*)").
			Where("workspace_id = ? AND type = 'link.max_clicks_reached'", ws.ID).Scan(ctx, &events); err != nil || events != 1 {
			t.Fatalf("%d link.max_clicks_reached events (%v), want 1", events, err)
		}
	})
}

func TestAdmitClickCountsClicksRecordedBeforeTheCap(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "admit later")
		maxClicks := int64(3)
		l := seedLink(t, db, ws.ID, func(l *store.Link) { l.MaxClicks = &maxClicks; l.Clicks = 2 })
		noEvent := func(context.Context, bun.Tx, store.Link) error { return nil }
		for i, want := range []bool{true, false} {
			ok, err := db.Links.AdmitClick(ctx, l.ID, noEvent)
			if err != nil || ok != want {
				t.Fatalf("admission %d = %v, %v; want %v", i+1, ok, err, want)
			}
		}
		uncapped := seedLink(t, db, ws.ID, nil)
		if _, err := db.Links.AdmitClick(ctx, uncapped.ID, noEvent); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("AdmitClick without a cap = %v, want ErrNotFound", err)
		}
		if _, err := db.Links.AdmitClick(ctx, "lnk_missing", noEvent); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("AdmitClick of a missing link = %v, want ErrNotFound", err)
		}
	})
}

// Two notifiers at once announce each expired link exactly once, and never a link that has not expired.
func TestAnnounceExpiredOnce(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "expiry")
		past := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
		future := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
		expired := map[string]bool{}
		for range 12 {
			expired[seedLink(t, db, ws.ID, func(l *store.Link) { l.ExpiresAt = &past }).ID] = true
		}
		later := seedLink(t, db, ws.ID, func(l *store.Link) { l.ExpiresAt = &future })

		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for {
					n, err := db.Links.AnnounceExpired(ctx, time.Now(), 5, func(_ context.Context, _ bun.Tx, l store.Link) error {
						if l.ExpiredEventAt == nil || l.ExpiresAt == nil || l.ExpiresAt.After(time.Now()) {
							t.Errorf("announced %+v", l)
						}
						mu.Lock()
						seen[l.ID]++
						mu.Unlock()
						return nil
					})
					if err != nil {
						t.Errorf("AnnounceExpired: %v", err)
						return
					}
					if n == 0 {
						return
					}
				}
			})
		}
		wg.Wait()
		for id := range expired {
			if seen[id] != 1 {
				t.Errorf("link %s announced %d times", id, seen[id])
			}
		}
		if len(seen) != len(expired) {
			t.Errorf("announced %d links, want %d", len(seen), len(expired))
		}
		if readLink(t, db, later.ID).ExpiredEventAt != nil {
			t.Error("a link that has not expired was announced")
		}
	})
}

// A failing announcement rolls the claim back: the link is announced by the next pass.
func TestAnnounceExpiredRollsBackOnError(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "expiry rollback")
		past := time.Now().Add(-time.Minute).UTC()
		l := seedLink(t, db, ws.ID, func(l *store.Link) { l.ExpiresAt = &past })
		boom := errors.New("boom")
		if _, err := db.Links.AnnounceExpired(ctx, time.Now(), 10, func(context.Context, bun.Tx, store.Link) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("AnnounceExpired = %v, want boom", err)
		}
		if readLink(t, db, l.ID).ExpiredEventAt != nil {
			t.Fatal("expired_event_at set although the announcement failed")
		}
		n, err := db.Links.AnnounceExpired(ctx, time.Now(), 10, func(context.Context, bun.Tx, store.Link) error { return nil })
		if err != nil || n != 1 {
			t.Fatalf("second pass announced %d, %v", n, err)
		}
	})
}

// Watch reports a change committed by another connection (PostgreSQL), and reconnects after losing its connection.
func TestWatchHearsOtherProcesses(t *testing.T) {
	db := storetest.Postgres(t)
	other, err := store.Open(ctx, storetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	changed, connected := watchLinks(t, db)
	await.Receive(t, "the first connection", connected)

	key := store.LinkKey{Domain: "sb.test", SlugKey: "promo"}
	if err := other.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		return other.LinkChanges.Announce(ctx, tx, key)
	}); err != nil {
		t.Fatal(err)
	}
	if got := await.Receive(t, "the change", changed); got != key {
		t.Fatalf("heard %v, want %v", got, key)
	}

	// End the listener's backend: the watch must reconnect and say so.
	terminateListener(t, other, store.LinksChannel)
	await.Receive(t, "the reconnection", connected)
}

// terminateListener ends the backend of every connection of the test database whose last statement was a LISTEN on
// channel (however it is quoted), and fails unless there was one.
func terminateListener(t *testing.T, db *store.DB, channel string) {
	t.Helper()
	var ended []bool
	if err := db.Bun().NewRaw("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "+
		"AND query ILIKE ('listen %' || ? || '%')", channel).Scan(ctx, &ended); err != nil {
		t.Fatal(err)
	}
	if len(ended) == 0 {
		t.Fatalf("no connection listens on %s", channel)
	}
}

func TestWatchOnSQLiteIsConnectedAtOnce(t *testing.T) {
	db := storetest.SQLite(t)
	connected := false
	db.LinkChanges.Watch(ctx, store.LinkWatch{Connected: func() { connected = true }})
	if !connected {
		t.Fatal("Watch on SQLite did not report Connected")
	}
}
