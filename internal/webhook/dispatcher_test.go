package webhook_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/ratelimit"
	"github.com/switchboard/switchboard/internal/receivertest"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A queued event arrives signed, verifiable with the official Standard Webhooks library, in the envelope (the
// event as GET /events shows it), with the endpoint's static headers but never letting them replace the signature.
func TestDeliverySignedAndVerifiable(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		rc := receivertest.New(t, nil)
		e, secret := h.endpoint(rc.URL+"/hook", func(n *store.NewWebhookEndpoint) {
			n.SealHeaders = func(id string) *string {
				return webhook.SealHeaders(h.box, map[string]string{"Authorization": "Bearer n8n-token", "Webhook-Signature": "forged"}, id)
			}
		})
		h.start(webhook.Config{})
		ev := h.emit("link.created")
		await.Equal(t, "delivery", rc.Count, 1)
		got := rc.Requests()[0]
		if err := verify(t, secret, got); err != nil {
			t.Fatalf("the official library rejects the delivery: %v", err)
		}
		if webhookID(got) != ev.ID || got.Header.Get("Authorization") != "Bearer n8n-token" {
			t.Errorf("headers %v", got.Header)
		}
		var env map[string]any
		if err := json.Unmarshal(got.Body, &env); err != nil {
			t.Fatal(err)
		}
		if env["id"] != ev.ID || env["type"] != "link.created" || env["api_version"] != "v1" || env["workspace_id"] != h.ws.ID {
			t.Errorf("envelope %v", env)
		}
		await.Equal(t, "delivery recorded as succeeded", func() string { return h.status(ev.ID, e.ID) }, store.DeliverySucceeded)
		if d := h.delivery(ev.ID, e.ID); d.Attempts != 1 || d.LeaseUntil != nil {
			t.Errorf("delivery %+v", d)
		}
	})
}

// A running dispatcher keeps the endpoints it read, and sends the next delivery with what changed since: a new
// URL, new headers.
func TestEndpointChangesReachTheNextDelivery(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		before, after := receivertest.New(t, nil), receivertest.New(t, nil)
		e, _ := h.endpoint(before.URL+"/hook", nil)
		h.start(webhook.Config{})
		h.emit("link.created")
		await.Equal(t, "delivery to the first URL", before.Count, 1)
		h.set(e.ID, map[string]any{"url": after.URL + "/hook",
			"sealed_headers": webhook.SealHeaders(h.box, map[string]string{"X-Tenant": "acme"}, e.ID)})
		h.emit("link.created")
		await.Equal(t, "delivery to the new URL", after.Count, 1)
		if before.Count() != 1 {
			t.Errorf("the old URL got %d deliveries, want 1", before.Count())
		}
		if got := after.Requests()[0].Header.Get("X-Tenant"); got != "acme" {
			t.Errorf("X-Tenant %q, want the new header", got)
		}
	})
}

// A failing receiver gets the same webhook-id on every retry until it answers 2xx; a redirect is a failure.
func TestRetriesUntilDelivered(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		rc := receivertest.New(t, receivertest.Statuses(500, 503, 302))
		e, _ := h.endpoint(rc.URL+"/hook", nil)
		h.start(webhook.Config{Schedule: []time.Duration{0, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}})
		ev := h.emit("link.updated")
		await.Equal(t, "succeeded", func() string { return h.status(ev.ID, e.ID) }, store.DeliverySucceeded)
		for _, r := range rc.Requests() {
			if webhookID(r) != ev.ID {
				t.Errorf("webhook-id %q, want %q on every attempt", webhookID(r), ev.ID)
			}
		}
		attempts := h.attempts(h.delivery(ev.ID, e.ID).ID)
		if len(attempts) != 4 || *attempts[2].ErrorClass != "http_3xx" || *attempts[3].ResponseExcerpt != "receiver says hi" {
			t.Errorf("attempt log %+v", attempts)
		}
	})
}

