package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// setDelivery puts a delivery in a state the dispatcher would have left it in.
func setDelivery(t *testing.T, db *store.DB, id, status string, attempts int, createdAt time.Time) {
	t.Helper()
	q := db.Bun().NewUpdate().Table("webhook_deliveries").Set("status = ?", status).Set("attempts = ?", attempts).
		Set("created_at = ?", createdAt.UTC().Truncate(time.Microsecond)).Where("id = ?", id)
	if status != store.DeliveryPending {
		q = q.Set("next_attempt_at = NULL").Set("completed_at = ?", createdAt.UTC().Add(time.Minute).Truncate(time.Microsecond))
	}
	if _, err := q.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

func deliveryIDs(ds []store.Delivery) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}

// requeued checks a delivery was queued again with a fresh schedule, keeping its attempts.
func requeued(t *testing.T, d store.Delivery, attempts int, before time.Time) {
	t.Helper()
	if d.Status != store.DeliveryPending || d.Attempts != attempts || d.ScheduleStart != attempts ||
		d.LeaseUntil != nil || d.CompletedAt != nil || d.NextAttemptAt == nil {
		t.Fatalf("not queued afresh: %+v", d)
	}
	recent(t, "next_attempt_at", *d.NextAttemptAt, before)
	recent(t, "updated_at", d.UpdatedAt, before)
}

func TestDeliveryLogList(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "log")
		e := newEndpoint(t, db, w.ID, "*")
		newEndpoint(t, db, w.ID, "*") // its deliveries are not in e's log
		var ids []string
		for _, typ := range []string{"link.created", "link.deleted", "link.created"} {
			ev := emit(t, db, w.ID, typ)
			for _, d := range deliveriesOf(t, db, ev.ID) {
				if d.EndpointID == e.ID {
					ids = append(ids, d.ID)
				}
			}
		}
		setDelivery(t, db, ids[0], store.DeliveryFailed, 10, time.Now())

		all, more, err := db.Deliveries.List(ctx, w.ID, e.ID, store.DeliveryFilter{}, store.Page{Limit: 2})
		if err != nil || !more {
			t.Fatalf("first page: %v %v", more, err)
		}
		sameIDs(t, "first page", deliveryIDs(all), []string{ids[2], ids[1]})
		rest, more, _ := db.Deliveries.List(ctx, w.ID, e.ID, store.DeliveryFilter{}, store.Page{Limit: 2, Before: ids[1]})
		sameIDs(t, "second page", deliveryIDs(rest), ids[:1])
		if more {
			t.Error("more after the last page")
		}
		created, _, _ := db.Deliveries.List(ctx, w.ID, e.ID, store.DeliveryFilter{EventType: "link.created"}, store.Page{Limit: 20})
		sameIDs(t, "by event type", deliveryIDs(created), []string{ids[2], ids[0]})
		failed, _, _ := db.Deliveries.List(ctx, w.ID, e.ID, store.DeliveryFilter{Status: store.DeliveryFailed}, store.Page{Limit: 20})
		sameIDs(t, "by status", deliveryIDs(failed), ids[:1])
		both, _, _ := db.Deliveries.List(ctx, w.ID, e.ID, store.DeliveryFilter{Status: store.DeliveryPending, EventType: "link.created"}, store.Page{Limit: 20})
		sameIDs(t, "by both", deliveryIDs(both), ids[2:])

		if _, _, err := db.Deliveries.List(ctx, newWorkspace(t, db, "other").ID, e.ID, store.DeliveryFilter{}, store.Page{Limit: 20}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("another workspace's endpoint: %v", err)
		}
	})
}

