package store

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Attempt is one HTTP attempt of a delivery, as the delivery log shows it.
type Attempt struct {
	bun.BaseModel `bun:"table:webhook_attempts,alias:a"`

	ID              string    `bun:"id,pk"`
	DeliveryID      string    `bun:"delivery_id"`
	StartedAt       time.Time `bun:"started_at"`
	DurationMS      int       `bun:"duration_ms"`
	StatusCode      *int      `bun:"status_code"`
	ErrorClass      *string   `bun:"error_class"`
	ResponseExcerpt *string   `bun:"response_excerpt"`
}

// Deliveries is the queue and log of webhook deliveries.
type Deliveries struct{ workspaceScoped[Delivery] }

// Claim leases up to limit due deliveries of active endpoints until now+lease, leaving out the endpoints in exclude
// (those at their in-flight cap or rate limit). Deliveries come in the order they fell due, and those due at the
// same instant in the order they were queued (IDs are time-ordered), so a backlog — deliveries that waited for a
// receiver to come back or for an endpoint to resume — goes out in event order.
//
// On PostgreSQL, FOR UPDATE SKIP LOCKED lets any number of dispatchers claim concurrently without taking the same
// delivery; on SQLite the single writer serialises claims, and a read connection first checks whether anything is
// claimable at all: the one dispatcher is woken by every commit (click batches included), and most of those wake-ups
// find nothing due, which must not take the writer. A delivery whose lease ran out (its dispatcher died) is due
// again and keeps its ID, so the receiver sees the same webhook-id.
func (s *Deliveries) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int, exclude []string) ([]Delivery, error) {
	now = now.UTC().Truncate(time.Microsecond)
	if s.db.dialect == SQLite {
		due, err := claimable(s.db.r.NewSelect(), now, exclude).Exists(ctx)
		if err != nil || !due {
			return nil, err
		}
	}
	sub := claimable(s.db.w.NewSelect(), now, exclude).Column("d2.id").OrderExpr("d2.next_attempt_at, d2.id").Limit(int64(limit))
	if s.db.dialect == Postgres {
		sub = sub.For("UPDATE OF d2 SKIP LOCKED")
	}
	var out []Delivery
	_, err := s.db.w.NewUpdate().Model(&out).ModelTableExpr("webhook_deliveries AS d").
		Set("lease_until = ?", now.Add(lease)).Set("updated_at = ?", now).
		Where("d.id IN (?)", sub).Returning("*").Exec(ctx, &out)
	if err != nil {
		return nil, err
	}
	// UPDATE … RETURNING returns rows in no particular order.
	sortDeliveries(out)
	return out, nil
}

// claimable selects, as d2, the deliveries Claim may take at now: pending, due, not leased, of an active endpoint
// not in exclude. The pending partial index serves it in due order.
func claimable(q *bun.SelectQuery, now time.Time, exclude []string) *bun.SelectQuery {
	// The endpoint's status is checked with NOT EXISTS rather than a join: an anti-join keeps the deliveries as the
	// driving side, so the planner walks the pending index in order and stops at the limit even when its statistics
	// predate a sudden backlog (a join lets it start from the endpoints and sort every due delivery).
	q = q.TableExpr("webhook_deliveries AS d2").
		Where("d2.status = ?", DeliveryPending).Where("d2.next_attempt_at <= ?", now).
		Where("(d2.lease_until IS NULL OR d2.lease_until <= ?)", now).
		Where("NOT EXISTS (SELECT 1 FROM webhook_endpoints AS e WHERE e.id = d2.endpoint_id AND e.status <> ?)", EndpointActive)
	if len(exclude) > 0 {
		q = q.Where("d2.endpoint_id NOT IN (?)", bun.In(exclude))
	}
	return q
}

