package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func ptr[T any](v T) *T { return &v }

// record records attempts in one batch with a recorder that disables endpoints failing for disableAfter (zero:
// never), and returns their effects.
func (h *harness) record(disableAfter time.Duration, rs ...webhook.AttemptResult) []webhook.AttemptEffects {
	h.t.Helper()
	fxs, err := webhook.NewRecorder(h.db, nil, disableAfter).Record(context.Background(), rs)
	if err != nil {
		h.t.Fatal(err)
	}
	return fxs
}

// queue registers an endpoint of the harness's workspace that no dispatcher sends to, queues n events for it and
// returns it with their deliveries, in event order.
func (h *harness) queue(n int) (store.WebhookEndpoint, []store.Delivery) {
	h.t.Helper()
	e, _ := h.endpoint("https://receiver.example/hook", nil)
	ds := make([]store.Delivery, n)
	for i := range ds {
		ds[i] = h.delivery(h.emit("link.created").ID, e.ID)
	}
	return e, ds
}

// endpointNow reads an endpoint of the harness's workspace.
func (h *harness) endpointNow(id string) store.WebhookEndpoint {
	h.t.Helper()
	e, err := h.db.Webhooks.Get(context.Background(), h.ws.ID, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

// claim leases the deliveries due at now+1s and returns the leases of those among ids (PostgreSQL is shared with
// other tests' deliveries).
func (h *harness) claim(ids ...string) map[string]*time.Time {
	h.t.Helper()
	leases := map[string]*time.Time{}
	for id, d := range h.claimed(ids...) {
		leases[id] = d.LeaseUntil
	}
	return leases
}

// claimed leases the deliveries due at now+1s and returns those among ids as the claim returned them.
func (h *harness) claimed(ids ...string) map[string]store.Delivery {
	h.t.Helper()
	claimed, err := h.db.Deliveries.Claim(context.Background(), time.Now().Add(time.Second), time.Minute, 1000, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]store.Delivery{}
	for _, d := range claimed {
		if slices.Contains(ids, d.ID) {
			out[d.ID] = d.Delivery
		}
	}
	if len(out) != len(ids) {
		h.t.Fatalf("claimed %d of the deliveries %v", len(out), ids)
	}
	return out
}

// A retryable failure schedules the next attempt and starts the endpoint's run of failures; a success completes
// the delivery and ends the run. Every attempt is logged.
func TestRecordLifecycle(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		e, ds := h.queue(1)
		d := ds[0]
		next := time.Now().Add(5 * time.Second)
		fx := h.record(0, webhook.AttemptResult{DeliveryID: d.ID, StartedAt: time.Now(), Duration: 120 * time.Millisecond,
			StatusCode: ptr(503), ErrorClass: ptr("http_5xx"), Excerpt: ptr("busy"), NextAttemptAt: &next})[0]
		if fx.Delivery.Status != store.DeliveryPending || fx.Delivery.Attempts != 1 || fx.Exhausted || fx.EndpointDisabled != "" {
			t.Fatalf("after a retryable failure: %+v", fx)
		}
		got := h.delivery(d.EventID, e.ID)
		if got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(next.UTC().Truncate(time.Microsecond)) || got.LeaseUntil != nil ||
			*got.LastStatusCode != 503 || *got.LastError != "http_5xx" {
			t.Errorf("retry not scheduled or lease kept: %+v", got)
		}
		if h.endpointNow(e.ID).FailingSince == nil {
			t.Error("the endpoint's run of failures was not recorded")
		}

		fx = h.record(0, webhook.AttemptResult{DeliveryID: d.ID, StartedAt: time.Now(), StatusCode: ptr(200), Succeeded: true})[0]
		if fx.Delivery.Status != store.DeliverySucceeded || fx.Delivery.CompletedAt == nil || fx.Delivery.Attempts != 2 {
			t.Fatalf("after a success: %+v", fx)
		}
		if h.endpointNow(e.ID).FailingSince != nil {
			t.Error("a success must end the run of failures")
		}
		attempts := h.attempts(d.ID)
		if len(attempts) != 2 || *attempts[0].StatusCode != 503 || *attempts[0].ResponseExcerpt != "busy" ||
			attempts[0].DurationMS != 120 || *attempts[1].StatusCode != 200 {
			t.Errorf("attempt log %+v", attempts)
		}
	})
}

