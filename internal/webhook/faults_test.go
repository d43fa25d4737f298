package webhook_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/receivertest"
	"github.com/switchboard/switchboard/internal/webhook"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// fastRetries is a schedule of n attempts, the retries every step apart.
func fastRetries(n int, step time.Duration) []time.Duration {
	s := []time.Duration{0}
	for len(s) < n {
		s = append(s, step)
	}
	return s
}

// emitN queues n events and returns them in order.
func (h *harness) emitN(n int, typ string) []store.Event {
	evs := make([]store.Event, n)
	for i := range evs {
		evs[i] = h.emit(typ)
	}
	return evs
}

// awaitSucceeded waits until every event's delivery to an endpoint succeeded.
func (h *harness) awaitSucceeded(what string, evs []store.Event, endpointID string) {
	h.t.Helper()
	await.Until(h.t, what, func() []string {
		statuses := make([]string, len(evs))
		for i, ev := range evs {
			statuses[i] = h.status(ev.ID, endpointID)
		}
		return statuses
	}, func(statuses []string) bool {
		for _, s := range statuses {
			if s != store.DeliverySucceeded {
				return false
			}
		}
		return true
	})
}

// deliveredOnce checks that the receiver acknowledged every event exactly once: among the requests it answered 2xx
// (those from index failures on), each event's webhook-id appears once and no other ID does.
func deliveredOnce(t *testing.T, rc *receivertest.Receiver, failures int, evs []store.Event) {
	t.Helper()
	want := map[string]bool{}
	for _, ev := range evs {
		want[ev.ID] = true
	}
	reqs := rc.Requests()
	seen := map[string]int{}
	for i, r := range reqs {
		if !want[webhookID(r)] {
			t.Errorf("request %d carries webhook-id %q of no event of the test", i, webhookID(r))
		}
		if i >= failures {
			seen[webhookID(r)]++
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("event %s acknowledged %d times, want exactly once", id, seen[id])
		}
	}
	if len(reqs)-failures != len(evs) {
		t.Errorf("%d successful requests for %d events", len(reqs)-failures, len(evs))
	}
}

// While the receiver is down every delivery is retried; when it comes back (failing a few more requests first) each
// event is delivered exactly once, with the same webhook-id on every attempt, and nothing is lost.
func TestReceiverDownThenBack(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // down: connections are refused
		e, secret := h.endpoint("http://"+addr+"/hook", nil)
		h.start(webhook.Config{Schedule: fastRetries(200, 50*time.Millisecond)})
		evs := h.emitN(5, "link.created")
		await.Until(t, "two failed attempts of every delivery", func() []int {
			attempts := make([]int, len(evs))
			for i, ev := range evs {
				attempts[i] = h.delivery(ev.ID, e.ID).Attempts
			}
			return attempts
		}, func(attempts []int) bool { return slices.Min(attempts) >= 2 })

		ln, err = net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("the receiver's port was taken meanwhile: %v", err)
		}
		const failures = 5
		rc := receivertest.Serve(t, ln, receivertest.Statuses(503, 503, 503, 503, 503))
		h.awaitSucceeded("every event delivered", evs, e.ID)
		deliveredOnce(t, rc, failures, evs)
		for _, r := range rc.Requests() {
			if err := verify(t, secret, r); err != nil {
				t.Errorf("request %s does not verify: %v", webhookID(r), err)
			}
		}
		for _, ev := range evs {
			as := h.attempts(h.delivery(ev.ID, e.ID).ID)
			if *as[0].ErrorClass != webhook.ClassConnectionRefused || as[len(as)-1].ErrorClass != nil {
				t.Errorf("attempts of %s: first %v, last %v; want connection_refused, then a success", ev.ID, *as[0].ErrorClass, as[len(as)-1].ErrorClass)
			}
		}
	})
}

// A receiver that does not answer holds at most its in-flight cap of workers: another endpoint's deliveries get
// through while it holds them, and no more of its own are sent until one of its attempts ends. The slow receiver
// holds its requests until the other endpoint has all its deliveries (a barrier, not a race against a timeout):
// without the cap it would hold every worker and the test would wait for the attempts' timeout and fail.
func TestSlowReceiverWithoutDelayingOthers(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		const capacity, events = 2, 4
		fastDone := make(chan struct{})
		var heldWhileFastDone atomic.Int32
		slow := receivertest.New(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n >= capacity {
				return
			}
			select {
			case <-fastDone:
				heldWhileFastDone.Add(1)
			case <-r.Context().Done():
			}
		})
		fast := receivertest.New(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n == events-1 {
				close(fastDone)
			}
		})
		s, _ := h.endpoint(slow.URL+"/hook", nil)
		f, _ := h.endpoint(fast.URL+"/hook", nil)
		h.start(webhook.Config{Timeout: 20 * time.Second, PerEndpoint: capacity, Workers: capacity + 1})
		evs := h.emitN(events, "link.created")
		h.awaitSucceeded("the fast endpoint's deliveries", evs, f.ID)
		h.awaitSucceeded("the slow endpoint's deliveries", evs, s.ID)
		if n := heldWhileFastDone.Load(); n != capacity {
			t.Errorf("%d of the slow endpoint's first %d requests were still held when the fast endpoint had all its deliveries", n, capacity)
		}
		// The slow endpoint's third request is only sent once one of the held ones ended.
		got := slow.Requests()
		if len(got) <= capacity {
			t.Fatalf("the slow endpoint got %d requests", len(got))
		}
		if third := got[capacity].At; !fast.Requests()[events-1].At.Before(third) {
			t.Errorf("the slow endpoint's request %d came before the fast endpoint had all its deliveries: past its in-flight cap", capacity+1)
		}
	})
}

