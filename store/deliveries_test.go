package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
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

// A claim comes with the deliveries' events, and ForSending loads their endpoints at once.
func TestClaimAndForSending(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "sending")
		a, b := newEndpoint(t, db, w.ID, "*"), newEndpoint(t, db, w.ID, "*")
		ev1, ev2 := emit(t, db, w.ID, "link.created"), emit(t, db, w.ID, "link.deleted")
		claimed, err := db.Deliveries.Claim(ctx, time.Now().Add(time.Second), time.Minute, 1000, nil)
		if err != nil {
			t.Fatal(err)
		}
		events, versions := map[string]store.Event{}, map[string]string{}
		n := 0
		for _, c := range claimed {
			if c.WorkspaceID == w.ID { // PostgreSQL is shared with other tests' deliveries
				n++
				events[c.EventID], versions[c.EndpointID] = c.Event, c.EndpointVersion
			}
		}
		if n != 4 {
			t.Fatalf("claimed %d deliveries of the workspace, want 4", n)
		}
		for _, want := range []store.Event{ev1, ev2} {
			got := events[want.ID]
			if got.ID != want.ID || got.Type != want.Type || got.WorkspaceID != w.ID || compactJSON(t, got.Data) != compactJSON(t, want.Data) ||
				!got.CreatedAt.Equal(want.CreatedAt) {
				t.Errorf("claimed with the event %+v, want %+v", got, want)
			}
		}
		endpoints, err := db.Deliveries.ForSending(ctx, []string{a.ID, b.ID, "whk_deleted"})
		if err != nil {
			t.Fatal(err)
		}
		if len(endpoints) != 2 || endpoints[a.ID].Secret != a.Secret || endpoints[b.ID].URL != b.URL {
			t.Errorf("endpoints %+v", endpoints)
		}
		// PostgreSQL versions an endpoint's row (a reader keeps it until a claim shows another version); SQLite
		// does not (always read again).
		versioned := db.Dialect() == store.Postgres
		for _, id := range []string{a.ID, b.ID} {
			if v := endpoints[id].Version; v != versions[id] || (v != "") != versioned {
				t.Errorf("endpoint %s: version %q read, %q claimed", id, v, versions[id])
			}
		}
		if _, err := db.Webhooks.Pause(ctx, w.ID, a.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Webhooks.Resume(ctx, w.ID, a.ID); err != nil {
			t.Fatal(err)
		}
		emit(t, db, w.ID, "link.updated")
		again, err := db.Deliveries.Claim(ctx, time.Now().Add(time.Second), time.Minute, 1000, nil)
		if err != nil {
			t.Fatal(err)
		}
		mine := 0
		for _, c := range again {
			if c.WorkspaceID != w.ID || !versioned {
				continue
			}
			mine++
			if changed := c.EndpointVersion != versions[c.EndpointID]; changed != (c.EndpointID == a.ID) {
				t.Errorf("endpoint %s: version %q after a's update, %q before", c.EndpointID, c.EndpointVersion, versions[c.EndpointID])
			}
		}
		if versioned && mine != 2 {
			t.Errorf("claimed %d deliveries of the new event, want 2", mine)
		}
	})
}

// compactJSON is data without insignificant space (PostgreSQL's jsonb adds some).
func compactJSON(t *testing.T, data []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		t.Fatal(err)
	}
	return b.String()
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