// A failure with no retry left fails the delivery for good and tells the workspace; a 410 fails it at once and
// disables the endpoint, and the workspace hears of both.
func TestRecordExhaustedAndGone(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		e, ds := h.queue(2)
		fx := h.record(0, webhook.AttemptResult{DeliveryID: ds[0].ID, StartedAt: time.Now(), StatusCode: ptr(500),
			ErrorClass: ptr("http_5xx")})[0]
		if fx.Delivery.Status != store.DeliveryFailed || fx.Delivery.CompletedAt == nil || !fx.Exhausted || fx.EndpointDisabled != "" {
			t.Fatalf("no retry left: %+v", fx)
		}
		exhausted := h.events("webhook.delivery.exhausted")
		if len(exhausted) != 1 {
			t.Fatalf("%d exhausted events, want 1", len(exhausted))
		}
		conformsTo(t, exhausted[0], "WebhookDeliveryExhaustedEvent")
		var data struct {
			DeliveryID string `json:"delivery_id"`
			Attempts   int    `json:"attempts"`
			LastError  string `json:"last_error"`
		}
		if err := json.Unmarshal(exhausted[0].Data, &data); err != nil || data.DeliveryID != ds[0].ID || data.Attempts != 1 ||
			data.LastError != "http_5xx" {
			t.Errorf("exhausted event %s (%v)", exhausted[0].Data, err)
		}

		next := time.Now().Add(time.Minute)
		fx = h.record(0, webhook.AttemptResult{DeliveryID: ds[1].ID, StartedAt: time.Now(), StatusCode: ptr(410),
			ErrorClass: ptr("http_410"), Gone: true, NextAttemptAt: &next})[0]
		if fx.EndpointDisabled != "gone" || fx.Delivery.Status != store.DeliveryFailed || !fx.Exhausted {
			t.Fatalf("410: %+v", fx)
		}
		endpoint := h.endpointNow(e.ID)
		if endpoint.Status != store.EndpointDisabled || endpoint.DisabledReason == nil || *endpoint.DisabledReason != "gone" {
			t.Errorf("endpoint after 410: %+v", endpoint)
		}
		disabled := h.events("webhook.endpoint.disabled")
		if len(disabled) != 1 || len(h.events("webhook.delivery.exhausted")) != 2 {
			t.Fatalf("%d disabled events, want 1, and a second exhausted event", len(disabled))
		}
		conformsTo(t, disabled[0], "WebhookEndpointDisabledEvent")
		var gone struct {
			WebhookID string `json:"webhook_id"`
			Reason    string `json:"reason"`
		}
		if err := json.Unmarshal(disabled[0].Data, &gone); err != nil || gone.Reason != "gone" || gone.WebhookID != e.ID {
			t.Errorf("disabled event %s (%v)", disabled[0].Data, err)
		}
	})
}

// An exhausted delivery of an exhausted-event emits nothing: a broken receiver cannot start an endless chain.
func TestRecordExhaustedEventExhaustsQuietly(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		e, _ := h.endpoint("https://receiver.example/hook", nil)
		ev := h.emit("webhook.delivery.exhausted")
		fx := h.record(0, webhook.AttemptResult{DeliveryID: h.delivery(ev.ID, e.ID).ID, StartedAt: time.Now(),
			StatusCode: ptr(500)})[0]
		if !fx.Exhausted {
			t.Fatalf("effects %+v", fx)
		}
		if n := len(h.events("webhook.delivery.exhausted")); n != 1 {
			t.Errorf("%d exhausted events, want only the one that was delivered", n)
		}
	})
}

// An endpoint failing for longer than the recorder's limit is disabled, with the start of its run of failures.
func TestRecordDisablesAfterLongFailure(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		e, ds := h.queue(1)
		next := time.Now().Add(time.Minute)
		started := time.Now().Add(-6 * 24 * time.Hour).UTC().Truncate(time.Microsecond) // the run began six days ago
		fx := h.record(5*24*time.Hour, webhook.AttemptResult{DeliveryID: ds[0].ID, StartedAt: started,
			ErrorClass: ptr("timeout"), NextAttemptAt: &next})[0]
		if fx.EndpointDisabled != "failing" || fx.Delivery.Status != store.DeliveryPending {
			t.Fatalf("%+v", fx)
		}
		endpoint := h.endpointNow(e.ID)
		if endpoint.Status != store.EndpointDisabled || *endpoint.DisabledReason != "failing" || !endpoint.FailingSince.Equal(started) {
			t.Errorf("endpoint %+v", endpoint)
		}
		var data struct {
			FailingSince time.Time `json:"failing_since"`
			URL          string    `json:"url"`
		}
		disabled := h.events("webhook.endpoint.disabled")
		if len(disabled) != 1 || json.Unmarshal(disabled[0].Data, &data) != nil || !data.FailingSince.Equal(started) || data.URL != e.URL {
			t.Errorf("disabled events %+v", disabled)
		}
	})
}

