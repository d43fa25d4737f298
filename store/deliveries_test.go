package store_test

import (
	"context"
	"errors"
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
	ev := emit(t, db, w.ID, "link.created", false)
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