// sortDeliveries orders deliveries as Claim promises: by due time, then ID.
func sortDeliveries(ds []Delivery) {
	slices.SortFunc(ds, func(a, b Delivery) int {
		if c := cmp.Compare(dueTime(a).UnixMicro(), dueTime(b).UnixMicro()); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

func dueTime(d Delivery) time.Time {
	if d.NextAttemptAt == nil {
		return time.Time{}
	}
	return *d.NextAttemptAt
}

// ForSending returns the endpoints and events of claimed deliveries, by ID, in one query each, so a dispatcher
// does not read them once per delivery. A delivery whose endpoint or event is missing from the maps was deleted
// with them after the claim.
func (s *Deliveries) ForSending(ctx context.Context, ds []Delivery) (map[string]WebhookEndpoint, map[string]Event, error) {
	if len(ds) == 0 {
		return nil, nil, nil
	}
	endpointIDs, eventIDs := make([]string, 0, len(ds)), make([]string, 0, len(ds))
	seen := make(map[string]bool, len(ds))
	for _, d := range ds {
		if !seen[d.EndpointID] {
			seen[d.EndpointID] = true
			endpointIDs = append(endpointIDs, d.EndpointID)
		}
		eventIDs = append(eventIDs, d.EventID)
	}
	var es []WebhookEndpoint
	if err := s.db.r.NewSelect().Model(&es).Where("e.id IN (?)", bun.In(endpointIDs)).Scan(ctx); err != nil {
		return nil, nil, err
	}
	var evs []Event
	if err := s.db.r.NewSelect().Model(&evs).Where("ev.id IN (?)", bun.In(eventIDs)).Scan(ctx); err != nil {
		return nil, nil, err
	}
	endpoints, events := make(map[string]WebhookEndpoint, len(es)), make(map[string]Event, len(evs))
	for _, e := range es {
		endpoints[e.ID] = e
	}
	for _, ev := range evs {
		events[ev.ID] = ev
	}
	return endpoints, events, nil
}

// AttemptResult is what a dispatcher learned from one attempt of a leased delivery, and what follows from it.
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
	Succeeded  bool
	// Gone disables the endpoint (the receiver answered 410).
	Gone bool
	// NextAttemptAt schedules a retry of a failed attempt; nil means the schedule is exhausted (failed for good).
	NextAttemptAt *time.Time
	// DisableAfter disables the endpoint when its failures have lasted this long (zero: never).
	DisableAfter time.Duration
}

// AttemptEffects tells the caller what recording an attempt changed beyond the delivery.
type AttemptEffects struct {
	// Delivery is the delivery after the attempt.
	Delivery Delivery
	// Missing is set when the delivery no longer exists (its endpoint or event was deleted): nothing was recorded.
	Missing bool
	// Superseded is set when another dispatcher holds the delivery now: only the attempt was logged.
	Superseded bool
	// EndpointDisabled is set to the reason ("gone", "failing") when this attempt disabled the endpoint; EndpointURL
	// and FailingSince (the start of the run of failures) are then set too.
	EndpointDisabled string
	EndpointURL      string
	FailingSince     *time.Time
	// Exhausted is set when the delivery failed for good.
	Exhausted bool
}

// RecordAttempt records one attempt; see RecordAttempts. Returns ErrNotFound if the delivery no longer exists.
func (s *Deliveries) RecordAttempt(ctx context.Context, r AttemptResult, then func(ctx context.Context, tx bun.Tx, fx AttemptEffects) error) (AttemptEffects, error) {
	fxs, err := s.RecordAttempts(ctx, []AttemptResult{r}, then)
	if err != nil {
		return AttemptEffects{}, err
	}
	if fxs[0].Missing {
		return fxs[0], ErrNotFound
	}
	return fxs[0], nil
}

// RecordAttempts stores attempts and their consequences in one transaction: for each, the attempt log, the
// delivery's state (succeeded, scheduled again or failed) with its lease released, the endpoint's run of failures,
// and the endpoint disabled when it is gone or has failed for too long. then runs inside the same transaction with
// the effects of each recorded attempt, so operational events (endpoint disabled, delivery exhausted) are emitted
// atomically with the change. One transaction for many attempts is what lets one SQLite writer keep up with
// thousands of attempts a second.
//
// A delivery appears at most once in a batch unless its results carry LeaseUntil: the first recorded result
// releases the lease, so a later one is Superseded.
//
// The effects are returned in the order of rs; an attempt of a delivery that no longer exists is skipped (Missing).
// Any error rolls back every attempt of the batch.
func (s *Deliveries) RecordAttempts(ctx context.Context, rs []AttemptResult, then func(ctx context.Context, tx bun.Tx, fx AttemptEffects) error) ([]AttemptEffects, error) {
	fxs := make([]AttemptEffects, len(rs))
	err := s.db.w.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		t := now()
		ids := make([]string, len(rs))
		for i, r := range rs {
			ids[i] = r.DeliveryID
		}
		var current []Delivery
		if err := tx.NewSelect().Model(&current).Where("d.id IN (?)", bun.In(ids)).Scan(ctx); err != nil {
			return err
		}
		byID := make(map[string]Delivery, len(current))
		for _, d := range current {
			byID[d.ID] = d
		}
		attempts := make([]Attempt, 0, len(rs))
		changed := make([]Delivery, 0, len(rs))
		for i, r := range rs {
			fx := &fxs[i]
			d, ok := byID[r.DeliveryID]
			if !ok {
				fx.Missing = true
				continue
			}
			attempts = append(attempts, Attempt{ID: NewID("att"), DeliveryID: d.ID,
				StartedAt: r.StartedAt.UTC().Truncate(time.Microsecond), DurationMS: int(r.Duration.Milliseconds()),
				StatusCode: r.StatusCode, ErrorClass: r.ErrorClass, ResponseExcerpt: r.Excerpt})
			if r.LeaseUntil != nil && (d.LeaseUntil == nil || !d.LeaseUntil.Equal(*r.LeaseUntil)) {
				fx.Delivery, fx.Superseded = d, true
				continue
			}
			fx.Exhausted = applyAttempt(&d, r, t)
			fx.Delivery, byID[d.ID] = d, d
			changed = append(changed, d)
		}
		if len(changed) > 0 {
			// One statement for the whole batch: a round trip per delivery is what limits a recorder on PostgreSQL.
			if _, err := tx.NewUpdate().Model(&changed).Column("status", "attempts", "next_attempt_at", "lease_until",
				"last_status_code", "last_error", "updated_at", "completed_at").Bulk().Exec(ctx); err != nil {
				return err
			}
		}
		// A success ends its endpoint's run of failures: one statement for the endpoints of the batch.
		var succeeded []string
		for i, r := range rs {
			if fx := fxs[i]; r.Succeeded && !fx.Missing && !fx.Superseded {
				succeeded = append(succeeded, fx.Delivery.EndpointID)
			}
		}
		if len(succeeded) > 0 {
			if _, err := tx.NewUpdate().Table("webhook_endpoints").Set("failing_since = NULL").
				Where("id IN (?) AND failing_since IS NOT NULL", bun.In(succeeded)).Exec(ctx); err != nil {
				return err
			}
		}
		if err := s.recordFailures(ctx, tx, rs, fxs, t); err != nil {
			return err
		}
		if then != nil {
			for _, fx := range fxs {
				if fx.Missing || fx.Superseded {
					continue
				}
				if err := then(ctx, tx, fx); err != nil {
					return err
				}
			}
		}
		if len(attempts) > 0 {
			if _, err := tx.NewInsert().Model(&attempts).Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, mapErr(err)
	}
	return fxs, nil
}

// applyAttempt moves a delivery to the state an attempt leads to at t, and reports whether it failed for good.
func applyAttempt(d *Delivery, r AttemptResult, t time.Time) (exhausted bool) {
	d.Attempts++
	d.LastStatusCode, d.LastError, d.LeaseUntil, d.UpdatedAt = r.StatusCode, r.ErrorClass, nil, t
	switch {
	case r.Succeeded:
		d.Status, d.NextAttemptAt, d.CompletedAt = DeliverySucceeded, nil, &t
	case r.NextAttemptAt != nil && !r.Gone:
		next := r.NextAttemptAt.UTC().Truncate(time.Microsecond)
		d.Status, d.NextAttemptAt = DeliveryPending, &next
	default:
		d.Status, d.NextAttemptAt, d.CompletedAt = DeliveryFailed, nil, &t
		return true
	}
	return false
}

// failingEndpoint is an endpoint of a batch's failed attempts, as the batch leaves it.
type failingEndpoint struct {
	WebhookEndpoint
	// startRun and disable say what the batch changed: the run of failures started, the endpoint disabled.
	startRun, disable bool
}

// recordFailures extends the run of failures of the endpoints of the failed attempts and disables those that are
// gone or have been failing for too long, noting in fxs which attempt disabled its endpoint. The endpoints are
// read once and judged attempt by attempt, in order, so that an attempt sees what an earlier one of the batch did
// (only the first attempt to cross the limit disables); only endpoints that changed are written.
func (s *Deliveries) recordFailures(ctx context.Context, tx bun.Tx, rs []AttemptResult, fxs []AttemptEffects, t time.Time) error {
	var ids []string
	for i, r := range rs {
		if fx := fxs[i]; !r.Succeeded && !fx.Missing && !fx.Superseded && !slices.Contains(ids, fx.Delivery.EndpointID) {
			ids = append(ids, fx.Delivery.EndpointID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var es []WebhookEndpoint
	if err := tx.NewSelect().Model(&es).Column("id", "url", "status", "failing_since").
		Where("e.id IN (?)", bun.In(ids)).Scan(ctx); err != nil {
		return err
	}
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
		case e.Status == EndpointDisabled:
		case r.Gone:
			reason = "gone"
		case r.DisableAfter > 0 && t.Sub(*e.FailingSince) >= r.DisableAfter:
			reason = "failing"
		}
		if reason != "" {
			e.Status, e.DisabledReason, e.disable = EndpointDisabled, &reason, true
			fx.EndpointDisabled, fx.EndpointURL, fx.FailingSince = reason, e.URL, e.FailingSince
		}
	}
	for _, id := range ids {
		e := endpoints[id]
		if e == nil || !e.startRun && !e.disable {
			continue
		}
		q := tx.NewUpdate().Table("webhook_endpoints").Where("id = ?", e.ID)
		if e.startRun {
			q = q.Set("failing_since = ?", *e.FailingSince)
		}
		if e.disable {
			q = q.Set("status = ?", EndpointDisabled).Set("disabled_reason = ?", *e.DisabledReason).Set("updated_at = ?", t)
		}
		if _, err := q.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Attempts returns a delivery's attempts, oldest first.
func (s *Deliveries) Attempts(ctx context.Context, deliveryID string) ([]Attempt, error) {
	as := []Attempt{}
	err := s.db.r.NewSelect().Model(&as).Where("a.delivery_id = ?", deliveryID).Order("a.id").Scan(ctx)
	return as, err
}

// Get returns a delivery of a workspace. Returns ErrNotFound if it is not in that workspace.
func (s *Deliveries) Get(ctx context.Context, workspaceID, id string) (Delivery, error) {
	return s.get(ctx, workspaceID, id)
}

// Release gives back leased deliveries without an attempt: a dispatcher claimed more of one endpoint than its
// in-flight cap or rate allows. They are due again at notBefore (at once when it is zero or past); until then no
// dispatcher claims them.
func (s *Deliveries) Release(ctx context.Context, ids []string, notBefore time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	var until *time.Time
	if !notBefore.IsZero() {
		u := notBefore.UTC().Truncate(time.Microsecond)
		until = &u
	}
	_, err := s.db.w.NewUpdate().Table("webhook_deliveries").Set("lease_until = ?", until).
		Where("id IN (?) AND status = ?", bun.In(ids), DeliveryPending).Exec(ctx)
	return err
}

// QueueStats describes the delivery queue, for metrics.
type QueueStats struct {
	// Pending counts the deliveries waiting for an attempt, due now or later, whatever their endpoint's status.
	Pending int64
	// OldestDue is when the longest-waiting due delivery of an active endpoint fell due (nil when none is due):
	// the age of the backlog the dispatchers have not caught up with. Paused and disabled endpoints wait on purpose
	// and are left out.
	OldestDue *time.Time
}

// QueueStats reads the state of the delivery queue at now, with two indexed queries.
func (s *Deliveries) QueueStats(ctx context.Context, now time.Time) (QueueStats, error) {
	var st QueueStats
	n, err := s.db.r.NewSelect().Table("webhook_deliveries").Where("status = ?", DeliveryPending).Count(ctx)
	if err != nil {
		return st, err
	}
	st.Pending = n
	var due []time.Time
	err = s.db.r.NewSelect().TableExpr("webhook_deliveries AS d").Column("d.next_attempt_at").
		Join("JOIN webhook_endpoints AS e ON e.id = d.endpoint_id").
		Where("d.status = ?", DeliveryPending).Where("d.next_attempt_at <= ?", now.UTC().Truncate(time.Microsecond)).
		Where("e.status = ?", EndpointActive).OrderExpr("d.next_attempt_at").Limit(1).Scan(ctx, &due)
	if err != nil {
		return st, err
	}
	if len(due) == 1 {
		st.OldestDue = &due[0]
	}
	return st, nil
}