// A receiver's answer is logged whatever its bytes: a body with U+0000 and bytes that are not UTF-8 (and headers
// with them) is kept as text both databases store, and the delivery is recorded — such an answer once failed the
// write of the whole batch of outcomes, leaving its deliveries to be sent again forever.
func TestAnyResponseBytesAreLogged(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		odd := receivertest.New(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Odd", "caf\xe9")
			_, _ = w.Write([]byte("ok\x00then\xffmore '\\x00';--"))
		})
		plain := receivertest.New(t, nil)
		e, _ := h.endpoint(odd.URL+"/hook", nil)
		other, _ := h.endpoint(plain.URL+"/hook", nil)
		h.start(webhook.Config{})
		ev := h.emit("link.created")
		for _, id := range []string{e.ID, other.ID} {
			await.Equal(t, "succeeded", func() string { return h.status(ev.ID, id) }, store.DeliverySucceeded)
		}
		attempts := h.attempts(h.delivery(ev.ID, e.ID).ID)
		if len(attempts) != 1 || attempts[0].ResponseExcerpt == nil ||
			*attempts[0].ResponseExcerpt != "ok\uFFFDthen\uFFFDmore '\\x00';--" ||
			attempts[0].ResponseHeaders["X-Odd"] != "caf\uFFFD" {
			t.Errorf("attempt log %+v", attempts)
		}
	})
}

// 410 Gone disables the endpoint and tells the workspace — an endpoint subscribed to webhook events receives
// webhook.endpoint.disabled and webhook.delivery.exhausted in the spec's shapes — and the gone endpoint's later
// events are recorded as skipped, nothing sent.
func TestGoneDisablesEndpoint(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		gone := receivertest.New(t, receivertest.Statuses(http.StatusGone))
		ops := receivertest.New(t, nil)
		e, _ := h.endpoint(gone.URL+"/hook", func(n *store.NewWebhookEndpoint) { n.Events = []string{"link.*"} })
		watcher, _ := h.endpoint(ops.URL+"/hook", func(n *store.NewWebhookEndpoint) { n.Events = []string{"webhook.*"} })
		h.start(webhook.Config{})
		first := h.emit("link.deleted")
		await.Equal(t, "operational events delivered", ops.Count, 2)

		got, err := db.Webhooks.Get(context.Background(), h.ws.ID, e.ID)
		if err != nil || got.Status != store.EndpointDisabled || got.DisabledReason == nil || *got.DisabledReason != "gone" {
			t.Fatalf("endpoint after 410: %+v, %v", got, err)
		}
		d := h.delivery(first.ID, e.ID)
		if d.Status != store.DeliveryFailed || d.Attempts != 1 {
			t.Errorf("the delivery answered 410 is not failed for good: %+v", d)
		}
		disabled := h.events("webhook.endpoint.disabled")
		exhausted := h.events("webhook.delivery.exhausted")
		if len(disabled) != 1 || len(exhausted) != 1 {
			t.Fatalf("%d disabled and %d exhausted events, want one of each", len(disabled), len(exhausted))
		}
		conformsTo(t, disabled[0], "WebhookEndpointDisabledEvent")
		conformsTo(t, exhausted[0], "WebhookDeliveryExhaustedEvent")
		var dd gen.WebhookEndpointDisabledEvent
		_ = json.Unmarshal(disabled[0].Data, &dd)
		if dd.WebhookId != e.ID || dd.Url != gone.URL+"/hook" || dd.Reason != "gone" || dd.FailingSince == nil {
			t.Errorf("disabled data %s", disabled[0].Data)
		}
		var xd gen.WebhookDeliveryExhaustedEvent
		_ = json.Unmarshal(exhausted[0].Data, &xd)
		if xd.DeliveryId != d.ID || xd.WebhookId != e.ID || xd.EventId != first.ID || xd.EventType != "link.deleted" ||
			xd.Attempts != 1 || xd.LastStatusCode == nil || *xd.LastStatusCode != 410 || xd.LastError == nil || *xd.LastError != "http_410" {
			t.Errorf("exhausted data %s", exhausted[0].Data)
		}
		seen := map[string]bool{}
		for _, r := range ops.Requests() {
			seen[webhookID(r)] = true
		}
		if !seen[disabled[0].ID] || !seen[exhausted[0].ID] {
			t.Errorf("the watching endpoint %s did not receive both operational events", watcher.ID)
		}

		later := h.emit("link.created")
		if s := h.status(later.ID, e.ID); s != store.DeliverySkipped {
			t.Errorf("a later event to the disabled endpoint is %q, want skipped", s)
		}
		if gone.Count() != 1 {
			t.Errorf("the gone receiver got %d requests, want 1", gone.Count())
		}
	})
}

