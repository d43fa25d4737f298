package webhook

import (
	"context"
	"slices"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/store"
)

// AttemptResult is what a dispatcher learned from one attempt of a leased delivery.
type AttemptResult struct {
	DeliveryID string
	// LeaseUntil is the lease the claim returned (nil: not checked). If the delivery holds another lease by the time
	// the attempt is recorded, its lease ran out and another dispatcher claimed it meanwhile: the attempt is logged,
	// and the delivery is left to its new holder.
	LeaseUntil *time.Time
	StartedAt  time.Time
	Duration   time.Duration
	StatusCode *int
	ErrorClass *string
	Excerpt    *string
	// ResponseHeaders and Signature are logged with the attempt (Sent's).
	ResponseHeaders map[string]string
	Signature       string
	Succeeded       bool
	// Gone disables the endpoint (the receiver answered 410).
	Gone bool
	// NextAttemptAt schedules a retry of a failed attempt; nil means the schedule is exhausted (failed for good).
	NextAttemptAt *time.Time

	// Claimed is the delivery as the claim returned it, under LeaseUntil. With it, a batch of successes on
	// PostgreSQL is recorded without reading its deliveries first (nil: they are read).
	Claimed *store.Delivery
}

// AttemptEffects tells what recording an attempt changed.
type AttemptEffects struct {
	// Delivery is the delivery after the attempt.
	Delivery store.Delivery
	// Missing is set when the delivery no longer exists (its endpoint or event was deleted): nothing was recorded.
	Missing bool
	// Superseded is set when another dispatcher holds the delivery now: only the attempt was logged. Delivery is
	// then as it was read, or as it was claimed.
	Superseded bool
	// EndpointDisabled is set to the reason ("gone", "failing") when this attempt disabled the endpoint.
	EndpointDisabled string
	// Exhausted is set when the delivery failed for good.
	Exhausted bool

	// endpointURL and failingSince (the start of the run of failures) describe the endpoint this attempt disabled.
	endpointURL  string
	failingSince *time.Time
}

// Recorder records attempts of leased deliveries with what follows from them: the delivery succeeds, waits for its
// retry or fails for good; an endpoint's run of failures starts or ends; an endpoint that answered 410 or has
// failed for too long is disabled; and the workspace is told (webhook.endpoint.disabled,
// webhook.delivery.exhausted) in the same transaction.
type Recorder struct {
	db     *store.DB
	events *events.Outbox
	// exhaustedType is the name of webhook.delivery.exhausted: its own exhaustion emits nothing, so that a broken
	// receiver cannot start an endless chain.
	exhaustedType string
	disableAfter  time.Duration
}

// NewRecorder returns a recorder over db that emits the operational events in outbox (nil: an outbox of the
// built-in types) and disables an endpoint that has failed without a success for disableAfter (zero: never).
func NewRecorder(db *store.DB, outbox *events.Outbox, disableAfter time.Duration) *Recorder {
	if outbox == nil {
		outbox = events.NewOutbox(db, events.Builtin())
	}
	exhausted, err := outbox.Types().TypeOf(gen.WebhookDeliveryExhaustedEvent{})
	if err != nil {
		panic(err) // the built-in payloads are compiled in; the events package's tests cover them
	}
	return &Recorder{db: db, events: outbox, exhaustedType: exhausted.Name, disableAfter: disableAfter}
}

