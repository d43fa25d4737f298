package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func ptr[T any](v T) *T { return &v }

// claimOne queues one event for a new endpoint and claims its delivery.
func claimOne(t *testing.T, db *store.DB) (store.Workspace, store.WebhookEndpoint, store.Delivery) {
	t.Helper()
	w := newWorkspace(t, db, "attempts")
	e := newEndpoint(t, db, w.ID, "*")
	ev := emit(t, db, w.ID, "link.created")
	d := deliveriesOf(t, db, ev.ID)[0]
	return w, e, d
}

func TestRecordAttemptLifecycle(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w, e, d := claimOne(t, db)
		start := time.Now()

		next := start.Add(5 * time.Second)
		fx, err := db.Deliveries.RecordAttempt(ctx, store.AttemptResult{DeliveryID: d.ID, StartedAt: start,
			Duration: 120 * time.Millisecond, StatusCode: ptr(503), ErrorClass: ptr("http_5xx"), Excerpt: ptr("busy"),
			NextAttemptAt: &next}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if fx.Delivery.Status != store.DeliveryPending || fx.Delivery.Attempts != 1 || fx.Exhausted || fx.EndpointDisabled != "" {
			t.Fatalf("after a retryable failure: %+v", fx)
		}
		got, _ := db.Deliveries.Get(ctx, w.ID, d.ID)
		if got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(next.UTC().Truncate(time.Microsecond)) || got.LeaseUntil != nil {
			t.Errorf("retry not scheduled or lease kept: %+v", got)
		}
		endpoint, _ := db.Webhooks.Get(ctx, w.ID, e.ID)
		if endpoint.FailingSince == nil {
			t.Error("the endpoint's run of failures was not recorded")
		}

		fx, err = db.Deliveries.RecordAttempt(ctx, store.AttemptResult{DeliveryID: d.ID, StartedAt: time.Now(),
			StatusCode: ptr(200), Succeeded: true}, nil)
		if err != nil || fx.Delivery.Status != store.DeliverySucceeded || fx.Delivery.CompletedAt == nil || fx.Delivery.Attempts != 2 {
			t.Fatalf("after a success: %+v, %v", fx, err)
		}
		endpoint, _ = db.Webhooks.Get(ctx, w.ID, e.ID)
		if endpoint.FailingSince != nil {
			t.Error("a success must end the run of failures")
		}
		attempts, err := db.Deliveries.Attempts(ctx, d.ID)
		if err != nil || len(attempts) != 2 || *attempts[0].StatusCode != 503 || *attempts[0].ResponseExcerpt != "busy" ||
			attempts[0].DurationMS != 120 {
			t.Errorf("attempt log %+v, %v", attempts, err)
		}
	})
}

func TestRecordAttemptExhaustedAndGone(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		_, _, d := claimOne(t, db)
		fx, err := db.Deliveries.RecordAttempt(ctx, store.AttemptResult{DeliveryID: d.ID, StartedAt: time.Now(),
			StatusCode: ptr(500)}, nil)
		if err != nil || fx.Delivery.Status != store.DeliveryFailed || !fx.Exhausted {
			t.Fatalf("no retry left: %+v, %v", fx, err)
		}

		w, e, d := claimOne(t, db)
		next := time.Now().Add(time.Minute)
		fx, err = db.Deliveries.RecordAttempt(ctx, store.AttemptResult{DeliveryID: d.ID, StartedAt: time.Now(),
			StatusCode: ptr(410), Gone: true, NextAttemptAt: &next}, nil)
		if err != nil || fx.EndpointDisabled != "gone" || fx.Delivery.Status != store.DeliveryFailed {
			t.Fatalf("410: %+v, %v", fx, err)
		}
		endpoint, _ := db.Webhooks.Get(ctx, w.ID, e.ID)
		if endpoint.Status != store.EndpointDisabled || endpoint.DisabledReason == nil || *endpoint.DisabledReason != "gone" {
			t.Errorf("endpoint after 410: %+v", endpoint)
		}
	})
}

func TestRecordAttemptDisablesAfterLongFailure(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w, e, d := claimOne(t, db)
		next := time.Now().Add(time.Minute)
		started := time.Now().Add(-6 * 24 * time.Hour) // the run of failures began six days ago
		fx, err := db.Deliveries.RecordAttempt(ctx, store.AttemptResult{DeliveryID: d.ID, StartedAt: started,
			ErrorClass: ptr("timeout"), NextAttemptAt: &next, DisableAfter: 5 * 24 * time.Hour}, nil)
		if err != nil || fx.EndpointDisabled != "failing" {
			t.Fatalf("%+v, %v", fx, err)
		}
		endpoint, _ := db.Webhooks.Get(ctx, w.ID, e.ID)
		if endpoint.Status != store.EndpointDisabled {
			t.Errorf("endpoint %+v", endpoint)
		}
	})
}