// rollbackAt fails the statement of a transaction that contains any of markers, as a database that fails
// mid-transaction would: bun runs the query with the context the hook returns, and database/sql refuses a
// cancelled one.
type rollbackAt struct{ markers []string }

func (r rollbackAt) BeforeQuery(ctx context.Context, q *bun.QueryEvent) context.Context {
	for _, m := range r.markers {
		if strings.Contains(q.Query, m) {
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			return cancelled
		}
	}
	return ctx
}

func (rollbackAt) AfterQuery(context.Context, *bun.QueryEvent) {}

// A batch is recorded whole or not at all: when its last statement (the attempt log) fails, the delivery, the
// endpoint and the operational events it had written are rolled back.
func TestRecordIsAtomic(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		e, ds := h.queue(1)
		db.AddQueryHook(rollbackAt{markers: []string{
			`INSERT INTO "webhook_attempts"`,    // SQLite
			"switchboard_log_webhook_attempts(", // PostgreSQL
		}})
		_, err := webhook.NewRecorder(db, nil, 0).Record(context.Background(), []webhook.AttemptResult{{DeliveryID: ds[0].ID,
			StartedAt: time.Now(), StatusCode: ptr(410), ErrorClass: ptr("http_410"), Gone: true}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Record = %v, want the failed statement's error", err)
		}
		if got := h.delivery(ds[0].EventID, e.ID); got.Status != store.DeliveryPending || got.Attempts != 0 {
			t.Errorf("a failed batch left the delivery %+v", got)
		}
		if endpoint := h.endpointNow(e.ID); endpoint.Status != store.EndpointActive || endpoint.FailingSince != nil {
			t.Errorf("a failed batch left the endpoint %+v", endpoint)
		}
		if n := len(h.events("webhook.endpoint.disabled")) + len(h.events("webhook.delivery.exhausted")); n != 0 {
			t.Errorf("a failed batch left %d operational events", n)
		}
		if n := len(h.attempts(ds[0].ID)); n != 0 {
			t.Errorf("a failed batch left %d attempts", n)
		}
	})
}

// A batch records every attempt in one transaction, skipping deliveries deleted meanwhile; an attempt whose lease
// was taken over by another dispatcher is logged without touching the delivery.
func TestRecordBatch(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		h := newHarness(t, db)
		e, ds := h.queue(3)
		lease := h.claim(ds[0].ID, ds[2].ID)
		// The third delivery's lease ran out and another dispatcher claimed it.
		if err := db.Deliveries.Release(ctx, []string{ds[2].ID}, time.Time{}); err != nil {
			t.Fatal(err)
		}
		h.claim(ds[2].ID)
		fxs := h.record(0,
			webhook.AttemptResult{DeliveryID: ds[0].ID, LeaseUntil: lease[ds[0].ID], StartedAt: time.Now(), StatusCode: ptr(200), Succeeded: true},
			webhook.AttemptResult{DeliveryID: "dlv_deleted", StartedAt: time.Now(), Succeeded: true},
			webhook.AttemptResult{DeliveryID: ds[2].ID, LeaseUntil: lease[ds[2].ID], StartedAt: time.Now(), StatusCode: ptr(500)},
		)
		if len(fxs) != 3 || fxs[0].Delivery.Status != store.DeliverySucceeded || !fxs[1].Missing || !fxs[2].Superseded {
			t.Fatalf("effects %+v", fxs)
		}
		taken := h.delivery(ds[2].EventID, e.ID)
		if taken.Status != store.DeliveryPending || taken.Attempts != 0 || taken.LeaseUntil == nil {
			t.Errorf("a superseded attempt changed the delivery: %+v", taken)
		}
		if as := h.attempts(ds[2].ID); len(as) != 1 {
			t.Errorf("the superseded attempt is not in the log: %d attempts", len(as))
		}
		if endpoint := h.endpointNow(e.ID); endpoint.FailingSince != nil {
			t.Errorf("a superseded failure started the endpoint's run of failures: %+v", endpoint)
		}
		if n := len(h.events("webhook.delivery.exhausted")); n != 0 {
			t.Errorf("a superseded failure emitted %d exhausted events", n)
		}
	})
}