// An endpoint that fails for DisableAfter without a success is disabled as "failing", with the start of its run of
// failures in the event; its delivery waits (pending) for it to be enabled.
func TestFailingEndpointDisabledAfterAWhile(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		rc := receivertest.New(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
		e, _ := h.endpoint(rc.URL+"/hook", func(n *store.NewWebhookEndpoint) { n.Events = []string{"link.*"} })
		schedule := []time.Duration{0}
		for range 200 {
			schedule = append(schedule, 20*time.Millisecond)
		}
		h.start(webhook.Config{Schedule: schedule, DisableAfter: 300 * time.Millisecond})
		ev := h.emit("link.created")
		await.Equal(t, "the endpoint disabled", func() int { return len(h.events("webhook.endpoint.disabled")) }, 1)
		got, _ := db.Webhooks.Get(context.Background(), h.ws.ID, e.ID)
		if got.Status != store.EndpointDisabled || *got.DisabledReason != "failing" {
			t.Errorf("endpoint %+v", got)
		}
		disabled := h.events("webhook.endpoint.disabled")[0]
		conformsTo(t, disabled, "WebhookEndpointDisabledEvent")
		var data gen.WebhookEndpointDisabledEvent
		_ = json.Unmarshal(disabled.Data, &data)
		d := h.delivery(ev.ID, e.ID)
		first := h.attempts(d.ID)[0].StartedAt
		if data.Reason != "failing" || data.FailingSince == nil || !data.FailingSince.Equal(first) {
			t.Errorf("disabled data %s, want failing since the first attempt at %v", disabled.Data, first)
		}
		// How many attempts failed first depends on how soon each was recorded: on a loaded machine the first one
		// may be recorded more than DisableAfter after it started, and disable the endpoint by itself.
		if d.Status != store.DeliveryPending || d.Attempts < 1 {
			t.Errorf("the delivery should wait for the endpoint to be enabled: %+v", d)
		}
	})
}

// A paused endpoint's deliveries queue — nothing is sent while another endpoint receives the same events — and go
// out in event order once it resumes.
func TestPausedEndpointQueuesThenSendsInOrder(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		paused, other := receivertest.New(t, nil), receivertest.New(t, nil)
		p, _ := h.endpoint(paused.URL+"/hook", nil)
		h.endpoint(other.URL+"/hook", nil)
		h.set(p.ID, map[string]any{"status": store.EndpointPaused})
		d := h.start(webhook.Config{PerEndpoint: 1})
		evs := h.emitN(5, "link.created")
		// The other endpoint got the last event: the dispatcher has looked at every delivery due before it.
		await.Equal(t, "the active endpoint's deliveries", other.Count, 5)
		if n := paused.Count(); n != 0 {
			t.Fatalf("a paused endpoint received %d requests", n)
		}
		h.set(p.ID, map[string]any{"status": store.EndpointActive})
		d.Wake()
		h.awaitSucceeded("the queue sent after resuming", evs, p.ID)
		// Each delivery's first attempt started after the one of the event before. (The order of requests at the
		// receiver could differ only if a transport failure under load made an attempt retry: retries never hold
		// the queue back.)
		var prev time.Time
		for i, ev := range evs {
			first := h.attempts(h.delivery(ev.ID, p.ID).ID)[0]
			if i > 0 && first.StartedAt.Before(prev) {
				t.Errorf("delivery of event %d started at %s, before the one of event %d (%s): not in event order",
					i, first.StartedAt, i-1, prev)
			}
			prev = first.StartedAt
		}
		if n := paused.Count(); n < 5 {
			t.Errorf("the receiver got %d requests, want 5", n)
		}
	})
}

