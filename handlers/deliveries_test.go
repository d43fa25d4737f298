package handlers_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// deliveryBody is the WebhookDelivery schema, decoded.
type deliveryBody struct {
	ID             string     `json:"id"`
	Object         string     `json:"object"`
	WebhookID      string     `json:"webhook_id"`
	EventID        string     `json:"event_id"`
	EventType      string     `json:"event_type"`
	Status         string     `json:"status"`
	AttemptCount   int        `json:"attempt_count"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      *string    `json:"last_error"`
	CompletedAt    *time.Time `json:"completed_at"`
	Attempts       []struct {
		ID              string            `json:"id"`
		StatusCode      *int              `json:"status_code"`
		ErrorClass      *string           `json:"error_class"`
		ResponseExcerpt *string           `json:"response_excerpt"`
		DurationMS      int               `json:"duration_ms"`
		ResponseHeaders map[string]string `json:"response_headers"`
		Signature       *string           `json:"signature"`
	} `json:"attempts"`
	Event *envelope `json:"event"`
}

type deliveryList struct {
	Data       []deliveryBody `json:"data"`
	HasMore    bool           `json:"has_more"`
	NextCursor *string        `json:"next_cursor"`
}

// deliveryOf returns the delivery of an event to an endpoint.
func (h *hooks) deliveryOf(eventID, endpointID string) store.Delivery {
	h.t.Helper()
	var d store.Delivery
	if err := h.db.Bun().NewSelect().Model(&d).Where("d.event_id = ? AND d.endpoint_id = ?", eventID, endpointID).
		Scan(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	return d
}

// attempt records an attempt of a delivery as the dispatcher does.
func (h *hooks) attempt(d store.Delivery, status int, class *string, next *time.Time) {
	h.t.Helper()
	excerpt := http.StatusText(status)
	_, err := webhook.NewRecorder(h.db, nil, 0).Record(context.Background(), []webhook.AttemptResult{{DeliveryID: d.ID,
		StartedAt: time.Now(), Duration: 12 * time.Millisecond, StatusCode: &status, ErrorClass: class, Excerpt: &excerpt,
		ResponseHeaders: map[string]string{"Content-Type": "text/plain", "X-Status": strconv.Itoa(status)},
		Signature:       "v1,c2lnbmVk", Succeeded: status < 300, NextAttemptAt: next}})
	if err != nil {
		h.t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestWebhookDeliveryLog(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		w := h.create(`{"url":"http://127.0.0.1:9/hook","events":["*"]}`)
		first := h.ping()
		exhausted := h.emit("webhook.delivery.exhausted", map[string]any{"delivery_id": "dlv_01JDAB3C4D5E6F7G8H9J0K1M2N",
			"webhook_id": w.ID, "event_id": first.ID, "event_type": "webhook.ping", "attempts": 1,
			"last_status_code": 500, "last_error": "http_5xx"})
		third := h.ping()
		d := h.deliveryOf(first.ID, w.ID)
		next := time.Now().Add(5 * time.Second)
		h.attempt(d, http.StatusServiceUnavailable, ptr("http_5xx"), &next)
		h.attempt(d, http.StatusOK, nil, nil)

		var l deliveryList
		h.call(http.MethodGet, "/api/v1/webhooks/"+w.ID+"/deliveries?limit=2", "", http.StatusOK, &l)
		if len(l.Data) != 2 || !l.HasMore || l.Data[0].EventID != third.ID || l.Data[1].EventID != exhausted.ID ||
			l.Data[0].Attempts != nil || l.Data[0].Event != nil {
			t.Fatalf("first page %+v", l)
		}
		h.call(http.MethodGet, "/api/v1/webhooks/"+w.ID+"/deliveries?limit=2&cursor="+*l.NextCursor, "", http.StatusOK, &l)
		if len(l.Data) != 1 || l.HasMore || l.NextCursor != nil || l.Data[0].ID != d.ID {
			t.Fatalf("second page %+v", l)
		}
		got := l.Data[0]
		if got.Object != "webhook_delivery" || got.WebhookID != w.ID || got.Status != "succeeded" || got.AttemptCount != 2 ||
			*got.LastStatusCode != 200 || got.LastError != nil || got.CompletedAt == nil || got.NextAttemptAt != nil {
			t.Errorf("delivery %+v", got)
		}

		filters := map[string][]string{
			"status=succeeded":                      {first.ID},
			"status=pending":                        {third.ID, exhausted.ID},
			"event_type=webhook.ping":               {third.ID, first.ID},
			"event_type=webhook.ping&status=failed": nil,
		}
		for query, want := range filters {
			h.call(http.MethodGet, "/api/v1/webhooks/"+w.ID+"/deliveries?"+query, "", http.StatusOK, &l)
			var events []string
			for _, x := range l.Data {
				events = append(events, x.EventID)
			}
			if !slices.Equal(events, want) {
				t.Errorf("%s: events %v, want %v", query, events, want)
			}
		}

		var one deliveryBody
		h.call(http.MethodGet, "/api/v1/webhook-deliveries/"+d.ID, "", http.StatusOK, &one)
		if len(one.Attempts) != 2 || *one.Attempts[0].StatusCode != 503 || *one.Attempts[0].ErrorClass != "http_5xx" ||
			*one.Attempts[0].ResponseExcerpt != "Service Unavailable" || one.Attempts[0].DurationMS != 12 ||
			*one.Attempts[1].StatusCode != 200 || one.Attempts[1].ErrorClass != nil || one.Attempts[0].ID >= one.Attempts[1].ID {
			t.Errorf("attempts, oldest first: %+v", one.Attempts)
		}
		if a := one.Attempts[0]; a.ResponseHeaders["X-Status"] != "503" || a.ResponseHeaders["Content-Type"] != "text/plain" ||
			len(a.ResponseHeaders) != 2 || a.Signature == nil || *a.Signature != "v1,c2lnbmVk" {
			t.Errorf("first attempt's response headers %v and signature %v", a.ResponseHeaders, a.Signature)
		}
		if one.Event == nil || one.Event.ID != first.ID || one.Event.Type != "webhook.ping" || one.Event.APIVersion != "v1" ||
			one.Event.WorkspaceID != h.ws.ID || !one.Event.Timestamp.Equal(first.CreatedAt) || string(one.Event.Data) != string(first.Data) {
			t.Errorf("event %+v, want %+v", one.Event, first)
		}

		h.do(request{path: "/api/v1/webhook-deliveries/dlv_01JDAB3C4D5E6F7G8H9J0K1M2N", key: h.write}).problem(t, http.StatusNotFound, "not_found")
		h.do(request{path: "/api/v1/webhooks/whk_01JDAA2Q8W4V6X7Y8Z9A0B1C2D/deliveries", key: h.write}).problem(t, http.StatusNotFound, "not_found")
		p := h.do(request{path: "/api/v1/webhooks/" + w.ID + "/deliveries?cursor=" + encodeCursor("<whk_01JDAA2Q8W4V6X7Y8Z9A0B1C2D"), key: h.write}).
			problem(t, http.StatusBadRequest, "validation_failed")
		if got := pointers(p); !slices.Equal(got, []string{"?cursor"}) {
			t.Errorf("another list's cursor: %v", got)
		}
	})
}

func TestRedeliverWebhookDelivery(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		w := h.create(`{"url":"http://127.0.0.1:9/hook","events":["*"]}`)
		d := h.deliveryOf(h.ping().ID, w.ID)
		h.attempt(d, http.StatusOK, nil, nil)
		path := "/api/v1/webhook-deliveries/" + d.ID + "/redeliver"

		wakes := h.wakes.Load()
		before := time.Now()
		var got deliveryBody
		h.call(http.MethodPost, path, "", http.StatusAccepted, &got)
		if got.ID != d.ID || got.Status != "pending" || got.AttemptCount != 1 || got.CompletedAt != nil ||
			got.NextAttemptAt == nil || got.NextAttemptAt.Before(before.Add(-time.Millisecond)) || got.NextAttemptAt.After(time.Now()) {
			t.Errorf("redelivered %+v", got)
		}
		stored, _ := db.Deliveries.Get(context.Background(), h.ws.ID, d.ID)
		if stored.ScheduleStart != 1 || stored.LeaseUntil != nil {
			t.Errorf("the retry schedule did not restart: %+v", stored)
		}
		if h.wakes.Load() == wakes {
			t.Error("redeliver did not wake the dispatcher")
		}

		h.exec("UPDATE webhook_deliveries SET lease_until = ? WHERE id = ?", time.Now().Add(time.Minute).UTC(), d.ID)
		h.do(request{method: http.MethodPost, path: path, key: h.write}).problem(t, http.StatusConflict, "delivery_in_flight")
		h.exec("UPDATE webhook_deliveries SET lease_until = NULL WHERE id = ?", d.ID)

		h.exec("UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'failing' WHERE id = ?", w.ID)
		p := h.do(request{method: http.MethodPost, path: path, key: h.write}).problem(t, http.StatusConflict, "webhook_disabled")
		if want := "POST /api/v1/webhooks/" + w.ID + "/enable"; !strings.Contains(p.Detail, want) {
			t.Errorf("detail %q should name %q", p.Detail, want)
		}
		h.do(request{method: http.MethodPost, path: "/api/v1/webhook-deliveries/dlv_01JDAB3C4D5E6F7G8H9J0K1M2N/redeliver", key: h.write}).
			problem(t, http.StatusNotFound, "not_found")
	})
}

// recoverState is an endpoint with one delivery in each status, the day before yesterday, and one failed one older.
type recoverState struct {
	w                                        webhookBody
	failed, skipped, pending, succeeded, old string
	at                                       time.Time
}

func (h *hooks) recoverState() recoverState {
	h.t.Helper()
	st := recoverState{w: h.create(`{"url":"http://127.0.0.1:9/hook","events":["*"]}`), at: time.Now().Add(-48 * time.Hour).UTC()}
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = h.deliveryOf(h.ping().ID, st.w.ID).ID
	}
	st.failed, st.skipped, st.pending, st.succeeded, st.old = ids[0], ids[1], ids[2], ids[3], ids[4]
	for id, status := range map[string]string{st.failed: "failed", st.skipped: "skipped", st.pending: "pending", st.succeeded: "succeeded"} {
		h.exec("UPDATE webhook_deliveries SET status = ?, attempts = 3, created_at = ? WHERE id = ?", status, st.at, id)
	}
	h.exec("UPDATE webhook_deliveries SET status = 'failed', created_at = ? WHERE id = ?", st.at.Add(-24*time.Hour), st.old)
	return st
}

func (h *hooks) statuses(st recoverState) map[string]string {
	h.t.Helper()
	var l deliveryList
	h.call(http.MethodGet, "/api/v1/webhooks/"+st.w.ID+"/deliveries", "", http.StatusOK, &l)
	out := map[string]string{}
	for _, d := range l.Data {
		out[d.ID] = d.Status
	}
	return out
}

func TestRecoverWebhook(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		st := h.recoverState()
		path := "/api/v1/webhooks/" + st.w.ID + "/recover"
		since := st.at.Add(-time.Minute).Format(time.RFC3339Nano)

		invalid := map[string][]string{
			`{"since":"` + time.Now().Add(-15*24*time.Hour).UTC().Format(time.RFC3339) + `"}`:                {"/since"},
			`{"since":"` + since + `","until":"` + st.at.Add(-2*time.Minute).Format(time.RFC3339Nano) + `"}`: {"/until"},
			`{"since":"` + since + `","until":"` + since + `"}`:                                              {"/until"},
		}
		for body, want := range invalid {
			p := h.do(request{method: http.MethodPost, path: path, key: h.write, body: body}).problem(t, http.StatusBadRequest, "validation_failed")
			if got := pointers(p); !slices.Equal(got, want) {
				t.Errorf("%s: pointers %v, want %v", body, got, want)
			}
		}

		wakes := h.wakes.Load()
		var r struct {
			Object    string    `json:"object"`
			WebhookID string    `json:"webhook_id"`
			Since     time.Time `json:"since"`
			Until     time.Time `json:"until"`
			Queued    int       `json:"queued"`
		}
		before := time.Now()
		h.call(http.MethodPost, path, `{"since":"`+since+`"}`, http.StatusAccepted, &r)
		if r.Object != "webhook_recovery" || r.WebhookID != st.w.ID || r.Queued != 2 || r.Until.Before(before.Add(-time.Second)) ||
			!r.Since.Equal(st.at.Add(-time.Minute)) {
			t.Errorf("recovery %+v", r)
		}
		want := map[string]string{st.failed: "pending", st.skipped: "pending", st.pending: "pending", st.succeeded: "succeeded", st.old: "failed"}
		if got := h.statuses(st); !maps.Equal(got, want) {
			t.Errorf("after recover: %v, want %v", got, want)
		}
		if h.wakes.Load() == wakes {
			t.Error("recover did not wake the dispatcher")
		}
		d, _ := db.Deliveries.Get(context.Background(), h.ws.ID, st.failed)
		if d.ScheduleStart != 3 || d.Attempts != 3 || d.CompletedAt != nil {
			t.Errorf("recovered delivery %+v", d)
		}

		h.exec("UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'gone' WHERE id = ?", st.w.ID)
		h.do(request{method: http.MethodPost, path: path, key: h.write, body: `{"since":"` + since + `"}`}).
			problem(t, http.StatusConflict, "webhook_disabled")
		h.do(request{method: http.MethodPost, path: "/api/v1/webhooks/whk_01JDAA2Q8W4V6X7Y8Z9A0B1C2D/recover", key: h.write,
			body: `{"since":"` + since + `"}`}).problem(t, http.StatusNotFound, "not_found")
	})
}

// enable with recover_since sends what the endpoint missed while disabled.
func TestEnableWebhookRecovers(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHooks(t, db)
		st := h.recoverState()
		h.exec("UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'failing', failing_since = ? WHERE id = ?",
			st.at, st.w.ID)
		var got webhookBody
		h.call(http.MethodPost, "/api/v1/webhooks/"+st.w.ID+"/enable",
			`{"recover_since":"`+st.at.Add(-time.Minute).Format(time.RFC3339Nano)+`"}`, http.StatusOK, &got)
		if got.Status != "active" || got.DisabledReason != nil || got.FailingSince != nil {
			t.Errorf("enabled %+v", got)
		}
		want := map[string]string{st.failed: "pending", st.skipped: "pending", st.pending: "pending", st.succeeded: "succeeded", st.old: "failed"}
		if got := h.statuses(st); !maps.Equal(got, want) {
			t.Errorf("after enable: %v, want %v", got, want)
		}
	})
}