// The statements attempts are recorded with, in one transaction: the deliveries read as it sees them, their new
// state written in one statement, the attempts logged, and the endpoints' runs of failures started, ended or
// turned into a disabling, each writing only what it is given.
func TestRecordingStatements(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "recording")
		failing, recovered := newEndpoint(t, db, w.ID, "*"), newEndpoint(t, db, w.ID, "*")
		ids := queue(t, db, w.ID, 1) // one delivery to each endpoint
		ev := emit(t, db, w.ID, "link.created")
		ds := deliveriesOf(t, db, ev.ID)
		since := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
		if err := db.Webhooks.SetStatus(ctx, w.ID, recovered.ID, store.EndpointPaused, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Bun().NewUpdate().Table("webhook_endpoints").Set("failing_since = ?", since).
			Where("id = ?", recovered.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		at := time.Now().UTC().Truncate(time.Microsecond)
		next := at.Add(time.Minute)
		err := db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			got, err := db.Deliveries.ForRecording(ctx, tx, []string{ds[0].ID, ds[1].ID, "dlv_missing", ids[0]})
			if err != nil || len(got) != 3 {
				t.Errorf("ForRecording: %d deliveries, %v; want the 3 that exist", len(got), err)
			}
			for i := range ds {
				ds[i].Attempts, ds[i].LastStatusCode, ds[i].LastError, ds[i].UpdatedAt = 1, ptr(503), ptr("http_5xx"), at
				ds[i].NextAttemptAt = &next
			}
			if err := db.Deliveries.UpdateStates(ctx, tx, ds); err != nil {
				return err
			}
			if err := db.Deliveries.LogAttempts(ctx, tx, []store.Attempt{{ID: store.NewID("att"), DeliveryID: ds[0].ID,
				StartedAt: at, DurationMS: 7, StatusCode: ptr(503), ErrorClass: ptr("http_5xx")}}); err != nil {
				return err
			}
			runs, err := db.Webhooks.FailureRuns(ctx, tx, []string{failing.ID, recovered.ID, "whk_missing"})
			if err != nil || len(runs) != 2 {
				t.Errorf("FailureRuns: %+v, %v", runs, err)
			}
			if err := db.Webhooks.EndFailureRuns(ctx, tx, []string{recovered.ID}); err != nil {
				return err
			}
			return db.Webhooks.ApplyFailureChanges(ctx, tx, []store.FailureChange{
				{EndpointID: failing.ID, FailingSince: &since, DisabledReason: ptr("gone")},
				{EndpointID: recovered.ID},
			}, at)
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			got, _ := db.Deliveries.Get(ctx, w.ID, d.ID)
			if got.Attempts != 1 || *got.LastStatusCode != 503 || got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(next) {
				t.Errorf("delivery %+v", got)
			}
		}
		if as, _ := db.Deliveries.Attempts(ctx, ds[0].ID); len(as) != 1 || as[0].DurationMS != 7 {
			t.Errorf("attempts %+v", as)
		}
		e, _ := db.Webhooks.Get(ctx, w.ID, failing.ID)
		if e.Status != store.EndpointDisabled || *e.DisabledReason != "gone" || !e.FailingSince.Equal(since) || !e.UpdatedAt.Equal(at) {
			t.Errorf("disabled endpoint %+v", e)
		}
		e, _ = db.Webhooks.Get(ctx, w.ID, recovered.ID)
		if e.Status != store.EndpointPaused || e.FailingSince != nil {
			t.Errorf("an endpoint whose run ended %+v, want it paused still, without a run of failures", e)
		}
	})
}

// A recorded batch keeps every value as it was given, whatever its text: quotes, backslashes, commas, braces, the
// word NULL, line breaks and non-ASCII text, and real NULLs beside them in the same column (on PostgreSQL the batch
// travels as one array literal per column).
func TestRecordingKeepsAwkwardValues(t *testing.T) {
	awkward := []string{`say "hi"`, `C:\path\`, "a,b", "{x}", "NULL", "line\nbreak", "Grüße 👋", "", `\"`, "'quoted'"}
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorkspace(t, db, "awkward")
		newEndpoint(t, db, w.ID, "*")
		var ds []store.Delivery
		for range awkward {
			ds = append(ds, deliveriesOf(t, db, emit(t, db, w.ID, "link.created").ID)...)
		}
		at := time.Now().UTC().Truncate(time.Microsecond)
		var as []store.Attempt
		for i, text := range awkward {
			a := store.Attempt{ID: store.NewID("att"), DeliveryID: ds[i].ID, StartedAt: at.Add(time.Duration(i) * time.Microsecond),
				DurationMS: i, ResponseExcerpt: &text, ErrorClass: &text, Signature: &text,
				ResponseHeaders: map[string]string{text: text, "content-type": "text/plain"}}
			ds[i].Attempts, ds[i].UpdatedAt, ds[i].LastError = i, at, &text
			if i%2 == 1 { // every other one NULL where the column allows it
				a.StatusCode, a.ResponseHeaders, a.Signature = nil, nil, nil
				ds[i].Status, ds[i].NextAttemptAt, ds[i].LastStatusCode, ds[i].CompletedAt = store.DeliverySucceeded, nil, ptr(200), &at
			} else {
				a.StatusCode = ptr(500 + i)
			}
			as = append(as, a)
		}
		err := db.RunInRepeatableTx(ctx, func(ctx context.Context, tx bun.IDB) error {
			if err := db.Deliveries.UpdateStates(ctx, tx, ds); err != nil {
				return err
			}
			return db.Deliveries.LogAttempts(ctx, tx, as)
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range ds {
			got, err := db.Deliveries.Get(ctx, w.ID, want.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != want.Status || got.Attempts != want.Attempts || !got.UpdatedAt.Equal(at) ||
				got.LastError == nil || *got.LastError != awkward[i] || !reflect.DeepEqual(got.LastStatusCode, want.LastStatusCode) ||
				(got.CompletedAt == nil) != (want.CompletedAt == nil) || (got.NextAttemptAt == nil) != (want.NextAttemptAt == nil) {
				t.Errorf("delivery %d: got %+v, want %+v", i, got, want)
			}
			logged, err := db.Deliveries.Attempts(ctx, want.ID)
			if err != nil || len(logged) != 1 {
				t.Fatalf("attempts of delivery %d: %+v, %v", i, logged, err)
			}
			a := logged[0]
			if !a.StartedAt.Equal(as[i].StartedAt) {
				t.Errorf("attempt %d started %v, want %v", i, a.StartedAt, as[i].StartedAt)
			}
			a.StartedAt = as[i].StartedAt
			if !reflect.DeepEqual(a, as[i]) {
				t.Errorf("attempt %d:\n got  %+v\n want %+v", i, a, as[i])
			}
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
