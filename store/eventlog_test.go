package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// readAll reads a workspace's settled events after a position, page by page.
func readAll(t *testing.T, db *store.DB, workspaceID string, after store.EventPosition) []store.PositionedEvent {
	t.Helper()
	var out []store.PositionedEvent
	for {
		evs, _, err := db.Events.ReadEvents(ctx, workspaceID, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, evs...)
		if len(evs) < 2 {
			return out
		}
		after = evs[len(evs)-1].Position
	}
}

func ids(evs []store.PositionedEvent) []string {
	plain := make([]store.Event, len(evs))
	for i, ev := range evs {
		plain[i] = ev.Event
	}
	return eventIDs(plain)
}

// The log reads in commit order, each event once, and a reader resumes after any event's position; the newest
// events' places are never given again once they are deleted.
func TestEventLogReadsInCommitOrder(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "log")
		var want []string
		for _, typ := range []string{"a.one", "a.two", "a.three", "a.four", "a.five"} {
			want = append(want, emit(t, db, w.ID, typ).ID)
		}
		// On PostgreSQL the log is read up to the oldest transaction running anywhere on the server (another test's
		// among them): the events show once it ended.
		var got []store.PositionedEvent
		await.Equal(t, "the five events", func() int { got = readAll(t, db, w.ID, store.EventPosition{}); return len(got) }, 5)
		if g := ids(got); g[0] != want[0] || g[4] != want[4] {
			t.Fatalf("read %v, want %v", g, want)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Position.Compare(got[i-1].Position) <= 0 {
				t.Fatalf("positions not increasing: %+v then %+v", got[i-1].Position, got[i].Position)
			}
		}
		p, err := db.Events.PositionOf(ctx, w.ID, want[2])
		if err != nil || p != got[2].Position {
			t.Fatalf("PositionOf = %+v, %v; want %+v", p, err, got[2].Position)
		}
		if rest := ids(readAll(t, db, w.ID, p)); len(rest) != 2 || rest[0] != want[3] {
			t.Fatalf("after the third: %v", rest)
		}
		if _, err := db.Events.PositionOf(ctx, newWorkspace(t, db, "other").ID, want[2]); err != store.ErrNotFound {
			t.Fatalf("PositionOf in another workspace: %v, want ErrNotFound", err)
		}
		last, err := db.Events.LastPosition(ctx)
		if err != nil || last.Compare(got[4].Position) < 0 {
			t.Fatalf("LastPosition = %+v, %v; want at least %+v", last, err, got[4].Position)
		}

		// Deleting the newest events does not let a new one take their place.
		if _, err := db.Bun().NewDelete().TableExpr("events").Where("id IN (?)", bun.In(want[3:])).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		next := emit(t, db, w.ID, "a.six")
		var after []string
		await.Equal(t, "the event after the deleted ones", func() int { after = ids(readAll(t, db, w.ID, got[4].Position)); return len(after) }, 1)
		if after[0] != next.ID {
			t.Fatalf("after the deleted newest event: %v, want [%s]", after, next.ID)
		}
	})
}

// On PostgreSQL a transaction that wrote an event first and commits last holds back the events committed after it
// began: a reader never sees the later event before the earlier one, so it cannot resume past it and miss it.
func TestEventLogHoldsBackEventsOfLaterTransactions(t *testing.T) {
	db := storetest.Postgres(t)
	w := newWorkspace(t, db, "late commit")
	before := emit(t, db, w.ID, "a.before")

	first := store.Event{ID: store.NewID("evt"), WorkspaceID: w.ID, Type: "a.first", Data: []byte(`{}`),
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	inserted, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
			if err := db.Events.Insert(ctx, tx, []store.Event{first}, nil); err != nil {
				return err
			}
			close(inserted)
			<-release
			return nil
		})
	}()
	<-inserted
	second := emit(t, db, w.ID, "a.second") // committed while first's transaction runs

	// The horizon is the server's: a transaction of another database (other tests share the server) may hold back
	// even the event committed before, for as long as it runs. What must never show is first or second.
	var evs []store.PositionedEvent
	var heldBack bool
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if evs, heldBack, err = db.Events.ReadEvents(ctx, w.ID, store.EventPosition{}, 100); err != nil {
			t.Fatal(err)
		}
		if len(evs) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if g := ids(evs); len(g) != 1 || g[0] != before.ID || !heldBack {
		t.Fatalf("while the first transaction runs: %v (held back %v), want only %s and the rest held back", g, heldBack, before.ID)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Other databases' transactions on the same server can hold the horizon a moment longer.
	var got []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = ids(readAll(t, db, w.ID, evs[0].Position)); len(got) == 2 {
			break
		}
	}
	if len(got) != 2 || got[0] != first.ID || got[1] != second.ID {
		t.Fatalf("after the first transaction committed: %v, want [%s %s]", got, first.ID, second.ID)
	}
}