// An attempt that gets no answer within the timeout fails as a timeout, and is retried no sooner than
// ThrottledWait (the schedule's next step is shorter).
func TestTimedOutAttemptRetriedAfterThrottledWait(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		slow := receivertest.New(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 0 {
				<-r.Context().Done() // until the dispatcher gives up
			}
		})
		e, _ := h.endpoint(slow.URL+"/hook", nil)
		cfg := webhook.Config{Timeout: time.Second, Schedule: fastRetries(4, 10*time.Millisecond)}
		h.start(cfg)
		ev := h.emit("link.created")
		await.Equal(t, "the delivery", func() string { return h.status(ev.ID, e.ID) }, store.DeliverySucceeded)
		as := h.attempts(h.delivery(ev.ID, e.ID).ID)
		if len(as) < 2 || as[0].ErrorClass == nil || *as[0].ErrorClass != webhook.ClassTimeout {
			t.Fatalf("attempts %+v, want a timeout first", as)
		}
		for i, a := range as[:len(as)-1] {
			if a.ErrorClass == nil || *a.ErrorClass != webhook.ClassTimeout {
				continue
			}
			ended := a.StartedAt.Add(time.Duration(a.DurationMS) * time.Millisecond)
			if wait := as[i+1].StartedAt.Sub(ended); wait < quiet(cfg).ThrottledWait-time.Millisecond {
				t.Errorf("attempt %d was retried %v after its timeout, want at least %v", i+1, wait, quiet(cfg).ThrottledWait)
			}
		}
	})
}

// Many events to a receiver that answers 500 to its first requests: every event is delivered, exactly once.
func TestServerErrorStorm(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		const failures = 60
		codes := make([]int, failures)
		for i := range codes {
			codes[i] = http.StatusInternalServerError
		}
		rc := receivertest.New(t, receivertest.Statuses(codes...))
		e, _ := h.endpoint(rc.URL+"/hook", nil)
		h.start(webhook.Config{Schedule: fastRetries(200, 20*time.Millisecond)})
		evs := h.emitN(30, "link.created")
		h.awaitSucceeded("every event delivered", evs, e.ID)
		deliveredOnce(t, rc, failures, evs)
	})
}

// A 429 with Retry-After: 1 holds the next attempt back for at least a second, though the schedule and the
// throttled wait ask for less.
func TestRetryAfterHonoured(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		rc := receivertest.New(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 0 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		})
		e, _ := h.endpoint(rc.URL+"/hook", nil)
		h.start(webhook.Config{Schedule: []time.Duration{0, 10 * time.Millisecond}})
		ev := h.emit("link.created")
		await.Equal(t, "delivered", func() string { return h.status(ev.ID, e.ID) }, store.DeliverySucceeded)
		reqs := rc.Requests()
		if gap := reqs[1].At.Sub(reqs[0].At); gap < time.Second {
			t.Errorf("retried %v after 429 with Retry-After: 1", gap)
		}
		if as := h.attempts(h.delivery(ev.ID, e.ID).ID); *as[0].ErrorClass != webhook.ClassRateLimited || *as[0].StatusCode != 429 {
			t.Errorf("first attempt %+v", as[0])
		}
	})
}