// Record stores attempts and their consequences in one transaction: for each, the attempt log, the delivery's state
// with its lease released, the endpoint's run of failures and its disabling, and the operational events. One
// transaction for many attempts is what lets one SQLite writer keep up with thousands of attempts a second.
//
// A delivery appears at most once in a batch unless its results carry LeaseUntil: the first recorded result
// releases the lease, so a later one is Superseded.
//
// The effects are returned in the order of rs; an attempt of a delivery that no longer exists is skipped (Missing).
// Any error rolls back every attempt of the batch.
func (r *Recorder) Record(ctx context.Context, rs []AttemptResult) ([]AttemptEffects, error) {
	if fxs, ok, err := r.recordSuccesses(ctx, rs); ok {
		return fxs, err
	}
	var fxs []AttemptEffects
	// Losing this transaction in a database crash only sends its deliveries again (at least once), so it does not
	// wait for a disk flush (RunInRepeatableTx).
	err := r.db.RunInRepeatableTx(ctx, func(ctx context.Context, tx store.Querier) error {
		fxs = make([]AttemptEffects, len(rs))
		t := time.Now().UTC().Truncate(time.Microsecond)
		ids := make([]string, len(rs))
		for i, res := range rs {
			ids[i] = res.DeliveryID
		}
		current, err := r.db.Deliveries.ForRecording(ctx, tx, ids)
		if err != nil {
			return err
		}
		byID := make(map[string]store.Delivery, len(current))
		for _, d := range current {
			byID[d.ID] = d
		}
		attempts := make([]store.Attempt, 0, len(rs))
		changed := make([]store.Delivery, 0, len(rs))
		var succeeded, failing []string
		for i, res := range rs {
			fx := &fxs[i]
			d, ok := byID[res.DeliveryID]
			if !ok {
				fx.Missing = true
				continue
			}
			attempts = append(attempts, attemptOf(res))
			if res.LeaseUntil != nil && (d.LeaseUntil == nil || !d.LeaseUntil.Equal(*res.LeaseUntil)) {
				fx.Delivery, fx.Superseded = d, true
				continue
			}
			fx.Exhausted = applyAttempt(&d, res, t)
			fx.Delivery, byID[d.ID] = d, d
			changed = append(changed, d)
			switch {
			case res.Succeeded:
				succeeded = append(succeeded, d.EndpointID)
			case !slices.Contains(failing, d.EndpointID):
				failing = append(failing, d.EndpointID)
			}
		}
		if err := r.db.Deliveries.UpdateStates(ctx, tx, changed); err != nil {
			return err
		}
		// A success ends its endpoint's run of failures.
		if err := r.db.Webhooks.EndFailureRuns(ctx, tx, succeeded); err != nil {
			return err
		}
		if len(failing) > 0 {
			es, err := r.db.Webhooks.FailureRuns(ctx, tx, failing)
			if err != nil {
				return err
			}
			if err := r.db.Webhooks.ApplyFailureChanges(ctx, tx, judgeFailures(rs, fxs, failing, es, r.disableAfter, t), t); err != nil {
				return err
			}
		}
		if err := r.emitOperational(ctx, tx, fxs); err != nil {
			return err
		}
		if err := r.db.Deliveries.LogAttempts(ctx, tx, attempts); err != nil {
			return err
		}
		// A hook subscription whose receiver answered 410 is unsubscribed, as REST hooks expect: deleted with its
		// deliveries (the webhook.endpoint.disabled event above still tells the workspace).
		var gone []string
		for _, fx := range fxs {
			if fx.EndpointDisabled == "gone" {
				gone = append(gone, fx.Delivery.EndpointID)
			}
		}
		return r.db.Webhooks.DeleteGoneHooks(ctx, tx, gone)
	})
	if err != nil {
		return nil, err
	}
	return fxs, nil
}

// recordSuccesses records, on PostgreSQL, a batch in which every attempt succeeded, each of a different delivery
// whose claim it carries, with one statement (Deliveries.RecordSuccesses) instead of a transaction that reads the
// batch first. Nothing needs reading: a delivery still held under the lease of its claim is as the claim returned
// it, since whatever else changes a delivery (a redelivery, a release, another claim) changes or clears its lease,
// and a success leaves nothing to judge. ok is false when the batch does not qualify: Record then takes its
// transaction.
func (r *Recorder) recordSuccesses(ctx context.Context, rs []AttemptResult) (fxs []AttemptEffects, ok bool, err error) {
	if r.db.Dialect() != store.Postgres || len(rs) == 0 {
		return nil, false, nil
	}
	seen := make(map[string]bool, len(rs))
	for _, res := range rs {
		if !res.Succeeded || res.Claimed == nil || res.LeaseUntil == nil || seen[res.DeliveryID] {
			return nil, false, nil
		}
		seen[res.DeliveryID] = true
	}
	t := time.Now().UTC().Truncate(time.Microsecond)
	ss := make([]store.LeasedSuccess, len(rs))
	for i, res := range rs {
		ss[i] = store.LeasedSuccess{Lease: *res.LeaseUntil, Attempt: attemptOf(res)}
	}
	left, err := r.db.Deliveries.RecordSuccesses(ctx, t, ss)
	if err != nil {
		return nil, true, err
	}
	fxs = make([]AttemptEffects, len(rs))
	for i, res := range rs {
		superseded, wasLeft := left[res.DeliveryID]
		switch fx := &fxs[i]; {
		case !wasLeft:
			fx.Delivery = *res.Claimed
			applyAttempt(&fx.Delivery, res, t)
		case superseded:
			fx.Delivery, fx.Superseded = *res.Claimed, true
		default:
			fx.Missing = true
		}
	}
	return fxs, true, nil
}

// attemptOf is the delivery log's entry for an attempt.
func attemptOf(res AttemptResult) store.Attempt {
	return store.Attempt{ID: store.NewID("att"), DeliveryID: res.DeliveryID,
		StartedAt: res.StartedAt.UTC().Truncate(time.Microsecond), DurationMS: int(res.Duration.Milliseconds()),
		StatusCode: res.StatusCode, ErrorClass: res.ErrorClass, ResponseExcerpt: res.Excerpt,
		ResponseHeaders: res.ResponseHeaders, Signature: nonEmpty(res.Signature)}
}