// A disabled endpoint's events are recorded as skipped (so enable and recover can send them) and nothing is sent.
func TestDisabledEndpointRecordsSkipped(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		disabled, other := receivertest.New(t, nil), receivertest.New(t, nil)
		e, _ := h.endpoint(disabled.URL+"/hook", nil)
		o, _ := h.endpoint(other.URL+"/hook", nil)
		h.set(e.ID, map[string]any{"status": store.EndpointDisabled, "disabled_reason": "manual"})
		h.start(webhook.Config{})
		ev := h.emit("link.created")
		await.Equal(t, "the active endpoint's delivery", func() string { return h.status(ev.ID, o.ID) }, store.DeliverySucceeded)
		if s := h.status(ev.ID, e.ID); s != store.DeliverySkipped {
			t.Errorf("delivery to the disabled endpoint is %q, want skipped", s)
		}
		if disabled.Count() != 0 {
			t.Errorf("the disabled endpoint received %d requests", disabled.Count())
		}
	})
}

// An endpoint's rate limit holds its deliveries back after a burst of rate, and holds back no other endpoint:
// the limiter refuses the limited endpoint's deliveries past its burst (they wait), is never asked about the other
// one, and the other one has received all of its deliveries before the limited one gets its first past the burst.
// The rate is one a second, so that order is the limiter's doing, whatever the load of the machine.
func TestRateLimitPerEndpoint(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		limited, free := receivertest.New(t, nil), receivertest.New(t, nil)
		rate := 1
		lim, _ := h.endpoint(limited.URL+"/hook", func(n *store.NewWebhookEndpoint) { n.RateLimit = &rate })
		h.endpoint(free.URL+"/hook", nil)
		const events = 3
		for range events {
			h.emit("link.created")
		}
		limiter := &countingLimiter{Limiter: ratelimit.New(), refused: map[string]int{}, asked: map[string]int{}}
		h.start(webhook.Config{Limiter: limiter})
		await.Equal(t, "every delivery", func() [2]int { return [2]int{limited.Count(), free.Count()} }, [2]int{events, events})
		if refused, asked := limiter.counts("webhook:" + lim.ID); refused == 0 || len(asked) != 1 {
			t.Errorf("the limiter refused the limited endpoint %d times and was asked about %v: want refusals, and only it", refused, asked)
		}
		if last, held := free.Requests()[events-1].At, limited.Requests()[rate].At; !last.Before(held) {
			t.Errorf("the unlimited endpoint waited for the limited one: its last request at %v, the limited one's first past the burst at %v", last, held)
		}
	})
}

// countingLimiter counts, per key, the Takes it was asked and those it refused.
type countingLimiter struct {
	ratelimit.Limiter
	mu             sync.Mutex
	refused, asked map[string]int
}

func (l *countingLimiter) Take(key string, p ratelimit.Policy, now time.Time) ratelimit.Decision {
	d := l.Limiter.Take(key, p, now)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked[key]++
	if !d.Allowed {
		l.refused[key]++
	}
	return d
}

// counts returns the refusals of key and every key the limiter was asked about.
func (l *countingLimiter) counts(key string) (int, map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused[key], maps.Clone(l.asked)
}

// On shutdown, Run returns only once the attempts in flight are recorded: nothing stays leased.
func TestShutdownRecordsAttemptsInFlight(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		release := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		rc := receivertest.New(t, func(_ int, w http.ResponseWriter, _ *http.Request) { <-release })
		e, _ := h.endpoint(rc.URL+"/hook", nil)
		d := webhook.NewDispatcher(db, h.box, h.guard, quiet(webhook.Config{Timeout: 10 * time.Second}))
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = d.Run(ctx); close(done) }()
		ev := h.emit("link.created")
		await.Equal(t, "the attempt in flight", rc.Count, 1)
		stop()
		once.Do(func() { close(release) })
		<-done
		got := h.delivery(ev.ID, e.ID)
		if got.Status != store.DeliverySucceeded || got.LeaseUntil != nil || got.Attempts != 1 {
			t.Errorf("after Run returned: %+v", got)
		}
	})
}

// Deliveries queued by another process (nobody calls Wake) go out without waiting for a poll: PostgreSQL notifies,
// and on SQLite the dispatcher sees the commit in the WAL index.
func TestWokenByCommitsOfOtherProcesses(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		rc := receivertest.New(t, nil)
		h.endpoint(rc.URL+"/hook", nil)
		h.start(webhook.Config{Poll: time.Hour})
		h.emit("link.created")
		await.Equal(t, "delivered without a poll", rc.Count, 1)
	})
}