func TestRedeliver(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w, e, d := claimOne(t, db)
		setDelivery(t, db, d.ID, store.DeliveryFailed, 10, time.Now().Add(-48*time.Hour))
		before := time.Now()
		got, err := db.Deliveries.Redeliver(ctx, w.ID, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		requeued(t, got, 10, before)
		if got.ID != d.ID || got.EventID != d.EventID {
			t.Errorf("redelivery is another delivery: %+v", got)
		}
		stored, _ := db.Deliveries.Get(ctx, w.ID, d.ID)
		requeued(t, stored, 10, before)

		// Pending and due again: a second redelivery just restarts it.
		if _, err := db.Deliveries.Redeliver(ctx, w.ID, d.ID); err != nil {
			t.Errorf("redeliver a pending delivery: %v", err)
		}
		if _, err := db.Bun().NewUpdate().Table("webhook_deliveries").Set("lease_until = ?", time.Now().Add(time.Minute)).
			Where("id = ?", d.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Deliveries.Redeliver(ctx, w.ID, d.ID); !errors.Is(err, store.ErrDeliveryInFlight) || !errors.Is(err, store.ErrConflict) {
			t.Errorf("redeliver a leased delivery: %v", err)
		}
		if _, err := db.Bun().NewUpdate().Table("webhook_deliveries").Set("lease_until = ?", time.Now().Add(-time.Minute)).
			Where("id = ?", d.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Deliveries.Redeliver(ctx, w.ID, d.ID); err != nil {
			t.Errorf("redeliver a delivery whose lease ran out: %v", err)
		}

		if _, err := db.Deliveries.Redeliver(ctx, newWorkspace(t, db, "other").ID, d.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("redeliver from another workspace: %v", err)
		}
		if _, err := db.Bun().NewUpdate().Table("webhook_endpoints").Set("status = ?", store.EndpointDisabled).
			Set("disabled_reason = 'failing'").Where("id = ?", e.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		var de *store.EndpointDisabledError
		if _, err := db.Deliveries.Redeliver(ctx, w.ID, d.ID); !errors.As(err, &de) || de.Reason != "failing" || de.EndpointID != e.ID {
			t.Errorf("redeliver to a disabled endpoint: %v", err)
		}
	})
}

// recoverFixture is an endpoint with one delivery of each kind, two days old, and a failed one older than the window.
type recoverFixture struct {
	w                                        store.Workspace
	e                                        store.WebhookEndpoint
	failed, skipped, pending, succeeded, old string
	at                                       time.Time
}

func newRecoverFixture(t *testing.T, db *store.DB) recoverFixture {
	t.Helper()
	f := recoverFixture{w: newWorkspace(t, db, "recover"), at: time.Now().Add(-48 * time.Hour)}
	f.e = newEndpoint(t, db, f.w.ID, "*")
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = deliveriesOf(t, db, emit(t, db, f.w.ID, "link.created").ID)[0].ID
	}
	f.failed, f.skipped, f.pending, f.succeeded, f.old = ids[0], ids[1], ids[2], ids[3], ids[4]
	setDelivery(t, db, f.failed, store.DeliveryFailed, 10, f.at)
	setDelivery(t, db, f.skipped, store.DeliverySkipped, 0, f.at.Add(time.Hour))
	setDelivery(t, db, f.pending, store.DeliveryPending, 2, f.at)
	setDelivery(t, db, f.succeeded, store.DeliverySucceeded, 1, f.at)
	setDelivery(t, db, f.old, store.DeliveryFailed, 10, f.at.Add(-time.Hour))
	return f
}

func (f recoverFixture) status(t *testing.T, db *store.DB) map[string]string {
	t.Helper()
	ds, _, err := db.Deliveries.List(ctx, f.w.ID, f.e.ID, store.DeliveryFilter{}, store.Page{Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range ds {
		out[d.ID] = d.Status
	}
	return out
}

func TestRecover(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		f := newRecoverFixture(t, db)
		before := time.Now()
		// The window ends just before the skipped delivery: [since, until) leaves it out.
		n, err := db.Deliveries.Recover(ctx, f.w.ID, f.e.ID, f.at, f.at.Add(time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("recover: %d, %v", n, err)
		}
		got, _ := db.Deliveries.Get(ctx, f.w.ID, f.failed)
		requeued(t, got, 10, before)
		want := map[string]string{f.failed: store.DeliveryPending, f.skipped: store.DeliverySkipped,
			f.pending: store.DeliveryPending, f.succeeded: store.DeliverySucceeded, f.old: store.DeliveryFailed}
		if st := f.status(t, db); len(st) != len(want) {
			t.Fatalf("statuses %v", st)
		} else {
			for id, s := range want {
				if st[id] != s {
					t.Errorf("%s: %s, want %s", id, st[id], s)
				}
			}
		}
		if p, _ := db.Deliveries.Get(ctx, f.w.ID, f.pending); p.Attempts != 2 || p.ScheduleStart != 0 {
			t.Errorf("a pending delivery was touched: %+v", p)
		}

		if _, err := db.Deliveries.Recover(ctx, newWorkspace(t, db, "other").ID, f.e.ID, f.at, time.Now()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("recover from another workspace: %v", err)
		}
		if _, err := db.Bun().NewUpdate().Table("webhook_endpoints").Set("status = ?", store.EndpointDisabled).
			Set("disabled_reason = 'gone'").Where("id = ?", f.e.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		var de *store.EndpointDisabledError
		if _, err := db.Deliveries.Recover(ctx, f.w.ID, f.e.ID, f.at, time.Now()); !errors.As(err, &de) || de.Reason != "gone" {
			t.Errorf("recover a disabled endpoint: %v", err)
		}
		if st := f.status(t, db); st[f.skipped] != store.DeliverySkipped {
			t.Error("a refused recovery queued deliveries")
		}
	})
}

// Enabling with a recovery queues what was missed in the same transaction.
func TestEnableRecovers(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		f := newRecoverFixture(t, db)
		if _, err := db.Bun().NewUpdate().Table("webhook_endpoints").Set("status = ?", store.EndpointDisabled).
			Set("disabled_reason = 'gone'").Where("id = ?", f.e.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		e, n, err := db.Webhooks.Enable(ctx, f.w.ID, f.e.ID, &f.at)
		if err != nil || n != 2 || e.Status != store.EndpointActive {
			t.Fatalf("enable: %+v, %d, %v", e, n, err)
		}
		st := f.status(t, db)
		if st[f.failed] != store.DeliveryPending || st[f.skipped] != store.DeliveryPending || st[f.old] != store.DeliveryFailed ||
			st[f.succeeded] != store.DeliverySucceeded {
			t.Errorf("after enable: %v", st)
		}
		got, _ := db.Deliveries.Get(ctx, f.w.ID, f.skipped)
		requeued(t, got, 0, before)
	})
}
