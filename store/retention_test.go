package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// Prune deletes old events batch by batch with their deliveries and attempts, and keeps recent events and old
// events with a pending delivery.
func TestPrune(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "retention")
		newEndpoint(t, db, w.ID, "*")
		age := func(evs ...store.Event) {
			for _, ev := range evs {
				if _, err := db.Bun().NewUpdate().Table("events").Set("created_at = ?", time.Now().Add(-48*time.Hour).UTC().Truncate(time.Microsecond)).
					Where("id = ?", ev.ID).Exec(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		var old []store.Event
		for range 5 {
			ev := emit(t, db, w.ID, "link.created")
			d := deliveriesOf(t, db, ev.ID)[0]
			delivered(t, db, d)
			old = append(old, ev)
		}
		pending := emit(t, db, w.ID, "link.created")
		recent := emit(t, db, w.ID, "link.created")
		age(old...)
		age(pending)

		n, err := db.Events.Prune(ctx, time.Now().Add(-24*time.Hour), 2)
		if err != nil || n < 5 {
			t.Fatalf("pruned %d, %v; want at least the 5 old events", n, err)
		}
		for _, ev := range old {
			if _, err := db.Events.Get(ctx, w.ID, ev.ID); err != store.ErrNotFound {
				t.Errorf("old event %s: %v, want it pruned", ev.ID, err)
			}
		}
		var orphans int64
		orphans, err = db.Bun().NewSelect().Table("webhook_attempts").
			Where("delivery_id NOT IN (SELECT id FROM webhook_deliveries)").Count(ctx)
		if err != nil || orphans != 0 {
			t.Errorf("%d attempts outlived their delivery (%v)", orphans, err)
		}
		for _, ev := range []store.Event{pending, recent} {
			if _, err := db.Events.Get(ctx, w.ID, ev.ID); err != nil {
				t.Errorf("event %s: %v, want it kept", ev.ID, err)
			}
			if len(deliveriesOf(t, db, ev.ID)) != 1 {
				t.Errorf("the delivery of kept event %s is gone", ev.ID)
			}
		}
		if n, err := db.Events.Prune(ctx, time.Now().Add(-24*time.Hour), 2); err != nil || n != 0 {
			t.Errorf("a second prune deleted %d, %v", n, err)
		}
	})
}

// delivered records a successful attempt of a delivery, as the webhook engine does.
func delivered(t *testing.T, db *store.DB, d store.Delivery) {
	t.Helper()
	at := time.Now().UTC().Truncate(time.Microsecond)
	d.Status, d.Attempts, d.NextAttemptAt, d.CompletedAt, d.LastStatusCode = store.DeliverySucceeded, d.Attempts+1, nil, &at, ptr(200)
	if err := db.RunInTx(context.Background(), func(ctx context.Context, tx bun.Tx) error {
		if err := db.Deliveries.UpdateStates(ctx, tx, []store.Delivery{d}); err != nil {
			return err
		}
		return db.Deliveries.LogAttempts(ctx, tx, []store.Attempt{{ID: store.NewID("att"), DeliveryID: d.ID, StartedAt: at,
			StatusCode: ptr(200)}})
	}); err != nil {
		t.Fatal(err)
	}
}