// At dial time the guard refuses every non-public address, however the URL spells it or whatever a name resolves
// to now (DNS rebinding after registration): the attempt is classed "blocked" and no connection reaches the
// receiver.
func TestSSRFBlockedAtDialTime(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		rc := receivertest.New(t, nil)
		_, port, _ := net.SplitHostPort(rc.Listener.Addr().String())
		lookup := func(_ context.Context, _, host string) ([]netip.Addr, error) {
			if host == "receiver.test" {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, errors.New("no such host")
		}
		guard := egress.NewGuard(egress.Policy{AllowHTTP: true}, egress.WithLookup(lookup))
		targets := map[string]string{
			"a name resolving to loopback": "http://receiver.test:" + port + "/hook",
			"loopback":                     "http://127.0.0.1:" + port + "/hook",
			"IPv6 loopback":                "http://[::1]:" + port + "/hook",
			"cloud metadata":               "http://169.254.169.254/latest/meta-data/",
			"IPv4-mapped IPv6":             "http://[::ffff:127.0.0.1]:" + port + "/hook",
			"decimal IPv4":                 "http://2130706433:" + port + "/hook",
			"private network":              "http://10.0.0.1/hook",
		}
		endpoints := map[string]store.WebhookEndpoint{}
		for name, url := range targets {
			endpoints[name], _ = h.endpoint(url, nil)
		}
		h.startWith(guard, webhook.Config{Schedule: []time.Duration{0}})
		ev := h.emit("link.created")
		for name, e := range endpoints {
			await.Equal(t, name, func() string { return h.status(ev.ID, e.ID) }, store.DeliveryFailed)
			as := h.attempts(h.delivery(ev.ID, e.ID).ID)
			if len(as) != 1 || as[0].ErrorClass == nil || *as[0].ErrorClass != webhook.ClassBlocked || as[0].StatusCode != nil || as[0].ResponseExcerpt != nil {
				t.Errorf("%s (%s): attempts %+v, want one classed blocked", name, targets[name], as)
			}
		}
		if n := rc.Conns(); n != 0 {
			t.Errorf("%d connections reached the receiver", n)
		}
	})
}

// A plain-http endpoint registered while the operator allowed http is refused once the policy is https-only again:
// the attempt is classed "blocked" (not a network failure) and nothing is sent.
func TestSchemeForbiddenAtSendTimeIsBlocked(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		rc := receivertest.New(t, nil)
		e, _ := h.endpoint(rc.URL+"/hook", nil)
		h.startWith(egress.NewGuard(egress.Policy{AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
			webhook.Config{Schedule: []time.Duration{0}})
		ev := h.emit("link.created")
		await.Equal(t, "failed", func() string { return h.status(ev.ID, e.ID) }, store.DeliveryFailed)
		as := h.attempts(h.delivery(ev.ID, e.ID).ID)
		if len(as) != 1 || as[0].ErrorClass == nil || *as[0].ErrorClass != webhook.ClassBlocked {
			t.Errorf("attempts %+v, want one classed blocked", as)
		}
		if n := rc.Conns(); n != 0 {
			t.Errorf("%d connections reached the receiver", n)
		}
	})
}

// A redirect is a failure ("http_3xx"), never followed: the address it points to gets nothing.
func TestRedirectNotFollowed(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		inner := receivertest.New(t, nil)
		outer := receivertest.New(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, inner.URL+"/hook", http.StatusFound)
		})
		e, _ := h.endpoint(outer.URL+"/hook", nil)
		h.start(webhook.Config{Schedule: []time.Duration{0}})
		ev := h.emit("link.created")
		await.Equal(t, "failed", func() string { return h.status(ev.ID, e.ID) }, store.DeliveryFailed)
		as := h.attempts(h.delivery(ev.ID, e.ID).ID)
		if len(as) != 1 || *as[0].ErrorClass != "http_3xx" || *as[0].StatusCode != http.StatusFound {
			t.Errorf("attempts %+v", as)
		}
		if inner.Conns() != 0 {
			t.Error("the redirect was followed")
		}
	})
}

// During a rotation's grace period every delivery carries both signatures and each secret alone verifies it with
// the official library; after the grace period only the new secret does.
func TestSecretRotation(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		h := newHarness(t, db)
		rc := receivertest.New(t, nil)
		e, oldSecret := h.endpoint(rc.URL+"/hook", nil)
		newSecret, err := webhook.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		h.set(e.ID, map[string]any{"previous_secret": e.Secret, "secret": h.box.Seal([]byte(newSecret), []byte(e.ID)),
			"previous_secret_until": time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)})
		h.start(webhook.Config{})
		h.emit("link.created")
		await.Equal(t, "delivery during the grace period", rc.Count, 1)
		during := rc.Requests()[0]
		if sigs := strings.Fields(during.Header.Get("webhook-signature")); len(sigs) != 2 {
			t.Errorf("signatures during the grace period: %q, want two", sigs)
		}
		for name, secret := range map[string]string{"old": oldSecret, "new": newSecret} {
			if err := verify(t, secret, during); err != nil {
				t.Errorf("during the grace period the %s secret alone does not verify: %v", name, err)
			}
		}

		h.set(e.ID, map[string]any{"previous_secret_until": time.Now().Add(-time.Second).UTC().Truncate(time.Microsecond)})
		h.emit("link.created")
		await.Equal(t, "delivery after the grace period", rc.Count, 2)
		after := rc.Requests()[1]
		if err := verify(t, newSecret, after); err != nil {
			t.Errorf("after the grace period the new secret does not verify: %v", err)
		}
		if err := verify(t, oldSecret, after); err == nil {
			t.Error("after the grace period the old secret still verifies")
		}
	})
}
