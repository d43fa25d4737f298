package webhook_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// An endpoint's health counts its attempts of the last day by hour with their success rate and latency; an
// attempt's request is rebuilt exactly as the receiver got it (verified with the secret); an event names the
// deliveries that took it to each endpoint.
func TestHealthRequestAndEventDeliveries(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		h := newHarness(t, db)
		s, _ := h.service()
		var calls atomic.Int32
		var received atomic.Pointer[http.Header]
		var body atomic.Pointer[[]byte]
		rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/hook" {
				return
			}
			hdr := r.Header.Clone()
			b, _ := io.ReadAll(r.Body)
			received.Store(&hdr)
			body.Store(&b)
			w.Header().Set("X-Call", strconv.Itoa(int(calls.Add(1))))
			if calls.Load() == 1 {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
		}))
		defer rx.Close()
		e, secret := h.endpoint(rx.URL+"/hook", func(n *store.NewWebhookEndpoint) {
			n.SealHeaders = func(id string) *string {
				return webhook.SealHeaders(h.box, map[string]string{"Authorization": "Bearer s3cret"}, id)
			}
		})
		other, _ := h.endpoint(rx.URL+"/other", func(n *store.NewWebhookEndpoint) { n.Events = []string{"link.*"} })
		h.start(webhook.Config{Schedule: []time.Duration{0, 10 * time.Millisecond}})
		first := h.emit("link.created")
		await.Until(t, "the event delivered to both endpoints", func() [2]string {
			return [2]string{h.status(first.ID, e.ID), h.status(first.ID, other.ID)}
		}, func(s [2]string) bool { return s == [2]string{store.DeliverySucceeded, store.DeliverySucceeded} })

		health, err := s.Health(ctx, h.ws.ID, e.ID, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if health.Attempts != 2 || health.Succeeded != 1 || health.SuccessRate() != 0.5 || len(health.Hours) != 24 || health.Partial {
			t.Fatalf("health %+v", health)
		}
		last := health.Hours[len(health.Hours)-1]
		if last.Succeeded != 1 || last.Failed != 1 || !health.Since.Equal(last.Start.Add(-23*time.Hour)) {
			t.Fatalf("the current hour %+v of %v", last, health.Since)
		}
		if _, err := s.Health(ctx, "ws_other", e.ID, 24*time.Hour); !isProblem(err, problem.NotFound) {
			t.Fatalf("another workspace's endpoint: %v", err)
		}

		d := h.delivery(first.ID, e.ID)
		detail, err := s.Delivery(ctx, h.ws.ID, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(detail.Attempts) != 2 || detail.Attempts[0].ResponseHeaders["X-Call"] != "1" || detail.Attempts[1].ResponseHeaders["X-Call"] != "2" {
			t.Fatalf("attempts %+v", detail.Attempts)
		}
		view, err := s.Get(ctx, h.ws.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		req, ok, err := s.Request(view, detail, detail.Attempts[1])
		if err != nil || !ok {
			t.Fatalf("Request: %v, %v", ok, err)
		}
		got := http.Header{}
		for _, hd := range req.Headers {
			if hd.Hidden {
				if hd.Name != "Authorization" || hd.Value != "" {
					t.Fatalf("static header shown as %+v", hd)
				}
				continue
			}
			got.Set(hd.Name, hd.Value)
		}
		sent := *received.Load()
		for _, name := range []string{webhook.HeaderID, webhook.HeaderTimestamp, webhook.HeaderSignature, "Content-Type", "User-Agent"} {
			if got.Get(name) != sent.Get(name) {
				t.Errorf("%s: rebuilt %q, sent %q", name, got.Get(name), sent.Get(name))
			}
		}
		if req.Method != http.MethodPost || req.URL != e.URL || string(req.Body) != string(*body.Load()) {
			t.Fatalf("request %s %s %s, body sent %s", req.Method, req.URL, req.Body, *body.Load())
		}
		if err := verifier(t, secret).Verify(req.Body, got); err != nil {
			t.Fatalf("the rebuilt request does not verify: %v", err)
		}
		old := detail.Attempts[0]
		old.Signature = nil
		if _, ok, _ := s.Request(view, detail, old); ok {
			t.Fatal("an attempt without a kept signature has a request")
		}

		second := h.emit("webhook.ping")
		byEvent, err := s.EventDeliveries(ctx, h.ws.ID, []string{first.ID, second.ID})
		if err != nil {
			t.Fatal(err)
		}
		if ds := byEvent[first.ID]; len(ds) != 2 || ds[0].EndpointID != e.ID || ds[1].EndpointID != other.ID {
			t.Fatalf("deliveries of the first event: %+v", ds)
		}
		if ds := byEvent[second.ID]; len(ds) != 1 || ds[0].EndpointID != e.ID {
			t.Fatalf("deliveries of the ping (the other endpoint takes link events only): %+v", ds)
		}
		if theirs, err := s.EventDeliveries(ctx, "ws_other", []string{first.ID}); err != nil || len(theirs) != 0 {
			t.Fatalf("another workspace sees %v, %v", theirs, err)
		}
	})
}

func isProblem(err error, code problem.Code) bool {
	p, ok := err.(*problem.Error)
	return ok && p.Code == code
}