// A batch of successes that carry their claims is recorded as the transaction would record it, on PostgreSQL
// with one statement and without reading the deliveries first: a delivery still under its claim's lease succeeds
// and ends its endpoint's run of failures, one whose lease another dispatcher holds now is only logged, one
// deleted meanwhile is skipped.
func TestRecordSuccessesWithTheirClaims(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		h := newHarness(t, db)
		e, ds := h.queue(3)
		failing := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
		h.set(e.ID, map[string]any{"failing_since": failing})
		claims := h.claimed(ds[0].ID, ds[1].ID, ds[2].ID)
		// The second delivery's lease ran out and another dispatcher claimed it; the third was deleted with its event.
		if err := db.Deliveries.Release(ctx, []string{ds[1].ID}, time.Time{}); err != nil {
			t.Fatal(err)
		}
		retaken := h.claim(ds[1].ID)[ds[1].ID]
		if _, err := db.Bun().NewDelete().Table("events").Where("id = ?", ds[2].EventID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		statements := &countQueries{marker: "switchboard_record_webhook_successes("}
		db.AddQueryHook(statements)
		var rs []webhook.AttemptResult
		for _, d := range ds {
			c := claims[d.ID]
			rs = append(rs, webhook.AttemptResult{DeliveryID: d.ID, LeaseUntil: c.LeaseUntil, Claimed: &c,
				StartedAt: time.Now(), Duration: 12 * time.Millisecond, StatusCode: ptr(204), Succeeded: true,
				ResponseHeaders: map[string]string{"Content-Type": "text/plain"}, Signature: "v1,c2ln"})
		}
		fxs := h.record(0, rs...)
		if want := map[bool]int{true: 1, false: 0}[db.Dialect() == store.Postgres]; statements.n != want {
			t.Errorf("%d calls of the single-statement record, want %d", statements.n, want)
		}
		if len(fxs) != 3 || fxs[0].Missing || fxs[0].Superseded || !fxs[1].Superseded || !fxs[2].Missing {
			t.Fatalf("effects %+v", fxs)
		}
		done := h.delivery(ds[0].EventID, e.ID)
		if fx := fxs[0].Delivery; fx.Status != store.DeliverySucceeded || fx.Attempts != 1 || fx.LeaseUntil != nil ||
			fx.CompletedAt == nil || !fx.UpdatedAt.Equal(done.UpdatedAt) {
			t.Errorf("effect on the recorded delivery: %+v", fx)
		}
		if done.Status != store.DeliverySucceeded || done.Attempts != 1 || done.LeaseUntil != nil || done.NextAttemptAt != nil ||
			done.CompletedAt == nil || done.LastStatusCode == nil || *done.LastStatusCode != 204 || done.LastError != nil {
			t.Errorf("recorded delivery %+v", done)
		}
		if as := h.attempts(ds[0].ID); len(as) != 1 || as[0].DurationMS != 12 || *as[0].StatusCode != 204 ||
			as[0].ResponseHeaders["Content-Type"] != "text/plain" || *as[0].Signature != "v1,c2ln" {
			t.Errorf("logged attempts %+v", as)
		}
		taken := h.delivery(ds[1].EventID, e.ID)
		if taken.Status != store.DeliveryPending || taken.Attempts != 0 || taken.LeaseUntil == nil || !taken.LeaseUntil.Equal(*retaken) {
			t.Errorf("a superseded success changed the delivery: %+v", taken)
		}
		if as := h.attempts(ds[1].ID); len(as) != 1 {
			t.Errorf("the superseded attempt is not in the log: %d attempts", len(as))
		}
		if endpoint := h.endpointNow(e.ID); endpoint.FailingSince != nil {
			t.Errorf("a success left the endpoint failing since %v", endpoint.FailingSince)
		}
	})
}