// What the callback writes commits with the attempt, or neither does.
func TestRecordAttemptCallbackIsAtomic(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w, _, d := claimOne(t, db)
		boom := errors.New("boom")
		_, err := db.Deliveries.RecordAttempt(ctx, store.AttemptResult{DeliveryID: d.ID, StartedAt: time.Now(), Succeeded: true},
			func(context.Context, bun.Tx, store.AttemptEffects) error { return boom })
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		got, _ := db.Deliveries.Get(ctx, w.ID, d.ID)
		if got.Status != store.DeliveryPending || got.Attempts != 0 {
			t.Errorf("a failed callback left %+v", got)
		}
		if as, _ := db.Deliveries.Attempts(ctx, d.ID); len(as) != 0 {
			t.Errorf("a failed callback left %d attempts", len(as))
		}
		if _, err := db.Deliveries.RecordAttempt(ctx, store.AttemptResult{DeliveryID: "dlv_missing", StartedAt: time.Now()}, nil); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing delivery: %v", err)
		}
	})
}

// queue emits n events to a workspace with one endpoint and returns their deliveries' IDs in order.
func queue(t *testing.T, db *store.DB, workspaceID string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = deliveriesOf(t, db, emit(t, db, workspaceID, "link.created").ID)[0].ID
	}
	return ids
}

// claimOf claims at a time and returns the IDs of the claimed deliveries of one endpoint, in claim order
// (PostgreSQL is shared with other tests' deliveries).
func claimOf(t *testing.T, db *store.DB, endpointID string, at time.Time, lease time.Duration, limit int) []string {
	t.Helper()
	ds, err := db.Deliveries.Claim(context.Background(), at, lease, limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range ds {
		if d.EndpointID == endpointID {
			ids = append(ids, d.ID)
		}
	}
	return ids
}

// Deliveries due at the same instant are claimed in the order they were queued, which is event order.
func TestClaimOrder(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "order")
		e := newEndpoint(t, db, w.ID, "*")
		ids := queue(t, db, w.ID, 6)
		// Same due time for all, and the later ones due first by ID order only.
		due := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
		if _, err := db.Bun().NewUpdate().Table("webhook_deliveries").Set("next_attempt_at = ?", due).
			Where("endpoint_id = ?", e.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		var got []string
		for range 3 {
			got = append(got, claimOf(t, db, e.ID, time.Now(), time.Minute, 2)...)
		}
		if strings.Join(got, ",") != strings.Join(ids, ",") {
			t.Errorf("claimed in the order %v, want %v", got, ids)
		}
	})
}

// ForSending loads the endpoints and events of a claim at once.
func TestForSending(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "sending")
		a, b := newEndpoint(t, db, w.ID, "*"), newEndpoint(t, db, w.ID, "*")
		ev1, ev2 := emit(t, db, w.ID, "link.created"), emit(t, db, w.ID, "link.deleted")
		ds := append(deliveriesOf(t, db, ev1.ID), deliveriesOf(t, db, ev2.ID)...)
		endpoints, events, err := db.Deliveries.ForSending(ctx, ds)
		if err != nil {
			t.Fatal(err)
		}
		if len(endpoints) != 2 || endpoints[a.ID].Secret != a.Secret || endpoints[b.ID].URL != b.URL {
			t.Errorf("endpoints %+v", endpoints)
		}
		if len(events) != 2 || events[ev1.ID].Type != "link.created" || events[ev2.ID].WorkspaceID != w.ID {
			t.Errorf("events %+v", events)
		}
	})
}