// applyAttempt moves a delivery to the state an attempt leads to at t, and reports whether it failed for good: a
// success completes it, a failure with a retry scheduled waits for it, and a 410 or a failure with no retry left
// fails it.
func applyAttempt(d *store.Delivery, r AttemptResult, t time.Time) (exhausted bool) {
	d.Attempts++
	d.LastStatusCode, d.LastError, d.LeaseUntil, d.UpdatedAt = r.StatusCode, r.ErrorClass, nil, t
	switch {
	case r.Succeeded:
		d.Status, d.NextAttemptAt, d.CompletedAt = store.DeliverySucceeded, nil, &t
	case r.NextAttemptAt != nil && !r.Gone:
		next := r.NextAttemptAt.UTC().Truncate(time.Microsecond)
		d.Status, d.NextAttemptAt = store.DeliveryPending, &next
	default:
		d.Status, d.NextAttemptAt, d.CompletedAt = store.DeliveryFailed, nil, &t
		return true
	}
	return false
}

// failingEndpoint is an endpoint of a batch's failed attempts, as the batch leaves it.
type failingEndpoint struct {
	store.WebhookEndpoint
	// startRun and disable say what the batch changed: the run of failures started, the endpoint disabled.
	startRun, disable bool
}

// judgeFailures extends the run of failures of the endpoints of the failed attempts (es, read in the batch's
// transaction; ids lists them in the order their first failure came) and disables those that are gone or have been
// failing for disableAfter at t, noting in fxs which attempt disabled its endpoint. Failures are judged attempt by
// attempt, in order, so that an attempt sees what an earlier one of the batch did: only the first attempt to cross
// the limit disables. It returns the changes of the endpoints that changed, in the order of ids.
func judgeFailures(rs []AttemptResult, fxs []AttemptEffects, ids []string, es []store.WebhookEndpoint,
	disableAfter time.Duration, t time.Time) []store.FailureChange {
	endpoints := make(map[string]*failingEndpoint, len(es))
	for _, e := range es {
		endpoints[e.ID] = &failingEndpoint{WebhookEndpoint: e}
	}
	for i, r := range rs {
		fx := &fxs[i]
		if r.Succeeded || fx.Missing || fx.Superseded {
			continue
		}
		e := endpoints[fx.Delivery.EndpointID]
		if e == nil {
			continue // deleted with its deliveries: nothing left to judge
		}
		if e.FailingSince == nil {
			since := r.StartedAt.UTC().Truncate(time.Microsecond)
			e.FailingSince, e.startRun = &since, true
		}
		reason := ""
		switch {
		case e.Status == store.EndpointDisabled:
		case r.Gone:
			reason = "gone"
		case disableAfter > 0 && t.Sub(*e.FailingSince) >= disableAfter:
			reason = "failing"
		}
		if reason != "" {
			e.Status, e.DisabledReason, e.disable = store.EndpointDisabled, &reason, true
			fx.EndpointDisabled, fx.endpointURL, fx.failingSince = reason, e.URL, e.FailingSince
		}
	}
	var changes []store.FailureChange
	for _, id := range ids {
		e := endpoints[id]
		if e == nil || !e.startRun && !e.disable {
			continue
		}
		c := store.FailureChange{EndpointID: id}
		if e.startRun {
			c.FailingSince = e.FailingSince
		}
		if e.disable {
			c.DisabledReason = e.DisabledReason
		}
		changes = append(changes, c)
	}
	return changes
}

// emitOperational tells each workspace, in the attempts' transaction, that an endpoint was disabled or a delivery
// exhausted its retries.
func (r *Recorder) emitOperational(ctx context.Context, tx store.Querier, fxs []AttemptEffects) error {
	var ps []events.Pending
	for _, fx := range fxs {
		if fx.Missing || fx.Superseded {
			continue
		}
		dl := fx.Delivery
		if fx.EndpointDisabled != "" {
			ps = append(ps, events.Pending{WorkspaceID: dl.WorkspaceID, Payload: gen.WebhookEndpointDisabledEvent{
				WebhookId: dl.EndpointID, Url: fx.endpointURL, Reason: gen.WebhookEndpointDisabledEventReason(fx.EndpointDisabled),
				FailingSince: fx.failingSince}})
		}
		if fx.Exhausted && dl.EventType != r.exhaustedType {
			ps = append(ps, events.Pending{WorkspaceID: dl.WorkspaceID, Payload: gen.WebhookDeliveryExhaustedEvent{
				DeliveryId: dl.ID, WebhookId: dl.EndpointID, EventId: dl.EventID, EventType: dl.EventType,
				Attempts: dl.Attempts, LastStatusCode: dl.LastStatusCode, LastError: dl.LastError}})
		}
	}
	_, err := r.events.EmitMany(ctx, tx, ps)
	return err
}

// nonEmpty is s, or nil when it is empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
