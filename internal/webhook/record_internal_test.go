package webhook

import (
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
)

// judgeFailures judges a batch's failures attempt by attempt: the first failure of an endpoint without a run of
// failures starts it, the first attempt that crosses the limit (or answers 410) disables the endpoint, and only
// endpoints that changed are written.
func TestJudgeFailures(t *testing.T) {
	t0 := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	t1 := t0.Add(6 * 24 * time.Hour) // when the batch is recorded
	since := t0.Add(5 * 24 * time.Hour)
	es := []store.WebhookEndpoint{
		{ID: "whk_new", URL: "https://a.example/hook", Status: store.EndpointActive},
		{ID: "whk_recent", URL: "https://b.example/hook", Status: store.EndpointActive, FailingSince: &since},
		{ID: "whk_disabled", URL: "https://c.example/hook", Status: store.EndpointDisabled},
		{ID: "whk_gone", URL: "https://d.example/hook", Status: store.EndpointActive},
	}
	attempt := func(endpointID string, started time.Time) (AttemptResult, AttemptEffects) {
		return AttemptResult{StartedAt: started}, AttemptEffects{Delivery: store.Delivery{EndpointID: endpointID}}
	}
	var rs []AttemptResult
	var fxs []AttemptEffects
	add := func(r AttemptResult, fx AttemptEffects, edit func(*AttemptResult, *AttemptEffects)) {
		if edit != nil {
			edit(&r, &fx)
		}
		rs, fxs = append(rs, r), append(fxs, fx)
	}
	r, fx := attempt("whk_new", t0)
	add(r, fx, nil) // starts whk_new's run six days before t1: crosses the limit and disables it
	r, fx = attempt("whk_new", t1)
	add(r, fx, nil) // finds it disabled
	r, fx = attempt("whk_recent", t1)
	add(r, fx, nil) // within the limit of a run that started a day ago: no change
	r, fx = attempt("whk_disabled", t1)
	add(r, fx, nil) // starts the run of an endpoint disabled already, which stays as it is
	r, fx = attempt("whk_gone", t1)
	add(r, fx, func(r *AttemptResult, _ *AttemptEffects) { r.Succeeded = true }) // a success is not judged here
	r, fx = attempt("whk_gone", t1)
	add(r, fx, func(_ *AttemptResult, fx *AttemptEffects) { fx.Superseded = true }) // another dispatcher's now
	r, fx = attempt("whk_gone", t1)
	add(r, fx, func(r *AttemptResult, _ *AttemptEffects) { r.Gone = true }) // 410: disabled within the limit
	r, fx = attempt("whk_deleted", t1)
	add(r, fx, nil) // its endpoint was deleted with it

	ids := []string{"whk_new", "whk_recent", "whk_disabled", "whk_gone", "whk_deleted"}
	changes := judgeFailures(rs, fxs, ids, es, 5*24*time.Hour, t1)

	disabledBy := map[int]string{0: "failing", 6: "gone"}
	for i, fx := range fxs {
		if fx.EndpointDisabled != disabledBy[i] {
			t.Errorf("attempt %d disabled its endpoint as %q, want %q", i, fx.EndpointDisabled, disabledBy[i])
		}
	}
	if fxs[0].endpointURL != "https://a.example/hook" || !fxs[0].failingSince.Equal(t0) {
		t.Errorf("the disabling attempt names %q failing since %v", fxs[0].endpointURL, fxs[0].failingSince)
	}
	if fxs[6].failingSince == nil || !fxs[6].failingSince.Equal(t1) {
		t.Errorf("the 410 names the run of failures it started, got %v", fxs[6].failingSince)
	}
	want := []struct {
		id       string
		since    *time.Time
		disabled string
	}{
		{"whk_new", &t0, "failing"},
		{"whk_disabled", &t1, ""},
		{"whk_gone", &t1, "gone"},
	}
	if len(changes) != len(want) {
		t.Fatalf("changes %+v, want %d", changes, len(want))
	}
	for i, w := range want {
		c := changes[i]
		reason := ""
		if c.DisabledReason != nil {
			reason = *c.DisabledReason
		}
		if c.EndpointID != w.id || c.FailingSince == nil || !c.FailingSince.Equal(*w.since) || reason != w.disabled {
			t.Errorf("change %d: %+v (reason %q), want %s failing since %v, disabled %q", i, c, reason, w.id, *w.since, w.disabled)
		}
	}
}

// Without a limit an endpoint is never disabled for failing, however long it fails; 410 still disables it.
func TestJudgeFailuresWithoutALimit(t *testing.T) {
	long := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	es := []store.WebhookEndpoint{{ID: "whk_a", Status: store.EndpointActive, FailingSince: &long}}
	fxs := []AttemptEffects{{Delivery: store.Delivery{EndpointID: "whk_a"}}}
	if changes := judgeFailures([]AttemptResult{{StartedAt: time.Now()}}, fxs, []string{"whk_a"}, es, 0, time.Now()); len(changes) != 0 || fxs[0].EndpointDisabled != "" {
		t.Errorf("changes %+v, effects %+v", changes, fxs)
	}
}

// applyAttempt: a success completes the delivery, a failure with a retry waits for it, a 410 or a failure without
// a retry fails it for good; each counts the attempt and releases the lease.
func TestApplyAttempt(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	next := at.Add(5 * time.Minute)
	lease := at.Add(time.Minute)
	for _, c := range []struct {
		name      string
		r         AttemptResult
		status    string
		next      *time.Time
		exhausted bool
	}{
		{"delivered", AttemptResult{Succeeded: true, StatusCode: ptr(200)}, store.DeliverySucceeded, nil, false},
		{"retried", AttemptResult{StatusCode: ptr(503), NextAttemptAt: &next}, store.DeliveryPending, &next, false},
		{"exhausted", AttemptResult{StatusCode: ptr(503)}, store.DeliveryFailed, nil, true},
		{"gone", AttemptResult{StatusCode: ptr(410), Gone: true, NextAttemptAt: &next}, store.DeliveryFailed, nil, true},
	} {
		d := store.Delivery{Status: store.DeliveryPending, Attempts: 2, LeaseUntil: &lease, NextAttemptAt: &at}
		exhausted := applyAttempt(&d, c.r, at)
		completed := c.status != store.DeliveryPending
		if d.Status != c.status || exhausted != c.exhausted || d.Attempts != 3 || d.LeaseUntil != nil ||
			!d.UpdatedAt.Equal(at) || (d.CompletedAt != nil) != completed || (d.NextAttemptAt == nil) != (c.next == nil) ||
			c.next != nil && !d.NextAttemptAt.Equal(*c.next) || d.LastStatusCode != c.r.StatusCode {
			t.Errorf("%s: %+v, exhausted %v", c.name, d, exhausted)
		}
	}
}

func ptr[T any](v T) *T { return &v }