// A batch records every attempt in one transaction, skipping deliveries deleted meanwhile; an attempt whose lease
// was taken over by another dispatcher is logged without touching the delivery.
func TestRecordAttemptsBatch(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "batch")
		e := newEndpoint(t, db, w.ID, "*")
		ids := queue(t, db, w.ID, 3)
		claimed, err := db.Deliveries.Claim(ctx, time.Now().Add(time.Second), time.Minute, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		lease := map[string]*time.Time{}
		for _, d := range claimed {
			lease[d.ID] = d.LeaseUntil
		}
		// The third delivery's lease ran out and another dispatcher claimed it.
		if err := db.Deliveries.Release(ctx, ids[2:], time.Time{}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Deliveries.Claim(ctx, time.Now().Add(5*time.Second), time.Minute, 100, nil); err != nil {
			t.Fatal(err)
		}
		var calls int
		fxs, err := db.Deliveries.RecordAttempts(ctx, []store.AttemptResult{
			{DeliveryID: ids[0], LeaseUntil: lease[ids[0]], StartedAt: time.Now(), StatusCode: ptr(200), Succeeded: true},
			{DeliveryID: "dlv_deleted", StartedAt: time.Now(), Succeeded: true},
			{DeliveryID: ids[2], LeaseUntil: lease[ids[2]], StartedAt: time.Now(), StatusCode: ptr(200), Succeeded: true},
		}, func(context.Context, bun.Tx, store.AttemptEffects) error { calls++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if len(fxs) != 3 || fxs[0].Delivery.Status != store.DeliverySucceeded || !fxs[1].Missing || !fxs[2].Superseded {
			t.Fatalf("effects %+v", fxs)
		}
		if calls != 1 {
			t.Errorf("the callback ran %d times, want once (for the one recorded attempt)", calls)
		}
		taken, _ := db.Deliveries.Get(ctx, w.ID, ids[2])
		if taken.Status != store.DeliveryPending || taken.Attempts != 0 || taken.LeaseUntil == nil {
			t.Errorf("a superseded attempt changed the delivery: %+v", taken)
		}
		if as, _ := db.Deliveries.Attempts(ctx, ids[2]); len(as) != 1 {
			t.Errorf("the superseded attempt is not in the log: %d attempts", len(as))
		}
		if endpoint, _ := db.Webhooks.Get(ctx, w.ID, e.ID); endpoint.FailingSince != nil {
			t.Errorf("endpoint %+v", endpoint)
		}
	})
}

// Released deliveries are due again at once, or not before the time given.
func TestRelease(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "release")
		e := newEndpoint(t, db, w.ID, "*")
		a := deliveriesOf(t, db, emit(t, db, w.ID, "link.created").ID)[0]
		b := deliveriesOf(t, db, emit(t, db, w.ID, "link.created").ID)[0]
		now := time.Now().Add(time.Second)
		if _, err := db.Deliveries.Claim(ctx, now, time.Hour, 100, nil); err != nil {
			t.Fatal(err)
		}
		if err := db.Deliveries.Release(ctx, []string{a.ID}, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := db.Deliveries.Release(ctx, []string{b.ID}, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got := claimOf(t, db, e.ID, now, time.Hour, 100); len(got) != 1 || got[0] != a.ID {
			t.Errorf("claimable at once: %v, want only %s", got, a.ID)
		}
		if got := claimOf(t, db, e.ID, now.Add(time.Minute), time.Hour, 100); len(got) != 1 || got[0] != b.ID {
			t.Errorf("claimable after the delay: %v, want %s", got, b.ID)
		}
	})
}