// When the single statement that records a batch of successes fails, Record returns its error and the deliveries
// stay as claimed, leased: they are sent again once the lease runs out.
func TestRecordSuccessesFailing(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		if db.Dialect() != store.Postgres {
			t.Skip("SQLite records every batch in a transaction (TestRecordIsAtomic)")
		}
		h := newHarness(t, db)
		e, ds := h.queue(1)
		claim := h.claimed(ds[0].ID)[ds[0].ID]
		db.AddQueryHook(rollbackAt{markers: []string{"switchboard_record_webhook_successes("}})
		_, err := webhook.NewRecorder(db, nil, 0).Record(context.Background(), []webhook.AttemptResult{{DeliveryID: ds[0].ID,
			LeaseUntil: claim.LeaseUntil, Claimed: &claim, StartedAt: time.Now(), StatusCode: ptr(200), Succeeded: true}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Record = %v, want the failed statement's error", err)
		}
		if got := h.delivery(ds[0].EventID, e.ID); got.Status != store.DeliveryPending || got.Attempts != 0 ||
			got.LeaseUntil == nil || !got.LeaseUntil.Equal(*claim.LeaseUntil) {
			t.Errorf("a failed record left the delivery %+v", got)
		}
		if n := len(h.attempts(ds[0].ID)); n != 0 {
			t.Errorf("a failed record left %d attempts", n)
		}
	})
}

// countQueries counts the statements that contain marker.
type countQueries struct {
	marker string
	n      int
}

func (c *countQueries) BeforeQuery(ctx context.Context, q *bun.QueryEvent) context.Context {
	if strings.Contains(q.Query, c.marker) {
		c.n++
	}
	return ctx
}

func (*countQueries) AfterQuery(context.Context, *bun.QueryEvent) {}

// Failed attempts to one endpoint in one batch are all recorded, judged in order: the first starts the endpoint's
// run of failures, the first that disables it (a 410) is the only one that does, and the later ones find it
// disabled.
func TestRecordFailuresOfOneEndpoint(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		e, ds := h.queue(4)
		next := time.Now().Add(time.Minute)
		first := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
		fail := func(d store.Delivery, started time.Time, gone bool) webhook.AttemptResult {
			return webhook.AttemptResult{DeliveryID: d.ID, StartedAt: started, ErrorClass: ptr("timeout"),
				NextAttemptAt: &next, Gone: gone}
		}
		fxs := h.record(0,
			fail(ds[0], first, false),                   // starts the run of failures
			fail(ds[1], first.Add(time.Minute), false),  // extends it
			fail(ds[2], first.Add(2*time.Minute), true), // disables the endpoint
			fail(ds[3], first.Add(3*time.Minute), true), // finds it disabled already
		)
		for i, fx := range fxs {
			want, status := "", store.DeliveryPending
			if i == 2 {
				want = "gone"
			}
			if i >= 2 {
				status = store.DeliveryFailed
			}
			if fx.EndpointDisabled != want || fx.Delivery.Status != status || fx.Delivery.Attempts != 1 {
				t.Errorf("attempt %d: %+v, want disabled %q and %s", i, fx, want, status)
			}
		}
		for _, d := range ds {
			if as := h.attempts(d.ID); len(as) != 1 {
				t.Errorf("delivery %s: %d attempts logged, want 1", d.ID, len(as))
			}
		}
		endpoint := h.endpointNow(e.ID)
		if endpoint.Status != store.EndpointDisabled || *endpoint.DisabledReason != "gone" || !endpoint.FailingSince.Equal(first) {
			t.Errorf("endpoint %+v, want disabled as gone, failing since %v", endpoint, first)
		}
		if disabled := h.events("webhook.endpoint.disabled"); len(disabled) != 1 {
			t.Errorf("%d disabled events, want one", len(disabled))
		}
	})
}

// The first result of a delivery releases its lease, so a second result of the same claim in the batch is only
// logged.
func TestRecordSameDeliveryTwice(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		e, ds := h.queue(1)
		lease := h.claim(ds[0].ID)
		r := webhook.AttemptResult{DeliveryID: ds[0].ID, LeaseUntil: lease[ds[0].ID], StartedAt: time.Now(), StatusCode: ptr(200),
			Succeeded: true}
		fxs := h.record(0, r, r)
		if fxs[0].Superseded || fxs[0].Delivery.Status != store.DeliverySucceeded || !fxs[1].Superseded {
			t.Fatalf("effects %+v", fxs)
		}
		if got := h.delivery(ds[0].EventID, e.ID); got.Attempts != 1 {
			t.Errorf("the delivery counts %d attempts, want 1", got.Attempts)
		}
		if as := h.attempts(ds[0].ID); len(as) != 2 {
			t.Errorf("%d attempts logged, want both", len(as))
		}
	})
}
