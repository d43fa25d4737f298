package webhook_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/patch"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/problem/problemtest"
	"github.com/switchboard/switchboard/internal/receivertest"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// service is the webhook service over the harness's database, key and guard, counting its dispatcher wake-ups.
func (h *harness) service() (*webhook.Service, *int) {
	h.t.Helper()
	wakes := new(int)
	s, err := webhook.NewService(h.db, events.NewOutbox(h.db, events.Builtin()), webhook.ServiceConfig{Box: h.box, Guard: h.guard,
		Sender: webhook.NewSender(h.box, h.guard, time.Second), Wake: func() { *wakes++ }, Logger: quiet(webhook.Config{}).Logger})
	if err != nil {
		h.t.Fatal(err)
	}
	return s, wakes
}

// The service checks what the schema cannot and answers with problems a client can act on.
func TestServiceRules(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		h := newHarness(t, db)
		s, wakes := h.service()
		ws := h.ws.ID

		_, _, err := s.Create(ctx, ws, webhook.NewEndpoint{URL: "ftp://example.com/hook", Events: []string{"link.*", "nope.*"},
			Headers: map[string]string{"Webhook-Id": "x", "X-A/B": "1", "X-Ok": "line\nbreak"}})
		problemtest.Want(t, err, problem.ValidationFailed, "/url", "/events/1", "/headers/Webhook-Id", "/headers/X-A~1B",
			"/headers/X-Ok")

		e, secret, err := s.Create(ctx, ws, webhook.NewEndpoint{URL: "http://127.0.0.1:9/hook", Events: []string{"*"},
			Headers: map[string]string{"X-Auth": "s3cr3t"}, RateLimit: ptr(5)})
		if err != nil {
			t.Fatal(err)
		}
		if stored, err := db.Webhooks.Get(ctx, ws, e.ID); err != nil {
			t.Fatal(err)
		} else if opened, err := h.box.Open(stored.Secret, []byte(e.ID)); err != nil || string(opened) != secret {
			t.Errorf("the stored secret does not open to the one returned: %v", err)
		}
		if !slices.Equal(e.HeaderNames, []string{"X-Auth"}) || *e.RateLimit != 5 || e.Status != "active" ||
			e.Type != store.EndpointHTTPS || e.Destination != nil {
			t.Errorf("created %+v", e)
		}
		_, _, err = s.Create(ctx, "ws_missing", webhook.NewEndpoint{URL: "http://127.0.0.1:9/hook", Events: []string{"*"}})
		problemtest.Want(t, err, problem.NotFound)

		e, err = s.Update(ctx, ws, e.ID, webhook.EndpointChange{RateLimit: patch.Clear[int](), Headers: &map[string]string{}})
		if err != nil || e.RateLimit != nil || len(e.HeaderNames) != 0 {
			t.Errorf("update cleared %+v, %v", e, err)
		}
		_, err = s.Update(ctx, ws, e.ID, webhook.EndpointChange{Events: &[]string{"link.nope"}})
		problemtest.Want(t, err, problem.ValidationFailed, "/events/0")

		_, err = s.Recover(ctx, ws, e.ID, time.Now().Add(-15*24*time.Hour), nil)
		problemtest.Want(t, err, problem.ValidationFailed, "/since")
		_, err = s.Recover(ctx, ws, e.ID, time.Now().Add(-time.Hour), ptr(time.Now().Add(-2*time.Hour)))
		problemtest.Want(t, err, problem.ValidationFailed, "/until")
		_, err = s.Enable(ctx, ws, e.ID, ptr(time.Now().Add(-15*24*time.Hour)))
		problemtest.Want(t, err, problem.ValidationFailed, "/recover_since")
		_, err = s.Test(ctx, ws, e.ID, "link.nope")
		problemtest.Want(t, err, problem.ValidationFailed, "/event_type")

		p := problemtest.Want(t, func() error { _, err := s.Get(ctx, ws, "whk_missing"); return err }(), problem.NotFound)
		if p.Detail != "There is no webhook endpoint whk_missing in this workspace." {
			t.Errorf("detail %q", p.Detail)
		}
		_, err = s.Redeliver(ctx, ws, "dlv_missing")
		problemtest.Want(t, err, problem.NotFound)

		h.set(e.ID, map[string]any{"status": store.EndpointDisabled, "disabled_reason": "gone"})
		_, err = s.Pause(ctx, ws, e.ID)
		if p := problemtest.Want(t, err, problem.WebhookDisabled); p.Detail !=
			"This endpoint was disabled because its receiver answered 410 Gone. Enable it with POST /api/v1/webhooks/"+e.ID+
				"/enable (with recover_since to send what it missed)." {
			t.Errorf("detail %q", p.Detail)
		}
		if *wakes != 0 {
			t.Errorf("%d wake-ups before anything was queued", *wakes)
		}
		if e, err = s.Enable(ctx, ws, e.ID, nil); err != nil || e.Status != store.EndpointActive || *wakes != 1 {
			t.Errorf("enable: %+v, %v, %d wake-ups", e, err, *wakes)
		}
	})
}

// A test ping reaches the receiver signed, and its failure is a result, not an error.
func TestServiceTest(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		h := newHarness(t, db)
		s, _ := h.service()
		rc := receivertest.New(t, receivertest.Statuses(503))
		e, secret, err := s.Create(ctx, h.ws.ID, webhook.NewEndpoint{URL: rc.URL + "/hook", Events: []string{"*"}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Test(ctx, h.ws.ID, e.ID, "")
		if err != nil || res.Delivered || res.EventType != "webhook.ping" || res.ErrorClass != "http_5xx" ||
			res.StatusCode == nil || *res.StatusCode != 503 {
			t.Fatalf("test: %+v, %v", res, err)
		}
		got := rc.Requests()
		if len(got) != 1 || webhookID(got[0]) != res.EventID {
			t.Fatalf("the receiver got %d requests", len(got))
		}
		if err := verify(t, secret, got[0]); err != nil {
			t.Errorf("the ping does not verify with the endpoint's secret: %v", err)
		}
	})
}