// QueueStats counts pending deliveries and dates the oldest due one of an active endpoint.
func TestQueueStats(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		before, err := db.Deliveries.QueueStats(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		w := newWorkspace(t, db, "stats")
		active, paused := newEndpoint(t, db, w.ID, "*"), newEndpoint(t, db, w.ID, "*")
		if err := db.Webhooks.SetStatus(ctx, w.ID, paused.ID, store.EndpointPaused, nil); err != nil {
			t.Fatal(err)
		}
		ev := emit(t, db, w.ID, "link.created")
		// Long before anything other tests (sharing PostgreSQL) leave due.
		due := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
		if _, err := db.Bun().NewUpdate().Table("webhook_deliveries").Set("next_attempt_at = ?", due.Add(-time.Hour)).
			Where("event_id = ? AND endpoint_id = ?", ev.ID, paused.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Bun().NewUpdate().Table("webhook_deliveries").Set("next_attempt_at = ?", due).
			Where("event_id = ? AND endpoint_id = ?", ev.ID, active.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := db.Deliveries.QueueStats(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if st.Pending != before.Pending+2 {
			t.Errorf("pending %d, want %d", st.Pending, before.Pending+2)
		}
		if st.OldestDue == nil || !st.OldestDue.Equal(due) {
			t.Errorf("oldest due %v, want %v (the paused endpoint's older delivery left out)", st.OldestDue, due)
		}
	})
}

// Failed attempts to one endpoint in one batch are all recorded, judged in order: the first starts the endpoint's
// run of failures, the one that crosses its limit disables the endpoint, and the later ones find it disabled.
func TestRecordAttemptsFailuresOfOneEndpoint(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "failing batch")
		e := newEndpoint(t, db, w.ID, "*")
		ids := queue(t, db, w.ID, 4)
		next := time.Now().Add(time.Minute)
		started := time.Now().Add(-6 * 24 * time.Hour).UTC().Truncate(time.Microsecond)
		fail := func(id string, disableAfter time.Duration) store.AttemptResult {
			return store.AttemptResult{DeliveryID: id, StartedAt: started, ErrorClass: ptr("timeout"), NextAttemptAt: &next,
				DisableAfter: disableAfter}
		}
		var disabledBy []string
		fxs, err := db.Deliveries.RecordAttempts(ctx, []store.AttemptResult{
			fail(ids[0], 0),              // starts the run of failures, six days ago; no limit
			fail(ids[1], 7*24*time.Hour), // within its limit
			fail(ids[2], 5*24*time.Hour), // crosses its limit
			fail(ids[3], 5*24*time.Hour), // the endpoint is disabled already
		}, func(_ context.Context, _ bun.Tx, fx store.AttemptEffects) error {
			if fx.EndpointDisabled != "" {
				disabledBy = append(disabledBy, fx.Delivery.ID)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, fx := range fxs {
			want := ""
			if i == 2 {
				want = "failing"
			}
			if fx.EndpointDisabled != want || fx.Delivery.Status != store.DeliveryPending || fx.Delivery.Attempts != 1 {
				t.Errorf("attempt %d: %+v, want disabled %q", i, fx, want)
			}
		}
		if fx := fxs[2]; fx.EndpointURL != e.URL || fx.FailingSince == nil || !fx.FailingSince.Equal(started) {
			t.Errorf("the disabling attempt's effects %+v, want the run of failures from %v", fx, started)
		}
		if len(disabledBy) != 1 || disabledBy[0] != ids[2] {
			t.Errorf("the endpoint was disabled by %v, want once, by %s", disabledBy, ids[2])
		}
		for _, id := range ids {
			if as, err := db.Deliveries.Attempts(ctx, id); err != nil || len(as) != 1 {
				t.Errorf("delivery %s: %d attempts logged (%v), want 1", id, len(as), err)
			}
		}
		endpoint, err := db.Webhooks.Get(ctx, w.ID, e.ID)
		if err != nil || endpoint.Status != store.EndpointDisabled || endpoint.DisabledReason == nil ||
			*endpoint.DisabledReason != "failing" || endpoint.FailingSince == nil || !endpoint.FailingSince.Equal(started) {
			t.Errorf("endpoint %+v, %v", endpoint, err)
		}
	})
}

// The first result of a delivery releases its lease, so a second result of the same claim in the batch is only
// logged.
func TestRecordAttemptsSameDeliveryTwice(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "twice")
		newEndpoint(t, db, w.ID, "*")
		id := queue(t, db, w.ID, 1)[0]
		claimed, err := db.Deliveries.Claim(ctx, time.Now().Add(time.Second), time.Minute, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		var lease *time.Time
		for _, d := range claimed {
			if d.ID == id {
				lease = d.LeaseUntil
			}
		}
		if lease == nil {
			t.Fatal("the delivery was not claimed")
		}
		r := store.AttemptResult{DeliveryID: id, LeaseUntil: lease, StartedAt: time.Now(), StatusCode: ptr(200), Succeeded: true}
		fxs, err := db.Deliveries.RecordAttempts(ctx, []store.AttemptResult{r, r}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if fxs[0].Superseded || fxs[0].Delivery.Status != store.DeliverySucceeded || !fxs[1].Superseded {
			t.Fatalf("effects %+v", fxs)
		}
		if got, _ := db.Deliveries.Get(ctx, w.ID, id); got.Attempts != 1 {
			t.Errorf("the delivery counts %d attempts, want 1", got.Attempts)
		}
		if as, _ := db.Deliveries.Attempts(ctx, id); len(as) != 2 {
			t.Errorf("%d attempts logged, want both", len(as))
		}
	})
}

// On SQLite a claim that finds nothing due does not take the writer: the one dispatcher is woken by every commit,
// and most wake-ups find nothing to send.
func TestClaimWithNothingDueLeavesTheWriter(t *testing.T) {
	db := storetest.SQLite(t)
	ctx := context.Background()
	held, release := make(chan struct{}), make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		_ = db.RunInTx(ctx, func(context.Context, bun.Tx) error {
			close(held)
			<-release
			return nil
		})
	})
	defer writer.Wait()
	defer close(release)
	<-held
	claimCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if ds, err := db.Deliveries.Claim(claimCtx, time.Now(), time.Minute, 10, nil); err != nil || len(ds) != 0 {
		t.Errorf("Claim with nothing due while another transaction writes: %d deliveries, %v", len(ds), err)
	}
}
